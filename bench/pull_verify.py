"""Benchmark: pulling a 1 GiB result over SSH vs scp / rsync, and verifying 2 GB of checkpoints
vs one plain SHA-256 pass.

1. Pull. A durable root on a real OpenSSH sshd on loopback (remote shell sources root's
   ~/.bashrc, like a rented box) with one finished cell: `best.pth` (a small real
   `torch.save`), `best_metrics.json` and a 1 GiB data file. The cockpit side is what
   `cockpit verify` does before loading: connect, `remote_manifest` (one remote command:
   `openssl dgst -sha256` of every file) and `pull` (the 1 GiB file through the system ssh
   client writing the part, the small ones over SFTP; hashed as they arrive, fsynced, renamed
   only when the SHA-256 matches) into a fresh folder. Baselines,
   measured in the same run, alternating, best of --repeat after one warm-up write: `scp` with
   default settings (OpenSSH's default cipher, chacha20-poly1305), `scp -c aes128-gcm@openssh.com`
   (the cipher the cockpit prefers) and `rsync -a -e "ssh -F ..."`. Neither scp nor rsync fsyncs
   or checks the bytes against a SHA-256 manifest (rsync only checks its own non-cryptographic
   whole-file transfer checksum). Then a resumed pull: sshd is killed (with every session it
   forked) once half the bytes have arrived, restarted, and the pull run again: it should move
   only the other half (the local part is re-hashed, which moves nothing).
2. Verify. 8 cell folders, each with a real ~260 MB `torch.save` state dict of float32 tensors
   and a `best_metrics.json` (2.08 GB), page cache warm. The cockpit side is `verify_pulled` with
   `make_pool()` (spawned workers: SHA-256 via mmap + `torch.load(weights_only=True, mmap=True)`
   per file), timed from `make_pool()` (spawn and the workers' torch import included) and again
   on the warm pool; pool start-up alone is timed to the first result of a trivial call in a
   fresh pool. Baseline A: one `hashlib.sha256` pass over the same files in this process (1 MiB
   reads). Baseline B: hash (1 MiB reads) and `torch.load(weights_only=True)` without mmap, one
   file after another in this process (torch already imported).

Run: .venv/bin/python -m bench.pull_verify [--repeat 2] [--size-mb 1024] [--ckpt-mb 260] [--dir DIR]
Prints best-of times, MB/s (MB = 10^6 bytes) and ratios measured side by side in the same run,
then a markdown table for the README. Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cockpit.models.custody import Manifest
    from cockpit.models.sweep import Instance
    from cockpit.services.custody.pull import PullProgress, PullResult, RemoteState
    from cockpit.services.transport.ssh import Target
    from tests.sshd import Sshd

# Only the standard library at the top: make_pool() spawns its workers, and a spawned worker
# re-imports this module as __mp_main__ before its first task. torch, asyncssh or pytest up
# here would land in every worker's start-up, which `cockpit verify` (python -m cockpit, or the
# console script, which imports only cockpit.cli) does not pay. So each function imports what
# it uses.

MIB = 1 << 20
MB = 1e6
GB = 1e9
ALIAS = "gpu-box-1"
"""The ssh_config alias `instance_for` (tests/test_pull_sshd.py) writes."""
CELL = "cell0"
BIG_NAME = "data.bin"
GCM = "aes128-gcm@openssh.com"
READ = MIB
"""Read size of the plain-hashlib baselines."""
TENSORS_PER_CKPT = 4
CKPT_CELLS = 8
QUEUE_LOG = "q1_master.log"


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    value = fn()
    return time.perf_counter() - t0, value


# --------------------------------------------------------------------------- 1. pull


def write_big(path: Path, size: int) -> None:
    """`size` bytes: 16 MiB of urandom repeated, a counter stamped into every 4 KiB page of each
    copy (no two blocks alike, nothing compressible, quick to make)."""
    block_size = 16 * MIB
    base = os.urandom(block_size)
    written = 0
    with path.open("wb") as out:
        index = 0
        while written < size:
            block = bytearray(base[:min(block_size, size - written)])
            stamp = struct.pack("<Q", index)
            for page in range(0, len(block) - 8, 4096):
                block[page:page + 8] = stamp
            out.write(block)
            written += len(block)
            index += 1


def write_box(root: Path, size: int) -> Path:
    """box/durable/cell0 with best.pth, best_metrics.json and the big file; queue and log."""
    import torch

    box = root / "box"
    folder = box / "durable" / CELL
    folder.mkdir(parents=True)
    torch.save({"model_state_dict": {"w": torch.randn(256, 256)}}, folder / "best.pth")
    (folder / "best_metrics.json").write_text(json.dumps({"epoch": 2, "psnr": 31.25}))
    write_big(folder / BIG_NAME, size)
    (box / "queue_1.txt").write_text(f"cfg/{CELL}.yaml t 2\n")
    (box / "q1_master.log").write_text(f"[2026-11-21 10:00:00] [1/1] FINISHED {CELL} (exit=0)\n")
    return box


@dataclass
class CockpitPull:
    connect_s: float
    manifest_s: float
    pull_s: float
    result: PullResult
    state: RemoteState

    @property
    def total_s(self) -> float:
        return self.connect_s + self.manifest_s + self.pull_s


async def cockpit_pull(inst: Instance, target: Target, dest: Path) -> CockpitPull:
    """Connect, manifest, pull into `dest`: what `cockpit verify` does before loading."""
    from cockpit.services.custody.pull import pull, remote_manifest
    from cockpit.services.transport.remote import SshBox
    from cockpit.services.transport.ssh import connect

    t0 = time.perf_counter()
    box = SshBox(await connect(target), owns=True, target=target)
    try:
        t1 = time.perf_counter()
        assert inst.durable_root is not None
        state = await remote_manifest(box, inst.name, inst.durable_root, inst.queue_log, [CELL])
        t2 = time.perf_counter()
        result = await pull(box, state.manifest, dest)
        t3 = time.perf_counter()
    finally:
        await box.close()
    return CockpitPull(t1 - t0, t2 - t1, t3 - t2, result, state)


def run_copy(argv: list[str]) -> float:
    """Wall time of one scp / rsync process; raises when it fails."""
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, timeout=900, check=False)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: "
                           f"{proc.stderr.decode(errors='replace').strip()[-300:]}")
    return took


def copy_commands(config: Path, remote: str) -> dict[str, list[str]]:
    """The baselines' argv, without the destination folder."""
    base = ["-F", str(config), "-o", "BatchMode=yes"]
    commands = {
        "scp": ["scp", *base, f"{ALIAS}:{remote}"],
        "scp aes128-gcm": ["scp", *base, "-c", GCM, f"{ALIAS}:{remote}"],
    }
    if shutil.which("rsync"):
        commands["rsync -a"] = ["rsync", "-a", "-e", f"ssh -F {config} -o BatchMode=yes",
                                f"{ALIAS}:{remote}"]
    return commands


