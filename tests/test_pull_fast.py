"""The pipelined pull against a real OpenSSH sshd: many reads in flight, a read-ahead budget
shared by the files, and every custody guarantee kept (nothing partial under a final name, a
resume that moves only the missing bytes, a changed remote file refused, a silent box timed
out), plus the verification pool started whole before the checks."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from cockpit.models.custody import Manifest
from cockpit.services.custody import pull as pull_mod
from cockpit.services.custody.pull import PART_SUFFIX, local_path, part_path, pull, remote_manifest
from cockpit.services.custody.verify import make_pool, start_workers
from cockpit.services.transport import ssh
from cockpit.services.transport.remote import (
    SFTP_MAX_WINDOW,
    SFTP_NEAR_WINDOW,
    RemoteFile,
    SshBox,
    window_for,
)
from tests.sshd import Sshd
from tests.test_pull_sshd import instance_for

pytestmark = pytest.mark.sshd
BIG = 40 << 20
SMALL = 30


class Tap:
    """Wraps a real SFTP file: counts the bytes each read brings, and can fail or go silent
    from a given offset on (the link dying, or a box that stops answering)."""

    def __init__(self, inner: RemoteFile, box: TapBox) -> None:
        self.inner = inner
        self.box = box
        self.read_size = inner.read_size

    def deadline(self, size: int) -> float:
        return self.box.deadline if self.box.deadline is not None else self.inner.deadline(size)

    async def _gate(self, offset: int) -> None:
        if self.box.fail_at is not None and offset >= self.box.fail_at:
            raise ConnectionResetError("link cut (test)")
        if self.box.silent_at is not None and offset >= self.box.silent_at:
            await asyncio.Event().wait()  # never answers

    async def read(self, size: int, offset: int) -> bytes:
        await self._gate(offset)
        data = await self.inner.read(size, offset)
        self.box.moved += len(data)
        return data

    async def read_ahead(self, size: int, offset: int) -> bytes:
        await self._gate(offset)
        data = await self.inner.read_ahead(size, offset)
        self.box.moved += len(data)
        self.box.offsets.append(offset)
        return data

    async def close(self) -> None:
        await self.inner.close()


class TapBox:
    """An SshBox whose files are Taps."""

    def __init__(self, inner: SshBox) -> None:
        self.inner = inner
        self.moved = 0
        self.offsets: list[int] = []
        self.fail_at: int | None = None
        self.silent_at: int | None = None
        self.deadline: float | None = None

    async def run(self, argv: list[str], timeout: float) -> Any:
        return await self.inner.run(argv, timeout)

    async def open(self, path: str) -> RemoteFile:
        return Tap(await self.inner.open(path), self)

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        await self.inner.write(path, data, mode)

    async def close(self) -> None:
        await self.inner.close()


def write_box(root: Path, small: int = SMALL) -> Path:
    """box/durable/cellA with one 40 MiB file, cellB with `small` files of 300 kB."""
    box = root / "box"
    big = box / "durable" / "cellA"
    big.mkdir(parents=True)
    data = bytearray(BIG)
    data[::4096] = os.urandom(len(data[::4096]))
    (big / "weights.bin").write_bytes(bytes(data))
    many = box / "durable" / "cellB"
    many.mkdir()
    for index in range(small):
        (many / f"shard-{index:03d}.bin").write_bytes(os.urandom(300_000))
    return box


async def setup(sshd: Sshd, tmp_path: Path, small: int = SMALL) -> tuple[TapBox, Manifest, Path]:
    box = write_box(tmp_path, small)
    inst, target = instance_for(tmp_path, sshd, box)
    remote = TapBox(SshBox(await ssh.connect(target), owns=True))
    state = await remote_manifest(remote, inst.name, str(box / "durable"), None, ["cellA", "cellB"])
    return remote, state.manifest, box / "durable"


def finals(dest: Path) -> dict[str, str]:
    return {str(p.relative_to(dest)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in dest.rglob("*") if p.is_file() and not p.name.endswith(PART_SUFFIX)}


async def test_a_cut_leaves_only_a_part_and_the_resume_moves_only_the_missing_bytes(
        sshd: Sshd, tmp_path: Path) -> None:
    remote, manifest, _ = await setup(sshd, tmp_path, small=0)
    dest = tmp_path / "pulled"
    entry = next(f for f in manifest.files if f.path == "weights.bin")
    try:
        remote.fail_at = 17 << 20  # the link dies at 17 MiB of the 40 MiB file
        first = await pull(remote, manifest, dest)
        assert not first.ok and "interrupted" in first.failures[0].detail
        final, part = local_path(dest, entry), part_path(local_path(dest, entry))
        assert not final.exists(), "nothing under its final name before it is proven"
        kept = part.stat().st_size
        assert 0 < kept <= 17 << 20 and finals(dest) == {}
        remote.fail_at = None
        remote.moved = 0
        remote.offsets.clear()
        second = await pull(remote, manifest, dest)
        assert second.ok, second.failures
        # Only the bytes after the part moved, and nothing before its end was asked again.
        assert remote.moved == second.bytes_moved == entry.size - kept
        assert min(remote.offsets) == kept
        assert finals(dest) == {"cellA/weights.bin": entry.sha256}
        assert not part.exists()
    finally:
        await remote.close()


async def test_writeback_is_started_in_order_over_flushed_bytes_and_resumes_at_the_part(
        sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The kernel's writeback is started every WRITEBACK_EVERY bytes (so the fsync before the
    # rename waits for little): each range follows the last, covers bytes already handed to
    # the kernel, and a resumed pull starts its ranges at the part's end, never before it.
    calls: list[tuple[int, int, int]] = []

    def record(fd: int, offset: int, count: int, flags: int) -> int:
        calls.append((offset, count, os.fstat(fd).st_size))
        assert flags == pull_mod.SYNC_FILE_RANGE_WRITE
        return 0

    monkeypatch.setattr(pull_mod, "WRITEBACK_EVERY", 4 << 20)
    monkeypatch.setattr(pull_mod, "_sync_file_range", lambda: record)
    remote, manifest, _ = await setup(sshd, tmp_path, small=0)
    dest = tmp_path / "pulled"
    entry = next(f for f in manifest.files if f.path == "weights.bin")
    try:
        remote.fail_at = 17 << 20
        assert not (await pull(remote, manifest, dest)).ok
        kept = part_path(local_path(dest, entry)).stat().st_size
        first, calls[:] = list(calls), []
        remote.fail_at = None
        assert (await pull(remote, manifest, dest)).ok
        for run, start in ((first, 0), (calls, kept)):
            assert run, "no writeback was started"
            assert run[0][0] == start
            for (offset, count, size), following in zip(run, [*run[1:], None], strict=True):
                assert count >= 4 << 20 and offset + count <= size
                if following is not None:
                    assert following[0] == offset + count
        assert finals(dest) == {"cellA/weights.bin": entry.sha256}
    finally:
        await remote.close()


async def test_a_remote_file_changed_after_the_manifest_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    remote, manifest, durable = await setup(sshd, tmp_path, small=3)
    dest = tmp_path / "pulled"
    try:
        # Same size, one byte different: only the hash can tell.
        target = durable / "cellA" / "weights.bin"
        data = bytearray(target.read_bytes())
        data[BIG // 2] ^= 0xFF
        target.write_bytes(bytes(data))
        # Shorter than the manifest says.
        shard = durable / "cellB" / "shard-001.bin"
        shard.write_bytes(shard.read_bytes()[:1000])
        result = await pull(remote, manifest, dest)
        failed = {f"{o.entry.cell}/{o.entry.path}": o.detail for o in result.failures}
        assert set(failed) == {"cellA/weights.bin", "cellB/shard-001.bin"}
        assert "SHA-256 differs" in failed["cellA/weights.bin"]
        assert "shorter than the manifest" in failed["cellB/shard-001.bin"]
        assert set(finals(dest)) == {"cellB/shard-000.bin", "cellB/shard-002.bin"}
        assert not part_path(dest / "cellA" / "weights.bin").exists(), "a refused file is not kept"
    finally:
        await remote.close()


async def test_many_files_share_a_small_read_ahead_budget(sshd: Sshd, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight files at once with room for three reads in flight between them: every file still
    completes with the manifest's content (no file starves, none deadlocks on the budget)."""
    monkeypatch.setattr(pull_mod, "PULL_IN_FLIGHT", 3 * pull_mod.READ_SIZE)
    remote, manifest, _ = await setup(sshd, tmp_path)
    dest = tmp_path / "pulled"
    try:
        result = await asyncio.wait_for(pull(remote, manifest, dest, parallel=8), 120)
        assert result.ok, result.failures
        assert result.bytes_moved == manifest.total_bytes == remote.moved
        assert finals(dest) == {f"{f.cell}/{f.path}": f.sha256 for f in manifest.files}
    finally:
        await remote.close()


