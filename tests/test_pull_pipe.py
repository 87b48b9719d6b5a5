"""The pull through the system ssh client (a large file over a fast link), against a real
OpenSSH sshd: the client writes the part file itself and the cockpit hashes it behind the
client. The same custody guarantees as SFTP (hash against the manifest, nothing partial under
a final name, resume from the part, a changed or shrunk remote refused, a grown one cut at the
manifest's size, hostile names literal), the part capped at the file's size whatever the other
end sends, and host keys as strict as the cockpit's own: a client that cannot verify the key
moves nothing and the file comes over the SFTP connection the cockpit already verified."""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import threading
from pathlib import Path

import pytest

from cockpit.models.custody import Manifest
from cockpit.services.custody.pull import local_path, part_path, pull, remote_manifest
from cockpit.services.transport import ssh, sshpipe
from cockpit.services.transport.remote import SshBox
from cockpit.services.transport.sshpipe import SshPipe, pipe_argv, stream_command
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

        def start(pipe: SshPipe, out_fd: int, limit: int) -> None:
            self.pipes.append(pipe)
            real(pipe, out_fd, limit)

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


class HalfFed:
    """The remote file replaced by a FIFO that is fed `count` bytes and kept open: a client
    reading it has those bytes and waits for more (a transfer caught mid-stream, for sure).
    `restore()` puts the real file back."""

    def __init__(self, cell: Path, data: bytes, count: int) -> None:
        self.source, self.aside = cell / "weights.bin", cell / "weights.keep"
        self.source.rename(self.aside)
        os.mkfifo(self.source)
        self.release = threading.Event()
        self.feeder = asyncio.ensure_future(asyncio.to_thread(self._feed, data[:count]))

    def _feed(self, data: bytes) -> None:
        with self.source.open("wb") as fifo:
            fifo.write(data)
            fifo.flush()
            self.release.wait(60)

    async def restore(self) -> None:
        self.release.set()
        with contextlib.suppress(BrokenPipeError):
            await self.feeder
        self.source.unlink()
        self.aside.rename(self.source)


def size_of(part: Path) -> int:
    return part.stat().st_size if part.is_file() else 0


async def wait_for_part(part: Path, size: int, pulling: asyncio.Future[object]) -> None:
    while size_of(part) < size:
        assert not pulling.done(), pulling.result()
        await asyncio.sleep(0.01)


async def test_sshd_killed_mid_stream_leaves_a_part_that_resumes(
        sshd: Sshd, tmp_path: Path, spy: Spy) -> None:
    remote, manifest, cell, data, target = await open_box(sshd, tmp_path)
    final = local_path(tmp_path / "pulled", manifest.files[0])
    half = SIZE // 2
    fed = HalfFed(cell, data, half)
    try:
        async with asyncio.timeout(60):
            pulling = asyncio.ensure_future(pull(remote, manifest, tmp_path / "pulled"))
            await wait_for_part(part_path(final), half, pulling)
            sshd.stop()  # sshd and every session it forked, mid-stream
            first = await pulling
        assert not first.ok and "interrupted" in first.failures[0].detail
        assert not final.exists()
        assert part_path(final).read_bytes() == data[:half]
    finally:
        await fed.restore()
        await remote.close()
    sshd.start()
    remote = SshBox(await ssh.connect(target), owns=True, target=target)
    try:
        second = await pull(remote, manifest, tmp_path / "pulled")
        assert second.ok, second.failures
        assert second.bytes_moved == SIZE - half and spy.pipes[-1].moved == SIZE - half
        assert final.read_bytes() == data
    finally:
        await remote.close()


