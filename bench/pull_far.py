"""Benchmark: the cockpit's pull against `scp` (default cipher and AES-GCM) and `rsync` on a
fast link (loopback) and a far one (loopback through bench/linkproxy.py, a fixed delay each
way), for one large file and for many 5 MB files.

A real OpenSSH sshd on loopback serves a durable root with two finished cells: `big` (one file
of --size-mb MiB) and `many` (--files files of --file-mb MB). For each link and each case the
methods run in turn, rotated every round, and the best and median of --repeat rounds are
printed with the ratios. The cockpit side is `pull()` (SFTP over its asyncssh connection,
or the system ssh client for a large file on the fast link; SHA-256 of every byte, fsync,
rename only when the hash matches the manifest); the
manifest (one remote command hashing the files on the box) is timed apart and printed. `scp`
and `rsync` each run as one process with their own connection over the same ssh_config and
known_hosts; neither hashes against a manifest nor fsyncs. Every copy's content is checked
after each run (outside the timing).

The far link adds --rtt-ms (default 100) of round trip and no rate cap (--rate-mbps to add one):
what it measures is how many bytes each tool keeps in flight, as on a long real link; loss and
jitter are not emulated. The proxy runs as its own process.

Run: .venv/bin/python -m bench.pull_far [--repeat 3] [--size-mb 1024] [--files 200] [--file-mb 5]
     [--rtt-ms 100] [--far-size-mb N] [--far-files N] [--links loopback,far]
Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.pull_verify import GCM, MB, MIB, run_copy, ssh_version, write_big

if TYPE_CHECKING:
    from cockpit.models.custody import Manifest
    from cockpit.models.sweep import Instance
    from cockpit.services.transport.ssh import Target

BIG = "big"
MANY = "many"


def write_cells(durable: Path, size: int, files: int, file_bytes: int) -> dict[str, dict[str, str]]:
    """The two cells; returns cell -> {name: sha256} for the content checks."""
    sums: dict[str, dict[str, str]] = {BIG: {}, MANY: {}}
    (durable / BIG).mkdir(parents=True)
    write_big(durable / BIG / "data.bin", size)
    (durable / MANY).mkdir(parents=True)
    base = os.urandom(file_bytes)
    for index in range(files):
        data = index.to_bytes(8, "little") + base[8:]
        (durable / MANY / f"shard-{index:04d}.bin").write_bytes(data)
        sums[MANY][f"shard-{index:04d}.bin"] = hashlib.sha256(data).hexdigest()
    sums[BIG]["data.bin"] = file_sha(durable / BIG / "data.bin")
    return sums


def file_sha(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(8 * MIB):
            digest.update(block)
    return digest.hexdigest()


def content_ok(folder: Path, expected: dict[str, str]) -> bool:
    """Every expected file in `folder` with its SHA-256."""
    return all((folder / name).is_file() and file_sha(folder / name) == sha
               for name, sha in expected.items())


async def manifest_of(inst: Instance, target: Target, cells: list[str]) -> tuple[float, Manifest]:
    from cockpit.services.custody.pull import remote_manifest
    from cockpit.services.transport.remote import SshBox
    from cockpit.services.transport.ssh import connect

    box = SshBox(await connect(target), owns=True, target=target)
    try:
        t0 = time.perf_counter()
        assert inst.durable_root is not None
        state = await remote_manifest(box, inst.name, inst.durable_root, inst.queue_log, cells)
        return time.perf_counter() - t0, state.manifest
    finally:
        await box.close()


async def cockpit_pull(target: Target, manifest: Manifest, cell: str, dest: Path) -> tuple[float, int]:
    """Connect, then pull one cell; the pull's seconds (the connect is not counted: scp and
    rsync pay theirs, so this favours nobody by much: one handshake) and bytes moved."""
    from cockpit.services.custody.pull import pull
    from cockpit.services.transport.remote import SshBox
    from cockpit.services.transport.ssh import connect

    box = SshBox(await connect(target), owns=True, target=target)
    try:
        t0 = time.perf_counter()
        result = await pull(box, manifest, dest, [cell])
        took = time.perf_counter() - t0
    finally:
        await box.close()
    if not result.ok:
        raise RuntimeError(f"cockpit pull failed: {result.failures[:2]}")
    return took, result.bytes_moved


def copy_argv(config: Path, remote: str, dest: Path) -> dict[str, list[str]]:
    """scp / scp AES-GCM / rsync of `remote` (a file, or a folder copied whole) into dest."""
    base = ["-F", str(config), "-o", "BatchMode=yes"]
    out = {
        "scp": ["scp", "-r", *base, f"gpu-box-1:{remote}", f"{dest}/"],
        "scp aes128-gcm": ["scp", "-r", *base, "-c", GCM, f"gpu-box-1:{remote}", f"{dest}/"],
    }
    if shutil.which("rsync"):
        out["rsync -a"] = ["rsync", "-a", "-e", f"ssh -F {config} -o BatchMode=yes",
                           f"gpu-box-1:{remote}", f"{dest}/"]
    return out


def measure(label: str, inst: Instance, target: Target, config: Path, durable: Path,
            sums: dict[str, dict[str, str]], repeat: int, root: Path) -> dict[str, Any]:
    """Every method on both cases over one link; rounds rotate the order."""
    manifest_s, manifest = asyncio.run(manifest_of(inst, target, [BIG, MANY]))
    sizes = {cell: sum(f.size for f in manifest.files if f.cell == cell) for cell in (BIG, MANY)}
    counts = {cell: sum(1 for f in manifest.files if f.cell == cell) for cell in (BIG, MANY)}
    print(f"{label}: manifest of {sum(sizes.values()) / MB:.0f} MB in {manifest_s:.2f} s "
          f"(hashed on the box, one command)")
    figures: dict[str, Any] = {"manifest_s": manifest_s, "sizes": sizes, "counts": counts, "cases": {}}
    counter = iter(range(1_000_000))
    for cell in (BIG, MANY):
        remote = str(durable / cell / "data.bin") if cell == BIG else str(durable / cell)
        methods = ["cockpit", *copy_argv(config, remote, root)]
        runs: dict[str, list[float]] = {m: [] for m in methods}
        for round_no in range(repeat):
            order = methods[round_no % len(methods):] + methods[:round_no % len(methods)]
            took = []
            for name in order:
                dest = root / f"dest{next(counter)}"
                dest.mkdir()
                if name == "cockpit":
                    seconds, moved = asyncio.run(cockpit_pull(target, manifest, cell, dest))
                    got = dest / cell
                    if moved != sizes[cell]:
                        raise RuntimeError(f"cockpit moved {moved} of {sizes[cell]} bytes")
                else:
                    seconds = run_copy(copy_argv(config, remote, dest)[name])
                    got = dest if cell == BIG else dest / cell
                if not content_ok(got, sums[cell]):
                    raise RuntimeError(f"{name} left wrong content in {got}")
                runs[name].append(seconds)
                took.append(f"{name} {seconds:.2f} s")
                shutil.rmtree(dest)
            print(f"  {cell} round {round_no + 1}: {', '.join(took)}", flush=True)
        figures["cases"][cell] = runs
    return figures


def report(label: str, figures: dict[str, Any]) -> list[str]:
    """Printed lines, and markdown rows for the README."""
    rows = []
    for cell, runs in figures["cases"].items():
        size = figures["sizes"][cell]
        what = (f"1 file, {size / MIB:.0f} MiB" if cell == BIG
                else f"{figures['counts'][cell]} files, {size / MB:.0f} MB")
        best = {m: min(t) for m, t in runs.items()}
        median = {m: statistics.median(t) for m, t in runs.items()}
        print(f"\n{label}, {what}: best / median of {len(runs['cockpit'])} (MB/s)")
        for name in runs:
            print(f"  {name:<16} {size / best[name] / MB:7.0f} {size / median[name] / MB:7.0f}"
                  f"   ({best[name]:.2f} s best)")
        baselines = [m for m in runs if m != "cockpit"]
        ratio = {m: best[m] / best["cockpit"] for m in baselines}
        ratio_med = {m: median[m] / median["cockpit"] for m in baselines}
        copies = [m for m in baselines if m in ("scp", "rsync -a")]
        better = min(copies, key=lambda m: best[m])
        print("  cockpit / " + ", ".join(f"{m}: {ratio[m]:.2f}x (median {ratio_med[m]:.2f}x)"
                                         for m in baselines)
              + f"; vs the better of scp and rsync ({better}): {ratio[better]:.2f}x")
        cells = " | ".join(f"{size / best[m] / MB:.0f}" for m in runs)
        rows.append(f"| {label} | {what} | {cells} | {ratio['scp']:.2f}x ({ratio_med['scp']:.2f}x) "
                    f"| {ratio[better]:.2f}x ({ratio_med[better]:.2f}x) |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--size-mb", type=int, default=1024, help="the large file, MiB")
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--file-mb", type=int, default=5, help="each small file, MB")
    parser.add_argument("--rtt-ms", type=float, default=100.0)
    parser.add_argument("--rate-mbps", type=float, default=0.0)
    parser.add_argument("--links", default="loopback,far")
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    from bench.linkproxy import start_proxy
    from tests.sshd import Sshd
    from tests.test_pull_sshd import instance_for

    root = Path(tempfile.mkdtemp(prefix="cockpit-bench-far-", dir=args.dir))
    os.environ["COCKPIT_STATE_DIR"] = str(root / "state")
    print(f"python {sys.version.split()[0]}, {ssh_version()}, {os.cpu_count()} cores, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (a shared machine: other work skews "
          f"every figure; compare within one run); files under {root}")
    box = root / "box"
    durable = box / "durable"
    sums = write_cells(durable, args.size_mb * MIB, args.files, args.file_mb * 1_000_000)
    (box / "queue_1.txt").write_text(f"cfg/{BIG}.yaml t 2\ncfg/{MANY}.yaml t 2\n")
    (box / "q1_master.log").write_text(
        f"[2026-11-21 10:00:00] [1/2] FINISHED {BIG} (exit=0)\n"
        f"[2026-11-21 10:00:01] [2/2] FINISHED {MANY} (exit=0)\n")
    sshd = Sshd(root / "sshd")
    proxy: subprocess.Popen[bytes] | None = None
    rows: list[str] = []
    try:
        sshd.start()
        for link in args.links.split(","):
            client = root / link
            client.mkdir()
            real_port = sshd.port
            if link == "far":
                proxy, port = start_proxy("127.0.0.1", real_port, args.rtt_ms, args.rate_mbps)
                sshd.port = port  # the client files point at the proxy (known_hosts too: strict)
                label = f"{args.rtt_ms:.0f} ms RTT" + (f", {args.rate_mbps:.0f} Mbit/s"
                                                        if args.rate_mbps else "")
            else:
                label = "loopback"
            try:
                inst, target = instance_for(client, sshd, box)
            finally:
                sshd.port = real_port
            figures = measure(label, inst, target, client / "ssh_config", durable, sums,
                              args.repeat, client)
            rows += report(label, figures)
            if proxy is not None:
                proxy.kill()
                proxy.wait()
                proxy = None
    finally:
        sshd.stop()
        if proxy is not None:
            proxy.kill()
        shutil.rmtree(root, ignore_errors=True)
    print("\n| link | case | cockpit | scp | scp AES-GCM | rsync | cockpit / scp, best (median) "
          "| cockpit / better of scp, rsync |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)
    print("(MB/s, best of the rounds; MB = 10^6 bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