async def test_a_box_that_stops_answering_is_timed_out_and_resumable(sshd: Sshd, tmp_path: Path) -> None:
    remote, manifest, _ = await setup(sshd, tmp_path, small=0)
    dest = tmp_path / "pulled"
    entry = manifest.files[0]
    try:
        remote.silent_at, remote.deadline = 9 << 20, 1.0
        result = await asyncio.wait_for(pull(remote, manifest, dest), 60)
        assert not result.ok and "did not answer the SFTP read" in result.failures[0].detail
        assert not local_path(dest, entry).exists()
        assert 0 < part_path(local_path(dest, entry)).stat().st_size <= 9 << 20
        remote.silent_at = remote.deadline = None
        assert (await pull(remote, manifest, dest)).ok
        assert finals(dest) == {"cellA/weights.bin": entry.sha256}
    finally:
        await remote.close()


def window_of(remote: SshBox) -> int:
    channel = remote._sftp._handler._reader.channel  # asyncssh internals, read only
    return int(channel.get_recv_window())


async def test_the_sftp_window_follows_the_round_trip(sshd: Sshd, tmp_path: Path) -> None:
    """Near: the small window (a large one made loopback slower). Far (60 ms through the
    bench's delaying proxy): one sized to the round trip, where asyncssh's default 2 MiB would
    cap the pull at 2 MiB per round trip."""
    from bench.linkproxy import start_proxy

    box = write_box(tmp_path, small=0)
    (tmp_path / "near").mkdir()
    _, near = instance_for(tmp_path / "near", sshd, box)
    remote = SshBox(await ssh.connect(near), owns=True)
    try:
        await (await remote.open(str(box / "durable" / "cellA" / "weights.bin"))).close()
        assert window_of(remote) == SFTP_NEAR_WINDOW
    finally:
        await remote.close()
    proxy, port = start_proxy("127.0.0.1", sshd.port, 60)
    real = sshd.port
    try:
        sshd.port = port  # client files naming the proxy (its known_hosts line too: strict)
        (tmp_path / "far").mkdir()
        _, far = instance_for(tmp_path / "far", sshd, box)
        sshd.port = real
        remote = SshBox(await ssh.connect(far), owns=True)
        try:
            await (await remote.open(str(box / "durable" / "cellA" / "weights.bin"))).close()
            assert window_of(remote) >= 8 * SFTP_NEAR_WINDOW  # 60 ms x 671 MB/s: 40 MB
        finally:
            await remote.close()
    finally:
        sshd.port = real
        proxy.kill()
        proxy.wait()


def test_window_for_is_bounded() -> None:
    assert window_for(0.0002) == SFTP_NEAR_WINDOW
    assert window_for(0.1) == SFTP_MAX_WINDOW == window_for(3.0)
    assert SFTP_NEAR_WINDOW < window_for(0.02) < SFTP_MAX_WINDOW


def test_start_workers_starts_every_worker_at_once() -> None:
    with make_pool(2) as pool:
        start_workers(pool)
        assert len(pool._processes) == 2  # not one now and one at the first check


@pytest.mark.skipif(os.uname().sysname != "Linux", reason="sync_file_range is Linux-only")
def test_sync_file_range_is_found_and_accepts_a_written_range(tmp_path: Path) -> None:
    function = pull_mod._sync_file_range()
    assert function is not None
    path = tmp_path / "f"
    with path.open("wb") as out:
        out.write(b"x" * 100_000)
        out.flush()
        assert function(out.fileno(), 0, 100_000, pull_mod.SYNC_FILE_RANGE_WRITE) == 0