async def pull_until_cut(target: Target, sshd: Sshd, manifest: Manifest,
                         dest: Path) -> tuple[PullResult, int]:
    """Pull until half the bytes are here, then kill sshd and every session it forked."""
    from cockpit.services.custody.pull import pull
    from cockpit.services.transport.remote import SshBox
    from cockpit.services.transport.ssh import connect

    box = SshBox(await connect(target), owns=True, target=target)
    half = manifest.total_bytes // 2
    cut_at = 0

    def cut(progress: PullProgress) -> None:
        nonlocal cut_at
        if not cut_at and progress.done > half:
            cut_at = progress.done
            sshd.stop()  # the box vanishes mid-transfer

    # asyncio logs "socket.send() raised exception." for every write to the dead socket.
    quiet = logging.getLogger("asyncio")
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        result = await pull(box, manifest, dest, on_progress=cut)
    finally:
        await box.close()
        quiet.setLevel(level)
    return result, cut_at


async def pull_again(target: Target, manifest: Manifest, dest: Path) -> tuple[float, float, PullResult]:
    from cockpit.services.custody.pull import pull
    from cockpit.services.transport.remote import SshBox
    from cockpit.services.transport.ssh import connect

    t0 = time.perf_counter()
    box = SshBox(await connect(target), owns=True, target=target)
    try:
        t1 = time.perf_counter()
        result = await pull(box, manifest, dest)
        t2 = time.perf_counter()
    finally:
        await box.close()
    return t1 - t0, t2 - t1, result


