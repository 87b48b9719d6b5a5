"""Benchmark: the designs measured for the loopback pull (issue 20), side by side.

Issue 20 asks the pull to match `scp` on a fast link while keeping its custody work (SHA-256
of every byte, fsync before the rename). On the 2-core VM the cockpit's SFTP pull is CPU-bound
beside sshd, so candidate designs were measured with `scp` and the cockpit's pull on one
1 GiB file over a real loopback sshd, in the same run, the order rotating each round:

- `cockpit`: `pull()` as shipped, given the connection's target: a file of at least
  `PIPE_MIN_BYTES` over a link of at most `PIPE_MAX_RTT` comes through the system ssh client
  (`transport.sshpipe`), whose stdout is the part file itself; the cockpit hashes the part
  behind it from the page cache and starts the kernel's writeback every `WRITEBACK_EVERY`.
- `cockpit, SFTP only`: the same pull kept on asyncssh's SFTP (AES-GCM, reads in flight, hash
  and write in a thread), with the writeback.
- `cockpit before (SFTP, no writeback)`: SFTP with `WRITEBACK_EVERY = 0`: every dirty page
  waits for the fsync before the rename (the pull before this bench).
- `cockpit, SFTP, 256 KiB packets`: SFTP with the channel opened with a 256 KiB maximum SSH
  packet instead of asyncssh's 32 KiB (fewer packets for Python to decrypt and parse).
- `ssh pipe`: a bare reference, not the product: `ssh -c aes128-gcm ... cat -- FILE`, read
  from the pipe into reused 4 MiB buffers, hashed and written by a second thread, fsynced.
  (The first system-ssh pull, built on this and measured on the quiet VM, made 0.57x scp
  against 0.77x for SFTP; it was taken out in a41d1a0 and replaced by the part-file design.)
- `ssh pipe + writeback`: the same, starting the kernel's writeback of every 32 MiB written
  (`sync_file_range(SYNC_FILE_RANGE_WRITE)`) so the final fsync has less left to wait for.

Each copy's SHA-256 is compared with the source's. Run:
    .venv/bin/python -m bench.pull_designs [--repeat 3] [--size-mb 1024] [--only "scp;cockpit"]
Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import fcntl
import hashlib
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.pull_far import BIG, MIB, cockpit_pull, copy_argv, file_sha, manifest_of, run_copy, write_cells

GCM = "aes128-gcm@openssh.com"
BUFFER = 4 << 20
"""Bytes of one pipe buffer handed from the reading thread to the hashing one."""
BUFFERS = 6
"""Buffers in the ring (reused: fresh memory costs a page fault per 4 KiB on this VM)."""
PIPE_SIZE = 1 << 20
"""The pipe's kernel buffer (F_SETPIPE_SZ), so one read returns up to 1 MiB."""
F_SETPIPE_SZ = 1031
KICK = 32 << 20
"""Bytes written between two writeback kicks."""
SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Any:
    libc = ctypes.CDLL(None, use_errno=True)
    return getattr(libc, "sync_file_range", None)


def ssh_pipe(config: Path, remote: str, dest: Path, kick: bool) -> tuple[float, str]:
    """`ssh ... cat -- remote` into dest/data.bin: read, hash and write in two threads, fsync."""
    argv = ["ssh", "-F", str(config), "-o", "BatchMode=yes", "-c", GCM, "gpu-box-1", "cat", "--",
            remote]
    writeback = _sync_file_range() if kick else None
    digest = hashlib.sha256()
    handoff: queue.Queue[tuple[memoryview, int] | None] = queue.Queue()
    free: queue.Queue[memoryview] = queue.Queue()
    for _ in range(BUFFERS):
        free.put(memoryview(bytearray(BUFFER)))
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, bufsize=0)
    assert process.stdout is not None
    with contextlib.suppress(OSError):
        fcntl.fcntl(process.stdout.fileno(), F_SETPIPE_SZ, PIPE_SIZE)
    with (dest / "data.bin").open("wb", buffering=0) as out:
        fd = out.fileno()

        def store() -> None:
            written = kicked = 0
            while (item := handoff.get()) is not None:
                view, count = item
                digest.update(view[:count])
                out.write(view[:count])
                written += count
                free.put(view)
                if writeback is not None and written - kicked >= KICK:
                    writeback(fd, ctypes.c_longlong(kicked), ctypes.c_longlong(written - kicked),
                              SYNC_FILE_RANGE_WRITE)
                    kicked = written

        worker = threading.Thread(target=store)
        worker.start()
        try:
            while True:
                view = free.get()
                got = 0
                while got < BUFFER and (count := process.stdout.readinto(view[got:])):
                    got += count
                if got:
                    handoff.put((view, got))
                if got < BUFFER:
                    break
        finally:
            handoff.put(None)
            worker.join()
        os.fsync(fd)
    if process.wait() != 0:
        raise RuntimeError(f"ssh exited {process.returncode}")
    return time.perf_counter() - started, digest.hexdigest()