async def test_a_cancelled_pull_ends_its_ssh_client_and_keeps_the_part(
        sshd: Sshd, tmp_path: Path, spy: Spy) -> None:
    remote, manifest, cell, data, _ = await open_box(sshd, tmp_path)
    final = local_path(tmp_path / "pulled", manifest.files[0])
    fed = HalfFed(cell, data, SIZE // 3)
    try:
        async with asyncio.timeout(60):
            pulling = asyncio.ensure_future(pull(remote, manifest, tmp_path / "pulled"))
            await wait_for_part(part_path(final), SIZE // 3, pulling)
            pulling.cancel()
            with pytest.raises(asyncio.CancelledError):
                await pulling
        client = spy.pipes[0].process
        assert client is not None and client.poll() is not None, "the ssh client still runs"
        assert not final.exists() and part_path(final).read_bytes() == data[:SIZE // 3]
    finally:
        await fed.restore()
        await remote.close()


async def test_a_remote_file_that_grew_is_cut_at_the_manifests_size(
        sshd: Sshd, tmp_path: Path, spy: Spy) -> None:
    remote, manifest, cell, data, _ = await open_box(sshd, tmp_path)
    with (cell / "weights.bin").open("ab") as grown:
        grown.write(os.urandom(SIZE))  # appended after the manifest was taken
    dest = tmp_path / "pulled"
    try:
        result = await pull(remote, manifest, dest)
        assert result.ok, result.failures
        assert len(spy.pipes) == 1 and result.bytes_moved == SIZE
        assert local_path(dest, manifest.files[0]).read_bytes() == data
    finally:
        await remote.close()


async def test_on_a_far_link_the_started_client_is_ended_and_sftp_carries_the_file(
        sshd: Sshd, tmp_path: Path, spy: Spy, monkeypatch: pytest.MonkeyPatch) -> None:
    # The client starts while the round trip is timed; a link found far (here: any link)
    # ends it, cuts off whatever it wrote, and the file comes over SFTP, whole and hashed.
    monkeypatch.setattr(sshpipe, "PIPE_MAX_RTT", 0.0)
    remote, manifest, _, data, _ = await open_box(sshd, tmp_path)
    dest = tmp_path / "pulled"
    try:
        result = await pull(remote, manifest, dest)
        assert result.ok, result.failures
        assert len(spy.pipes) == 1 and spy.pipes[0].moved == 0 and spy.pipes[0].stopped
        client = spy.pipes[0].process
        assert client is not None and client.poll() is not None
        assert result.bytes_moved == SIZE
        assert local_path(dest, manifest.files[0]).read_bytes() == data
    finally:
        await remote.close()


def test_the_client_cannot_grow_the_part_past_the_file_size(tmp_path: Path) -> None:
    # A box that sends more than it was asked for: the client's writes stop at the limit.
    # A real process writing without end stands in for it (no ssh needed to test the cap);
    # its first write comes a second after the start, long after the cap is set.
    part = tmp_path / "part"
    pipe = SshPipe(["sh", "-c", "sleep 1; head -c 5000000 /dev/zero"], 1 << 20)
    with part.open("ab") as out:
        pipe.start(out.fileno(), 1 << 20)
    assert pipe.process is not None
    limits = Path(f"/proc/{pipe.process.pid}/limits")
    if limits.exists():  # Linux: the caps are on the client itself, while it still waits
        table = {line[:26].strip(): line[26:].split()[:2] for line in limits.read_text().splitlines()}
        assert table["Max file size"] == [str(1 << 20)] * 2
        assert table["Max core file size"] == ["0", "0"]
    status = pipe.process.wait(30)
    assert part.stat().st_size <= 1 << 20
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    assert soft == resource.RLIM_INFINITY or soft > 1 << 20, "the cockpit's own limit is untouched"
    assert status != 0


def test_the_client_argv_is_strict_and_refuses_paths_it_would_expand(tmp_path: Path) -> None:
    argv = pipe_argv("/usr/bin/ssh", "/c/ssh_config", "gpu-box-1", 2222, "root",
                     ["/k/known_hosts"], ["/k/id"], 10.0, stream_command("a b", 0))
    assert argv is not None
    options = [argv[i + 1] for i, a in enumerate(argv) if a == "-o"]
    for strict in ("BatchMode=yes", "StrictHostKeyChecking=yes", "UserKnownHostsFile=/k/known_hosts",
                   "GlobalKnownHostsFile=/dev/null", "ControlMaster=no", "ForwardAgent=no",
                   "ClearAllForwardings=yes", "PermitLocalCommand=no", "IdentitiesOnly=yes"):
        assert strict in options
    assert argv[-3:] == ["--", "gpu-box-1", "cat -- 'a b'"]
    assert stream_command("-x", 5) == ["tail", "-c", "+6", "--", "-x"]
    for bad in ("/k/known hosts", "/k/%h", "~/k", "/k/\"q"):
        assert pipe_argv("/usr/bin/ssh", "/c/ssh_config", "h", 22, None, [bad], [], 10.0,
                         ["true"]) is None
    assert pipe_argv("/usr/bin/ssh", "/c/ssh_config", "h", 22, None, [], [], 10.0, ["true"]) is None



@pytest.mark.parametrize("line", ["ProxyJump jump-box", "ProxyCommand nc %h %p"])
def test_a_box_behind_a_jump_keeps_to_sftp(tmp_path: Path, line: str) -> None:
    # OpenSSH starts the jump's own client without the strict options of the command line,
    # so such a box never gets the system client (a direct one does, the control case).
    import asyncssh

    config, known = tmp_path / "ssh_config", tmp_path / "known_hosts"
    config.write_text(f"Host behind\n  {line}\nHost direct\n  Port 2222\n")
    known.write_text("")

    def box(alias: str) -> SshBox:
        options = asyncssh.SSHClientConnectionOptions(host=alias, config=[str(config)],
                                                      known_hosts=str(known))
        target = ssh.Target(alias, alias, 22, options, (known,), (str(config),))
        return SshBox(None, target=target)

    assert box("direct").streams(sshpipe.PIPE_MIN_BYTES)
    assert not box("direct").streams(sshpipe.PIPE_MIN_BYTES - 1)
    assert not box("behind").streams(sshpipe.PIPE_MIN_BYTES)