def pull_bench(args: argparse.Namespace, root: Path) -> tuple[dict[str, Any], bool]:
    from cockpit.services.custody.pull import local_path, part_path, sha256_file
    from tests.sshd import Sshd
    from tests.test_pull_sshd import instance_for

    ok = True
    size = args.size_mb * MIB
    gen_s, box = timed(lambda: write_box(root, size))
    big = box / "durable" / CELL / BIG_NAME
    expected_sha = sha256_file(big)[0]
    print(f"generated {size / MIB:.0f} MiB + best.pth + best_metrics.json in {gen_s:.1f} s")
    sshd = Sshd(root / "sshd")
    try:
        sshd.start()  # inside the try: a start that times out leaves a process to stop
        inst, target = instance_for(root, sshd, box)
        config = root / "ssh_config"
        copies = copy_commands(config, str(big))
        if "rsync -a" not in copies:
            print("  rsync not installed: its row is skipped")
        counter = iter(range(1_000_000))

        def fresh_dest() -> Path:
            dest = root / f"dest{next(counter)}"
            dest.mkdir()
            return dest

        def check_copy(name: str, got: Path) -> None:
            nonlocal ok
            if not got.is_file() or got.stat().st_size != size or sha256_file(got)[0] != expected_sha:
                ok = False
                print(f"MISMATCH: {name} left {got} without the right content")

        # Warm-up: the first big write to fresh memory on these VMs is slow (testbed.md).
        dest = fresh_dest()
        warm = asyncio.run(cockpit_pull(inst, target, dest))
        print(f"  warm-up: cockpit pull {warm.pull_s:.2f} s (not counted), hasher on the box: "
              f"{warm.state.hasher}")
        shutil.rmtree(dest)

        methods = ["cockpit", *copies]
        runs: dict[str, list[float]] = {m: [] for m in methods}
        cockpit_runs: list[CockpitPull] = []
        for round_no in range(args.repeat):
            order = methods[round_no % len(methods):] + methods[:round_no % len(methods)]
            took = []
            for name in order:
                dest = fresh_dest()
                if name == "cockpit":
                    run = asyncio.run(cockpit_pull(inst, target, dest))
                    if not run.result.ok or run.result.bytes_moved != run.state.manifest.total_bytes:
                        ok = False
                        print(f"MISMATCH: cockpit pull failed: {run.result.failures}")
                    check_copy(name, local_path(dest, next(f for f in run.state.manifest.files
                                                            if f.path == BIG_NAME)))
                    cockpit_runs.append(run)
                    runs[name].append(run.pull_s)
                    took.append(f"cockpit {run.connect_s:.2f}+{run.manifest_s:.2f}+{run.pull_s:.2f} s")
                else:
                    seconds = run_copy([*copies[name], f"{dest}/"])
                    check_copy(name, dest / BIG_NAME)
                    runs[name].append(seconds)
                    took.append(f"{name} {seconds:.2f} s")
                shutil.rmtree(dest)
            print(f"  round {round_no + 1}: {', '.join(took)}")

        manifest = cockpit_runs[0].state.manifest
        total = manifest.total_bytes
        best_cockpit = min(cockpit_runs, key=lambda r: r.pull_s)
        best = {name: min(times) for name, times in runs.items()}
        rate = {name: (total if name == "cockpit" else size) / best[name] / MB for name in best}
        end_to_end = min(r.total_s for r in cockpit_runs)

        # Resume after a killed sshd.
        dest = fresh_dest()
        first, cut_at = asyncio.run(pull_until_cut(target, sshd, manifest, dest))
        entry = next(f for f in manifest.files if f.path == BIG_NAME)
        part = part_path(local_path(dest, entry))
        part_size = part.stat().st_size if part.is_file() else 0
        rehash_s, _ = timed(lambda: sha256_file(part))
        sshd.start()
        reconnect_s, resume_s, second = asyncio.run(pull_again(target, manifest, dest))
        if not cut_at or first.ok:
            ok = False
            print("MISMATCH: the cut did not happen during the transfer")
        if not second.ok:
            ok = False
            print(f"MISMATCH: the resumed pull failed: {second.failures}")
        check_copy("resumed cockpit pull", local_path(dest, entry))
        shutil.rmtree(dest)
    finally:
        sshd.stop()

    print()
    print(f"pull of {size / MIB:.0f} MiB (+ {(total - size) / 1e3:.0f} kB of small files for the "
          f"cockpit) over loopback OpenSSH {ssh_version()}, best of {args.repeat} after one warm-up")
    print("  (scp: no hash, no fsync; rsync: its own xxh128 transfer check, no fsync; the cockpit")
    print("   hashes every byte as it arrives, fsyncs, and renames only when the SHA-256 matches the")
    print("   manifest, which the box computed in the step before; client and server share 2 cores)")
    print(f"  {'cockpit connect':<24} {best_cockpit.connect_s:7.2f} s")
    print(f"  {'cockpit remote_manifest':<24} {best_cockpit.manifest_s:7.2f} s   "
          f"(openssl SHA-256 of {total / MB:.0f} MB on the box, plus the remote shell's rc file)")
    print(f"  {'cockpit pull':<24} {best['cockpit']:7.2f} s {rate['cockpit']:8.0f} MB/s   "
          f"(large file: system ssh writes the part; hash + fsync + rename)")
    print(f"  {'cockpit end to end':<24} {end_to_end:7.2f} s {total / end_to_end / MB:8.0f} MB/s   "
          f"(connect + manifest + pull)")
    for name in copies:
        print(f"  {name:<24} {best[name]:7.2f} s {rate[name]:8.0f} MB/s   (one process, own connect)")
    print(f"  cockpit pull / scp (default): {rate['cockpit'] / rate['scp']:.2f}x (goal >= 1.0x)   "
          f"end to end / scp: {total / end_to_end / MB / rate['scp']:.2f}x   "
          f"pull / scp aes128-gcm: {rate['cockpit'] / rate['scp aes128-gcm']:.2f}x"
          + (f"   pull / rsync: {rate['cockpit'] / rate['rsync -a']:.2f}x" if "rsync -a" in rate else ""))
    print()
    print(f"resumed pull: sshd killed at {cut_at / MB:.0f} MB of {total / MB:.0f} MB "
          f"({cut_at / total:.0%}); the first pull moved {first.bytes_moved / MB:.0f} MB, left a "
          f"{part_size / MB:.0f} MB part")
    print(f"  second pull: reconnect {reconnect_s:.2f} s, pull {resume_s:.2f} s, moved "
          f"{second.bytes_moved / MB:.0f} MB ({second.bytes_moved / total:.0%} of the total; the rest "
          f"{(total - part_size) / MB:.0f} MB), incl. re-hashing the {part_size / MB:.0f} MB part "
          f"(~{rehash_s:.2f} s on its own)")
    print(f"  vs a full pull ({best['cockpit']:.2f} s): {resume_s / best['cockpit']:.2f}x the time")
    return {
        "size_mib": size / MIB, "best": best, "rate": rate, "copies": list(copies),
        "connect": best_cockpit.connect_s, "manifest": best_cockpit.manifest_s,
        "end_to_end": end_to_end, "total": total, "resume_s": resume_s,
        "resume_moved": second.bytes_moved, "cut_at": cut_at,
    }, ok


