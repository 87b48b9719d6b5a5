"""Benchmark: boxes with 40 run logs of 100 KB each, before and after the per-tick log budget.

Before (commit a1e8212) the probe read up to 64 KiB of every log on first contact, so one
record carried ~3.5 MB of base64: more than the SSH channel's 2 MiB window. The reader gave
up on every tick ("the probe exited"), the probe was restarted, and the box was never
watched. Now the client shares LOG_BUDGET (256 KiB) per tick over all logs and they catch up
by offset over a few ticks.

Both sides run against one real OpenSSH sshd on loopback, in ONE run of this script: the
baseline is the whole `cockpit` package of the baseline commit (`git archive` of the baseline into
a temp dir, imported by a worker process with that dir first on `sys.path`), the current one is
this tree. Each worker connects HOSTS watchers, then

  catch-up  ticks every host until all 40 logs are read to their end (or TICKS ticks):
            records received, records lost, bytes of log received, round trip, CPU;
  steady    appends 1 KB to every log and ticks again, 10 times: round trip and CPU;
  parse     40 000 `@@proc` sections through parse_record (quadratic before);
  state     1000 ticks whose 5 log names are new each tick through ProbePlan + HostTracker:
            per-path entries left and traced memory.

Run: .venv/bin/python -m bench.probe_big_logs [--hosts 4] [--baseline a1e8212]
Prints both columns side by side with ratios. Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
LOGS = 40
LOG_BYTES = 100 * 1024
STEADY_TICKS = 10


def make_box(root: Path) -> Path:
    box = root / "box"
    logs = box / "runs" / "logs"
    logs.mkdir(parents=True)
    (box / "queue_1.txt").write_text("".join(f"configs/c{i:02d}.yaml recon 5\n" for i in range(LOGS)))
    (box / "q1_master.log").write_text("[2026-11-21 10:00:00] [1/40] STARTING c00 (recon, 5ep)\n")
    line = b"Epoch 1/5 | step 000123 | loss 0.51234 | lr 3.0e-04 | throughput 1234.5 img/s\n"
    for i in range(LOGS):
        (logs / f"c{i:02d}.log").write_bytes((line * (LOG_BYTES // len(line) + 1))[:LOG_BYTES])
    return box


def write_sweep(root: Path, config: Path, box: Path, hosts: int) -> Path:
    lines = ["sweep: bench-big-logs", "ssh:", f"  config: [{config}]", "instances:"]
    for i in range(hosts):
        lines += [f"  - name: h{i}", "    profile: generic-ssh", "    host: box",
                  f"    queue: {box}/queue_1.txt", f"    queue_log: {box}/q1_master.log",
                  f"    run_logs: {box}/runs/logs"]
    path = root / "sweep.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


# --------------------------------------------------------------------------- worker side

def _append(path: str, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


async def _watch(sweep: Path, box: Path, max_ticks: int) -> dict[str, Any]:
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.transport.fleet import HostWatcher, ProbeLost

    loaded = load_sweep(sweep)
    watchers = [HostWatcher(i, loaded.profiles[i.profile], loaded.sweep.ssh, loaded.directory)
                for i in loaded.sweep.instances]
    assert all(await asyncio.gather(*(w.connect() for w in watchers)))
    sizes = {str(p): p.stat().st_size for p in (box / "runs" / "logs").iterdir()}
    read: list[dict[str, int]] = [{} for _ in watchers]
    stats = {"records": 0, "lost": 0, "log_bytes": 0}
    trips: list[float] = []

    async def one(k: int, w: Any) -> None:
        if w.probe is None and not await w.connect():
            stats["lost"] += 1
            return
        t0 = time.perf_counter()
        try:
            snap = await w.tick()
        except (ProbeLost, OSError) as exc:
            stats["lost"] += 1
            w._lost(exc)
            await w._drop()
            return
        trips.append(time.perf_counter() - t0)
        stats["records"] += 1
        for chunk in snap.log_chunks:
            stats["log_bytes"] += len(chunk.data)
            if chunk.path in sizes:
                read[k][chunk.path] = chunk.offset + len(chunk.data)

    cpu0, wall0 = time.process_time(), time.perf_counter()
    ticks = 0
    while ticks < max_ticks:
        ticks += 1
        await asyncio.gather(*(one(k, w) for k, w in enumerate(watchers)))
        if all(r.get(p) == s for r in read for p, s in sizes.items()):
            break
    caught_up = all(r.get(p) == s for r in read for p, s in sizes.items())
    catch = {**stats, "ticks": ticks, "caught_up": caught_up,
             "cpu_per_tick_ms": (time.process_time() - cpu0) / ticks * 1000,
             "wall_s": time.perf_counter() - wall0,
             "trip_ms": statistics.median(trips) * 1000 if trips else None}
    # Steady state: every log grows by 1 KB per tick.
    stats.update(records=0, lost=0, log_bytes=0)
    trips.clear()
    cpu0 = time.process_time()
    for _ in range(STEADY_TICKS):
        for path in sizes:
            _append(path, b"Epoch 2/5 | loss 0.4\n" * 48)
        await asyncio.gather(*(one(k, w) for k, w in enumerate(watchers)))
    steady = {**stats, "cpu_per_tick_ms": (time.process_time() - cpu0) / STEADY_TICKS * 1000,
              "trip_ms": statistics.median(trips) * 1000 if trips else None}
    await asyncio.gather(*(w.close() for w in watchers))
    return {"catch_up": catch, "steady": steady}


def _parse_proc() -> float:
    from cockpit.models.parse import parse_record

    body = "".join(f"@@proc /q/{i}\n{i}\n" for i in range(40_000))
    record = f"@@begin 1 1 b\n{body}@@end 1\n".encode()
    t0 = time.perf_counter()
    parse_record(record, instance="b", observed_at=0.0)
    return time.perf_counter() - t0


def _state_growth() -> dict[str, float]:
    from cockpit.models.hostview import HostTracker
    from cockpit.models.snapshot import (
        NA,
        FileStat,
        GpuReading,
        GpuStatus,
        HostSnapshot,
        LogChunk,
        Memory,
        QueueFacts,
    )
    from cockpit.models.sweep import Instance
    from cockpit.services.config.profiles import load_named
    from cockpit.services.config.rulebook import load_rulebook
    from cockpit.services.transport.probe import ProbePlan

    inst = Instance(name="a", profile="generic-ssh", host="h", queue_log="/q/m.log", run_logs="/q/l")
    profile = load_named("generic-ssh")
    plan, tracker = ProbePlan(inst, profile), HostTracker(inst, profile, load_rulebook(user=False))
    na = NA("x")
    tracemalloc.start()
    for tick in range(1000):
        plan.request()
        paths = [f"/q/l/run-{tick}-{i}.log" for i in range(5)]
        snap = HostSnapshot(
            instance="a", observed_at=float(tick), remote_time=float(tick), seq=tick, hostname="a",
            gpu=GpuReading(GpuStatus.ABSENT), mounts=(), memory=Memory("none", na, na, na), tmux=(),
            queue=QueueFacts((), None, tuple(FileStat(p, 10, 1.0, 9) for p in paths), None),
            log_chunks=tuple(LogChunk(p, 9, 0, b"Epoch 1/2 " * 100 + b"\n", reset=True)
                             for p in paths))
        plan.absorb(snap)
        tracker.absorb(snap)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    entries = len(plan.cursors) + len(tracker._splitters) + len(tracker._decoders) + len(
        tracker._classifiers)
    return {"entries": float(entries), "traced_mb": current / 1e6}


def worker(sweep: Path, box: Path, max_ticks: int) -> None:
    out = asyncio.run(_watch(sweep, box, max_ticks))
    out["parse_40k_proc_s"] = _parse_proc()
    out["state"] = _state_growth()
    print(json.dumps(out))


# --------------------------------------------------------------------------- driver side

def run_worker(pythonpath: Path, sweep: Path, box: Path, max_ticks: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    done = subprocess.run([sys.executable, "-c", "import sys; from bench.probe_big_logs import "
                           "worker; worker(*map(__import__('pathlib').Path, sys.argv[1:3]), "
                           "int(sys.argv[3]))", str(sweep), str(box), str(max_ticks)],
                          env=env, cwd=pythonpath, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"worker under {pythonpath} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "never"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}{unit}"
    return f"{value}{unit}"


def _ratio(before: Any, after: Any) -> str:
    if isinstance(before, bool) or not isinstance(before, int | float) or not isinstance(
            after, int | float) or not after:
        return ""
    return f"{before / after:.2f}x"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--ticks", type=int, default=30, help="most catch-up ticks")
    parser.add_argument("--baseline", default="a1e8212")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from tests.sshd import Sshd

    with tempfile.TemporaryDirectory(prefix="cockpit-bench-biglogs-") as tmp:
        root = Path(tmp)
        os.environ["COCKPIT_STATE_DIR"] = str(root / "state")
        old = root / "baseline"
        old.mkdir()
        archive = subprocess.run(["git", "archive", args.baseline], cwd=REPO,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        (old / "bench" / "probe_big_logs.py").write_text(Path(__file__).read_text())
        sshd = Sshd(root / "sshd")
        sshd.start()
        try:
            config = sshd.write_client_files("box", root)
            results = {}
            for label, path in (("before", old), ("after", REPO)):
                box = make_box(root / label)
                sweep = write_sweep(root / label, config, box, args.hosts)
                results[label] = run_worker(path, sweep, box, args.ticks)
        finally:
            sshd.stop()
    before, after = results["before"], results["after"]
    print(f"{args.hosts} hosts x {LOGS} run logs of {LOG_BYTES // 1024} KB, one loopback OpenSSH "
          f"sshd; baseline {args.baseline}; python {sys.version.split()[0]}")
    rows = [
        ("catch-up: ticks run", "catch_up", "ticks", ""),
        ("catch-up: every log read to its end", "catch_up", "caught_up", ""),
        ("catch-up: records received", "catch_up", "records", ""),
        ("catch-up: records lost (probe restarted)", "catch_up", "lost", ""),
        ("catch-up: log bytes received", "catch_up", "log_bytes", ""),
        ("catch-up: probe round trip, median", "catch_up", "trip_ms", " ms"),
        ("catch-up: fleet CPU per tick (all hosts)", "catch_up", "cpu_per_tick_ms", " ms"),
        ("steady: records received (of hosts x 10)", "steady", "records", ""),
        ("steady: records lost", "steady", "lost", ""),
        ("steady: probe round trip, median", "steady", "trip_ms", " ms"),
        ("steady: fleet CPU per tick (all hosts)", "steady", "cpu_per_tick_ms", " ms"),
    ]
    print(f"{'':44} | {'before':>12} | {'after':>12} | {'ratio':>8}")
    for name, group, key, unit in rows:
        b, a = before[group][key], after[group][key]
        print(f"{name:44} | {_fmt(b, unit):>12} | {_fmt(a, unit):>12} | {_ratio(b, a):>8}")
    b, a = before["parse_40k_proc_s"], after["parse_40k_proc_s"]
    print(f"{'parse: 40 000 @@proc sections':44} | {b:>10.2f} s | {a:>10.3f} s | {_ratio(b, a):>8}")
    for key, label, unit in (("entries", "state: per-log entries after 1000 ticks", ""),
                             ("traced_mb", "state: traced memory after 1000 ticks", " MB")):
        b, a = before["state"][key], after["state"][key]
        print(f"{label:44} | {_fmt(b, unit):>12} | {_fmt(a, unit):>12} | {_ratio(b, a):>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
