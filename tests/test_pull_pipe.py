"""The pull through the system ssh client (a large file over a fast link), against a real
OpenSSH sshd: the same custody guarantees as SFTP (hash against the manifest, nothing partial
under a final name, resume from the part, a changed or shrunk remote refused, hostile names
literal), and host keys as strict as the cockpit's own: a client that cannot verify the key
moves nothing and the file comes over the SFTP connection the cockpit already verified."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cockpit.models.custody import Manifest
from cockpit.services.custody import pull as pull_mod
from cockpit.services.custody.pull import local_path, part_path, pull, remote_manifest
from cockpit.services.transport import ssh, sshpipe
from cockpit.services.transport.remote import SshBox
from cockpit.services.transport.sshpipe import SshPipe, pipe_argv
from tests.sshd import Sshd, keygen
from tests.test_pull_sshd import instance_for, pwned

pytestmark = pytest.mark.sshd
SIZE = 6 << 20
HOSTILE = "we ird $(touch PWNED) `touch PWNED` 'q\";x.bin"


class Spy:
    """Records every pipe the box starts (and what it moved)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pipes: list[SshPipe] = []
        real = SshPipe.start

        def start(pipe: SshPipe) -> None:
            self.pipes.append(pipe)
            real(pipe)

        monkeypatch.setattr(SshPipe, "start", start)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Spy:
    # Small files take the pipe too, so the test data stays small.
    monkeypatch.setattr(sshpipe, "PIPE_MIN_BYTES", 1 << 20)
    return Spy(monkeypatch)


def write_box(root: Path, name: str = "weights.bin") -> tuple[Path, bytes]:
    box = root / "box"
    cell = box / "durable" / "cellA"
    cell.mkdir(parents=True)
    data = os.urandom(SIZE)
    (cell / name).write_bytes(data)
    return box, data


async def open_box(sshd: Sshd, tmp_path: Path, name: str = "weights.bin"
                   ) -> tuple[SshBox, Manifest, Path, bytes, ssh.Target]:
    box, data = write_box(tmp_path, name)
    inst, target = instance_for(tmp_path, sshd, box)
    remote = SshBox(await ssh.connect(target), owns=True, target=target)
    state = await remote_manifest(remote, inst.name, str(box / "durable"), None, ["cellA"])
    return remote, state.manifest, box / "durable" / "cellA", data, target


async def test_a_large_file_comes_through_the_ssh_client_and_resumes_from_its_part(
        sshd: Sshd, tmp_path: Path, spy: Spy) -> None:
    remote, manifest, _, data, _ = await open_box(sshd, tmp_path)
    entry = manifest.files[0]
    dest = tmp_path / "pulled"
    final = local_path(dest, entry)
    try:
        # A part from an earlier, cut pull: only the rest moves, and the whole is hashed.
        final.parent.mkdir(parents=True)
        kept = SIZE // 3
        part_path(final).write_bytes(data[:kept])
        result = await pull(remote, manifest, dest)
        assert result.ok, result.failures
        assert [p.moved for p in spy.pipes] == [SIZE - kept] and remote.pipes
        assert result.bytes_moved == SIZE - kept
        assert final.read_bytes() == data and not part_path(final).exists()
    finally:
        await remote.close()