def ssh_version() -> str:
    proc = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False)
    return (proc.stderr or proc.stdout).split(",")[0].strip()


# --------------------------------------------------------------------------- 2. verify


def write_checkpoints(folder: Path, ckpt_bytes: int) -> list[Path]:
    """CKPT_CELLS cell folders, each a real torch.save state dict of float32 tensors."""
    import torch

    per_tensor = ckpt_bytes // TENSORS_PER_CKPT // 4
    base = torch.randn(per_tensor)
    paths = []
    for index in range(CKPT_CELLS):
        cell = folder / f"cell{index}"
        cell.mkdir(parents=True)
        state = {f"layer{k}.weight": base + float(index * TENSORS_PER_CKPT + k)
                 for k in range(TENSORS_PER_CKPT)}
        torch.save({"model_state_dict": state, "epoch": 2}, cell / "best.pth")
        del state
        (cell / "best_metrics.json").write_text(json.dumps({"epoch": 2, "psnr": 30.0 + index}))
        paths += [cell / "best.pth", cell / "best_metrics.json"]
    # The queue log's FINISHED exit=0 marks: without them no cell can be proven OK.
    (folder / QUEUE_LOG).write_text("".join(
        f"[2026-11-21 10:00:0{i}] [{i + 1}/{CKPT_CELLS}] FINISHED cell{i} (exit=0)\n"
        for i in range(CKPT_CELLS)))
    return paths