@contextlib.contextmanager
def sftp_only() -> Iterator[None]:
    """Within this block the cockpit's pull never starts the system ssh client."""
    from cockpit.services.transport import sshpipe

    saved = sshpipe.PIPE_MIN_BYTES
    sshpipe.PIPE_MIN_BYTES = 1 << 62
    try:
        yield
    finally:
        sshpipe.PIPE_MIN_BYTES = saved


@contextlib.contextmanager
def sftp_packet_size(size: int) -> Iterator[None]:
    """Within this block the cockpit opens its SFTP channel with a `size` maximum SSH packet."""
    from asyncssh.sftp import MIN_SFTP_VERSION, start_sftp_client

    from cockpit.services.transport import remote

    saved = remote._start_sftp

    async def start(conn: Any, window: int) -> Any:
        writer, reader, _ = await conn.open_session(subsystem="sftp", encoding=None, window=window,
                                                    max_pktsize=size)
        return await start_sftp_client(conn, asyncio.get_running_loop(), "strict", reader, writer,
                                       "utf-8", "strict", MIN_SFTP_VERSION)

    remote._start_sftp = start
    try:
        yield
    finally:
        remote._start_sftp = saved


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=1024, help="the file, MiB")
    parser.add_argument("--only", default="", help="design names separated by ';' (default: all)")
    args = parser.parse_args()
    from tests.sshd import Sshd
    from tests.test_pull_sshd import instance_for

    root = Path(tempfile.mkdtemp(prefix="cockpit-bench-designs-"))
    os.environ["COCKPIT_STATE_DIR"] = str(root / "state")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}; files under {root}")
    box = root / "box"
    durable = box / "durable"
    sums = write_cells(durable, args.size_mb * MIB, 1, 1_000_000)
    expected = sums[BIG]["data.bin"]
    (box / "queue_1.txt").write_text(f"cfg/{BIG}.yaml t 2\n")
    (box / "q1_master.log").write_text(f"[2026-11-21 10:00:00] [1/1] FINISHED {BIG} (exit=0)\n")
    size = args.size_mb * MIB
    sshd = Sshd(root / "sshd")
    runs: dict[str, list[float]] = {}
    try:
        sshd.start()
        client = root / "client"
        client.mkdir()
        inst, target = instance_for(client, sshd, box)
        config = client / "ssh_config"
        _, manifest = asyncio.run(manifest_of(inst, target, [BIG]))
        remote = str(durable / BIG / "data.bin")

        def cockpit(dest: Path) -> float:
            took, _ = asyncio.run(cockpit_pull(target, manifest, BIG, dest))
            return took

        def cockpit_sftp(dest: Path) -> float:
            with sftp_only():
                return cockpit(dest)

        def cockpit_no_writeback(dest: Path) -> float:
            from cockpit.services.custody import pull

            saved = pull.WRITEBACK_EVERY
            pull.WRITEBACK_EVERY = 0
            try:
                with sftp_only():
                    return cockpit(dest)
            finally:
                pull.WRITEBACK_EVERY = saved

        def cockpit_256k(dest: Path) -> float:
            with sftp_packet_size(256 << 10), sftp_only():
                return cockpit(dest)

        def scp(dest: Path) -> float:
            return run_copy(copy_argv(config, remote, dest)["scp"])

        def pipe(dest: Path) -> float:
            took, sha = ssh_pipe(config, remote, dest, kick=False)
            return took if sha == expected else float("nan")

        def pipe_kick(dest: Path) -> float:
            took, sha = ssh_pipe(config, remote, dest, kick=True)
            return took if sha == expected else float("nan")

        methods = {"scp": scp, "cockpit": cockpit, "cockpit, SFTP only": cockpit_sftp,
                   "cockpit before (SFTP, no writeback)": cockpit_no_writeback,
                   "cockpit, SFTP, 256 KiB packets": cockpit_256k,
                   "ssh pipe": pipe, "ssh pipe + writeback": pipe_kick}
        names = [n for n in methods if not args.only or n in args.only.split(";")]
        runs = {name: [] for name in names}
        for round_no in range(args.repeat):
            order = names[round_no % len(names):] + names[:round_no % len(names)]
            shown = []
            for name in order:
                dest = root / "dest"
                dest.mkdir()
                took = methods[name](dest)
                got = next(p for p in dest.rglob("data.bin"))
                if file_sha(got) != expected:
                    raise RuntimeError(f"{name} left wrong content")
                runs[name].append(took)
                shown.append(f"{name} {size / took / 1e6:.0f} MB/s")
                shutil.rmtree(dest)
            print(f"  round {round_no + 1}: {', '.join(shown)}", flush=True)
    finally:
        sshd.stop()
        shutil.rmtree(root, ignore_errors=True)
    print("\n| design | best MB/s | median MB/s | best / scp best | median / scp median |")
    print("|---|---:|---:|---:|---:|")
    scp_best = size / min(runs["scp"]) / 1e6
    scp_median = size / sorted(runs["scp"])[len(runs["scp"]) // 2] / 1e6
    for name, times in runs.items():
        best = size / min(times) / 1e6
        median = size / sorted(times)[len(times) // 2] / 1e6
        print(f"| {name} | {best:.0f} | {median:.0f} | {best / scp_best:.2f}x | "
              f"{median / scp_median:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