async def test_a_changed_or_shrunk_remote_is_refused_and_nothing_lands(
        sshd: Sshd, tmp_path: Path, spy: Spy) -> None:
    remote, manifest, cell, data, _ = await open_box(sshd, tmp_path)
    dest = tmp_path / "pulled"
    final = local_path(dest, manifest.files[0])
    try:
        (cell / "weights.bin").write_bytes(bytes(SIZE))  # same size, other bytes
        changed = await pull(remote, manifest, dest)
        assert not changed.ok and "SHA-256 differs" in changed.failures[0].detail
        assert not final.exists() and not part_path(final).exists()
        (cell / "weights.bin").write_bytes(data[: SIZE // 2])
        shrunk = await pull(remote, manifest, dest)
        assert not shrunk.ok and "shorter than the manifest" in shrunk.failures[0].detail
        assert not final.exists()
        assert len(spy.pipes) == 2
    finally:
        await remote.close()


async def test_hostile_names_are_literal_through_the_ssh_client(
        sshd: Sshd, tmp_path: Path, spy: Spy) -> None:
    remote, manifest, _, data, _ = await open_box(sshd, tmp_path, HOSTILE)
    dest = tmp_path / "pulled"
    try:
        result = await pull(remote, manifest, dest)
        assert result.ok, result.failures
        assert len(spy.pipes) == 1
        assert local_path(dest, manifest.files[0]).read_bytes() == data
        assert not pwned(tmp_path) and not pwned(Path.home())
    finally:
        await remote.close()


@pytest.mark.parametrize("known", ["other key", "no entry"])
async def test_a_client_that_cannot_verify_the_host_key_moves_nothing_and_sftp_carries_it(
        sshd: Sshd, tmp_path: Path, spy: Spy, known: str) -> None:
    # The cockpit's connection was verified; the second client gets only the known_hosts the
    # cockpit trusts. Here they hold another key for this host (or none): the client must
    # refuse before one byte, and the file must still arrive, over the verified SFTP.
    remote, manifest, _, data, target = await open_box(sshd, tmp_path)
    other = tmp_path / "other_key"
    keygen(other)
    wrong = tmp_path / "known_hosts_wrong"
    wrong.write_text(sshd.known_hosts_line(other) if known == "other key" else "")
    # The ssh_config still names the right known_hosts: the client's own options must win.
    remote.target = ssh.Target(target.alias, target.host, target.port, target.options, (wrong,),
                               target.config_files, target.connect_timeout, target.known_hosts,
                               target.identity_files)
    dest = tmp_path / "pulled"
    try:
        result = await pull(remote, manifest, dest)
        assert result.ok, result.failures
        assert [p.moved for p in spy.pipes] == [0]
        assert "Host key verification failed" in spy.pipes[0].stderr
        assert not remote.pipes, "a refused client is not tried again on this box"
        assert local_path(dest, manifest.files[0]).read_bytes() == data
    finally:
        await remote.close()


async def test_sshd_killed_mid_stream_leaves_a_part_that_resumes(
        sshd: Sshd, tmp_path: Path, spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    remote, manifest, _, data, target = await open_box(sshd, tmp_path)
    final = local_path(tmp_path / "pulled", manifest.files[0])
    real_store = pull_mod._Sink.store

    def kill_at_a_quarter(sink: pull_mod._Sink, blocks: list[bytes]) -> None:
        real_store(sink, blocks)
        if sshd.proc is not None and sink.written >= SIZE // 4:
            sshd.stop()  # sshd and every session it forked, mid-stream

    monkeypatch.setattr(pull_mod._Sink, "store", kill_at_a_quarter)
    monkeypatch.setattr(sshpipe, "PIPE_BUFFER", 256 << 10)  # many blocks: the kill lands mid-file
    try:
        first = await pull(remote, manifest, tmp_path / "pulled")
        assert not first.ok and "interrupted" in first.failures[0].detail
        assert not final.exists()
        kept = part_path(final).stat().st_size
        assert SIZE // 4 <= kept < SIZE
        assert data.startswith(part_path(final).read_bytes())
    finally:
        await remote.close()
    monkeypatch.setattr(pull_mod._Sink, "store", real_store)
    sshd.start()
    remote = SshBox(await ssh.connect(target), owns=True, target=target)
    try:
        second = await pull(remote, manifest, tmp_path / "pulled")
        assert second.ok, second.failures
        assert second.bytes_moved == SIZE - kept and spy.pipes[-1].moved == SIZE - kept
        assert final.read_bytes() == data
    finally:
        await remote.close()


def test_the_client_argv_is_strict_and_refuses_paths_it_would_expand(tmp_path: Path) -> None:
    argv = pipe_argv("/usr/bin/ssh", "/c/ssh_config", "gpu-box-1", 2222, "root",
                     ["/k/known_hosts"], ["/k/id"], 10.0, ["tail", "-c", "+1", "--", "a b"])
    assert argv is not None
    options = [argv[i + 1] for i, a in enumerate(argv) if a == "-o"]
    for strict in ("BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/k/known_hosts",
                   "GlobalKnownHostsFile=/dev/null", "ControlMaster=no", "ForwardAgent=no",
                   "ClearAllForwardings=yes", "PermitLocalCommand=no", "IdentitiesOnly=yes"):
        assert strict in options
    assert argv[-3:] == ["--", "gpu-box-1", "tail -c +1 -- 'a b'"]
    for bad in ("/k/known hosts", "/k/%h", "~/k", "/k/\"q"):
        assert pipe_argv("/usr/bin/ssh", "/c/ssh_config", "h", 22, None, [bad], [], 10.0,
                         ["true"]) is None
    assert pipe_argv("/usr/bin/ssh", "/c/ssh_config", "h", 22, None, [], [], 10.0, ["true"]) is None