def baseline_hash(paths: list[Path]) -> int:
    """One plain hashlib.sha256 pass per file, 1 MiB reads, in this process."""
    return sum(sha256_pass(path) for path in paths)


def sha256_pass(path: Path) -> int:
    """Hash one file with plain hashlib in 1 MiB reads; the bytes read."""
    seen = 0
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(READ):
            digest.update(block)
            seen += len(block)
    digest.hexdigest()
    return seen


def baseline_hash_load(paths: list[Path]) -> int:
    """Hash (1 MiB reads) then torch.load(weights_only=True) without mmap, one file at a time."""
    import torch  # already imported by write_checkpoints: costs nothing here

    loaded = 0
    for path in paths:
        sha256_pass(path)
        if path.suffix == ".pth":
            obj = torch.load(path, weights_only=True, map_location="cpu")
            loaded += len(obj["model_state_dict"])
            del obj
        else:
            json.loads(path.read_text())
    return loaded


async def cockpit_verify(folder: Path, cells: tuple[str, ...]) -> tuple[float, float, float, float, str]:
    """What `run_verification` does: make_pool() and start_workers() (the workers spawn and
    import torch meanwhile), the manifest (LocalBox: openssl over the same files), then
    verify_pulled; and verify_pulled again on the warm pool. Returns (cold: manifest end to
    verdict, warm, manifest, cold from make_pool() without overlap: pool ready-wait + verify)."""
    from cockpit.services.custody.pull import remote_manifest
    from cockpit.services.custody.verify import make_pool, start_workers, verify_pulled
    from cockpit.services.transport.remote import LocalBox

    t0 = time.perf_counter()
    with make_pool() as pool:
        start_workers(pool)
        state = await remote_manifest(LocalBox(), "bench", str(folder), str(folder / QUEUE_LOG), list(cells))
        t1 = time.perf_counter()
        cold = await verify_pulled("bench", cells, state, folder, pool)
        t2 = time.perf_counter()
        warm = await verify_pulled("bench", cells, state, folder, pool)
        t3 = time.perf_counter()
    if cold.summary != warm.summary or not cold.complete:
        text = f"cold {cold.summary}, warm {warm.summary}: {cold.verdicts}"
        return t2 - t1, t3 - t2, t1 - t0, t2 - t0, text
    return t2 - t1, t3 - t2, t1 - t0, t2 - t0, cold.summary


async def cold_unoverlapped(folder: Path, state: RemoteState, cells: tuple[str, ...]) -> float:
    """make_pool() straight into verify_pulled, nothing to overlap the workers' start with."""
    from cockpit.services.custody.verify import make_pool, verify_pulled

    t0 = time.perf_counter()
    with make_pool() as pool:
        await verify_pulled("bench", cells, state, folder, pool)
        took = time.perf_counter() - t0
    return took


def default_threads_worker(quiet: bool) -> None:
    """The verification workers' start-up before the fix: silence, import torch, and leave
    torch's thread count at its default (one OpenMP thread per core, in every worker)."""
    if quiet:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    import torch  # noqa: F401


@contextlib.contextmanager
def default_threads_pool() -> Iterator[None]:
    """Within this block `make_pool()` starts workers as before the fix (the baseline side):
    each worker's torch keeps one thread per core, so N workers run N x cores threads."""
    from cockpit.services.custody import verify

    saved = verify.warm_worker
    verify.warm_worker = default_threads_worker
    try:
        yield
    finally:
        verify.warm_worker = saved


def pool_startup(trivial: Path) -> float:
    """make_pool() to the first result of a trivial call (hash + parse a tiny JSON file)."""
    from cockpit.services.custody.loadcheck import check_file
    from cockpit.services.custody.verify import make_pool

    t0 = time.perf_counter()
    with make_pool() as pool:
        pool.submit(check_file, str(trivial)).result()
        took = time.perf_counter() - t0
    return took


def verify_bench(args: argparse.Namespace, root: Path) -> tuple[dict[str, Any], bool]:
    from cockpit.services.custody.pull import remote_manifest
    from cockpit.services.custody.verify import make_pool
    from cockpit.services.transport.remote import LocalBox

    ok = True
    folder = root / "ckpts"
    gen_s, paths = timed(lambda: write_checkpoints(folder, args.ckpt_mb * 1_000_000))
    total = sum(p.stat().st_size for p in paths)
    cells = tuple(f"cell{i}" for i in range(CKPT_CELLS))
    # The manifest reads every file once (openssl), so the page cache is warm for all sides.
    manifest_s, state = timed(lambda: asyncio.run(
        remote_manifest(LocalBox(), "bench", str(folder), str(folder / QUEUE_LOG), list(cells))))
    with make_pool() as probe:
        workers = getattr(probe, "_max_workers", "?")  # only to print the default count
    print(f"generated {CKPT_CELLS} checkpoints, {total / GB:.2f} GB, in {gen_s:.1f} s; manifest "
          f"(reads them all once: page cache warm) {manifest_s:.2f} s; make_pool() default: "
          f"{workers} workers on {os.cpu_count()} cores")
    times: dict[str, list[float]] = {"cold": [], "warm": [], "startup": [], "A": [], "B": [],
                                     "manifest": [], "nooverlap": [], "spawn": [],
                                     "spawn_nooverlap": []}
    summaries: list[str] = []
    counts: list[tuple[int, int]] = []

    def run_cockpit() -> None:
        cold_s, warm_s, manifest_s, _, text = asyncio.run(cockpit_verify(folder, cells))
        times["cold"].append(cold_s)
        times["warm"].append(warm_s)
        times["manifest"].append(manifest_s)
        summaries.append(text)
        times["nooverlap"].append(asyncio.run(cold_unoverlapped(folder, state, cells)))

    def run_spawn() -> None:
        with default_threads_pool():
            cold_s, _, _, _, text = asyncio.run(cockpit_verify(folder, cells))
            times["spawn"].append(cold_s)
            summaries.append(text)
            times["spawn_nooverlap"].append(asyncio.run(cold_unoverlapped(folder, state, cells)))

    def run_a() -> None:
        took, seen = timed(lambda: baseline_hash(paths))
        times["A"].append(took)
        counts.append((seen, CKPT_CELLS * TENSORS_PER_CKPT))

    def run_b() -> None:
        took, tensors = timed(lambda: baseline_hash_load(paths))
        times["B"].append(took)
        counts.append((total, tensors))

    sides = [run_cockpit, run_spawn, run_a, run_b]
    for round_no in range(args.repeat):
        for side in sides[round_no % 4:] + sides[:round_no % 4]:
            side()
        times["startup"].append(pool_startup(folder / "cell0" / "best_metrics.json"))
        cold_s, warm_s, startup_s, a_s, b_s = (times[k][-1] for k in ("cold", "warm", "startup", "A", "B"))
        print(f"  round {round_no + 1}: cockpit {cold_s:.2f} s after a "
              f"{times['manifest'][-1]:.2f} s manifest "
              f"(warm pool {warm_s:.2f} s; no overlap {times['nooverlap'][-1]:.2f} s; spawned "
              f"workers {times['spawn'][-1]:.2f} s), pool start-up "
              f"{startup_s:.2f} s, hashlib {a_s:.2f} s, hash + torch.load {b_s:.2f} s")
    for text in summaries:
        if text != f"{CKPT_CELLS}/{CKPT_CELLS} loaded":
            ok = False
            print(f"MISMATCH: cockpit verification: {text}")
    if any(c != (total, CKPT_CELLS * TENSORS_PER_CKPT) for c in counts):
        ok = False
        print(f"MISMATCH: baselines (bytes read, tensors loaded) {counts}, expected "
              f"{(total, CKPT_CELLS * TENSORS_PER_CKPT)}")
    best = {key: min(values) for key, values in times.items()}
    rate = {key: total / best[key] / GB for key in ("cold", "warm", "A", "B", "nooverlap", "spawn",
                                                     "spawn_nooverlap")}
    print()
    print(f"verify {CKPT_CELLS} checkpoints + metrics, {total / GB:.2f} GB from the page cache, "
          f"best of {args.repeat}")
    print(f"  {'cockpit verify_pulled, cold pool':<36} {best['cold']:6.2f} s {rate['cold']:6.2f} GB/s   "
          f"(pool made and started before the {best['manifest']:.2f} s manifest, as run_verification does)")
    print(f"  {'  the same, pool made just before':<36} {best['nooverlap']:6.2f} s "
          f"{rate['nooverlap']:6.2f} GB/s   (make_pool() then verify_pulled: spawn + torch import inside)")
    print(f"  {'  of which pool start-up':<36} {best['startup']:6.2f} s            "
          f"(make_pool() to the first result of a trivial call, no torch)")
    print(f"  {'cockpit verify_pulled, warm pool':<36} {best['warm']:6.2f} s {rate['warm']:6.2f} GB/s")
    print(f"  {'before: default torch threads, cold':<36} {best['spawn']:6.2f} s {rate['spawn']:6.2f} GB/s   "
          f"(a thread per core in each worker; made just before: {best['spawn_nooverlap']:.2f} s)")
    print(f"  {'A: hashlib.sha256, one process':<36} {best['A']:6.2f} s {rate['A']:6.2f} GB/s   "
          f"(1 MiB reads, no load)")
    print(f"  {'B: hash + torch.load, one process':<36} {best['B']:6.2f} s {rate['B']:6.2f} GB/s   "
          f"(weights_only=True, no mmap; torch already imported)")
    print(f"  cockpit / A: {rate['cold'] / rate['A']:.2f}x (goal >= 0.8x; warm pool "
          f"{rate['warm'] / rate['A']:.2f}x; pool made just before {rate['nooverlap'] / rate['A']:.2f}x)   "
          f"cockpit / B: {rate['cold'] / rate['B']:.2f}x "
          f"(warm pool {rate['warm'] / rate['B']:.2f}x)")
    print(f"  before (default torch threads) / A: {rate['spawn'] / rate['A']:.2f}x cold, "
          f"{rate['spawn_nooverlap'] / rate['A']:.2f}x made just before; cockpit / before: "
          f"{rate['cold'] / rate['spawn']:.2f}x cold, {rate['nooverlap'] / rate['spawn_nooverlap']:.2f}x "
          f"made just before")
    return {"best": best, "rate": rate, "total": total, "workers": workers}, ok


# --------------------------------------------------------------------------- main


def summary(part1: dict[str, Any] | None, part2: dict[str, Any] | None) -> None:
    """The figures as a markdown table for the README."""
    print()
    print("| measurement | time | rate / ratio |")
    print("|---|---:|---:|")
    if part1 is not None:
        best, rate, size = part1["best"], part1["rate"], f"{part1['size_mib']:.0f} MiB"
        print(f"| cockpit `pull` of a {size} cell (system ssh client writes the part, "
              f"SHA-256 behind it, fsync, rename) "
              f"| {best['cockpit']:.2f} s | {rate['cockpit']:.0f} MB/s |")
        print(f"| cockpit connect + `remote_manifest` (openssl SHA-256 on the box) "
              f"| {part1['connect']:.2f} + {part1['manifest']:.2f} s | |")
        print(f"| cockpit end to end (connect + manifest + pull) | {part1['end_to_end']:.2f} s "
              f"| {part1['total'] / part1['end_to_end'] / MB:.0f} MB/s |")
        labels = {"scp": "`scp` (defaults: chacha20-poly1305; no hash, no fsync)",
                  "scp aes128-gcm": f"`scp -c {GCM}` (no hash, no fsync)",
                  "rsync -a": "`rsync -a -e ssh` (own xxh128 check, no fsync)"}
        for name in part1["copies"]:
            print(f"| {labels[name]} | {best[name]:.2f} s | {rate[name]:.0f} MB/s |")
        print(f"| cockpit pull / scp (default) | | {rate['cockpit'] / rate['scp']:.2f}x |")
        print(f"| cockpit end to end / scp (default) | | "
              f"{part1['total'] / part1['end_to_end'] / MB / rate['scp']:.2f}x |")
        print(f"| resumed pull after sshd was killed at {part1['cut_at'] / part1['total']:.0%} "
              f"| {part1['resume_s']:.2f} s | moved {part1['resume_moved'] / MB:.0f} MB "
              f"({part1['resume_moved'] / part1['total']:.0%}) |")
    if part2 is not None:
        best, rate, gb = part2["best"], part2["rate"], f"{part2['total'] / GB:.2f} GB"
        print(f"| cockpit `verify_pulled`, 8 checkpoints, {gb}, cold pool ({part2['workers']} workers "
              f"started before the manifest, as `run_verification` does) | {best['cold']:.2f} s "
              f"| {rate['cold']:.2f} GB/s |")
        print(f"| the same with `make_pool()` just before `verify_pulled` | {best['nooverlap']:.2f} s "
              f"| {rate['nooverlap']:.2f} GB/s |")
        print(f"| of which pool start-up (first result) | {best['startup']:.2f} s | |")
        print(f"| cockpit `verify_pulled`, warm pool | {best['warm']:.2f} s | {rate['warm']:.2f} GB/s |")
        print(f"| A: one `hashlib.sha256` pass, one process | {best['A']:.2f} s | {rate['A']:.2f} GB/s |")
        print(f"| B: hash + `torch.load(weights_only=True)`, one process | {best['B']:.2f} s "
              f"| {rate['B']:.2f} GB/s |")
        print(f"| before: workers at torch's default threads, cold | {best['spawn']:.2f} s "
              f"| {rate['spawn']:.2f} GB/s |")
        print(f"| before / A | | {rate['spawn'] / rate['A']:.2f}x |")
        print(f"| cockpit / A (warm pool) | | {rate['cold'] / rate['A']:.2f}x "
              f"({rate['warm'] / rate['A']:.2f}x) |")
        print(f"| cockpit / B (warm pool) | | {rate['cold'] / rate['B']:.2f}x "
              f"({rate['warm'] / rate['B']:.2f}x) |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2, help="timed rounds (best of)")
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the pulled file in MiB")
    parser.add_argument("--ckpt-mb", type=int, default=260, help="size of each checkpoint in MB")
    parser.add_argument("--dir", default=None, help="where to put the files (default: system temp)")
    parser.add_argument("--skip", choices=("pull", "verify"), help="leave one part out")
    args = parser.parse_args()
    missing = [b for b in ("scp", "ssh", "openssl") if shutil.which(b) is None]
    if missing:
        print(f"not found: {', '.join(missing)}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="cockpit-bench-pull-", dir=args.dir))
    os.environ["COCKPIT_STATE_DIR"] = str(root / "state")
    from torch import __version__ as torch_version

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"python {sys.version.split()[0]}, torch {torch_version}, {os.cpu_count()} cores, load average "
          f"{load} (other work on this machine skews every figure); files under {root}")
    part1 = part2 = None
    ok = True
    try:
        if args.skip != "pull":
            part1, ok1 = pull_bench(args, root / "pull")
            ok = ok and ok1
            shutil.rmtree(root / "pull", ignore_errors=True)
            print()
        if args.skip != "verify":
            part2, ok2 = verify_bench(args, root / "verify")
            ok = ok and ok2
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary(part1, part2)
    if not ok:
        print("\nSOME CHECKS FAILED (see MISMATCH above)")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
