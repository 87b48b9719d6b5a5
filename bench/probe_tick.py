"""Benchmark: one cockpit probe tick for 1, 10 and 50 hosts vs one `ssh` process per metric.

Both sides talk to a real OpenSSH sshd on loopback whose remote shell sources root's
~/.bashrc, like a rented box with conda/pyenv init. The baseline is what the seed's patrol
scripts do: one `ssh` per metric (GPU query, df -h, df -i, memory, tmux ls, log size),
metrics one after another, hosts in parallel. The cockpit keeps one connection and one
long-lived probe per host and asks for one record per tick.

Run: .venv/bin/python -m bench.probe_tick [--hosts 1,10,50] [--ticks 5]
Prints medians and the speed-up ratio measured in the same run. Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import HostWatcher
from tests.sshd import Sshd

BASELINE_METRICS = (
    "nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader,nounits",
    "df -h {box}",
    "df -i {box}",
    "cat /sys/fs/cgroup/memory.current /sys/fs/cgroup/memory.max 2>/dev/null"
    " || cat /sys/fs/cgroup/memory/memory.usage_in_bytes",
    "tmux ls",
    "stat -c %s {box}/q1_master.log",
)


def make_box(root: Path) -> Path:
    box = root / "box"
    (box / "runs" / "logs").mkdir(parents=True)
    (box / "queue_1.txt").write_text("configs/a.yaml recon 2\n")
    (box / "q1_master.log").write_text("[2026-11-21 10:00:00] [1/1] STARTING a (recon, 2ep)\n" * 50)
    for i in range(5):
        (box / "runs" / "logs" / f"cell{i}.log").write_text("Epoch 1/2 | loss 0.5\n" * 20)
    return box


def write_sweep(root: Path, sshd: Sshd, box: Path, hosts: int) -> Path:
    known = root / "known_hosts"
    known.write_text(sshd.known_hosts_line())
    config = root / "ssh_config"
    config.write_text(
        "".join(
            f"Host h{i}\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User root\n"
            f"  IdentityFile {sshd.client_key}\n  UserKnownHostsFile {known}\n"
            for i in range(hosts)
        )
    )
    lines = ["sweep: bench", "ssh:", f"  config: [{config}]", "instances:"]
    for i in range(hosts):
        lines += [
            f"  - name: h{i}", "    profile: generic-ssh", f"    host: h{i}",
            f"    queue: {box}/queue_1.txt", f"    queue_log: {box}/q1_master.log",
            f"    run_logs: {box}/runs/logs", f"    checkpoints: {box}",
        ]
    path = root / f"sweep{hosts}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


async def cockpit_ticks(sweep: Path, ticks: int) -> tuple[list[float], float, float]:
    loaded = load_sweep(sweep)
    watchers = [
        HostWatcher(inst, loaded.profiles[inst.profile], loaded.sweep.ssh, loaded.directory)
        for inst in loaded.sweep.instances
    ]
    started = time.perf_counter()
    ok = await asyncio.gather(*(w.connect() for w in watchers))
    connect_s = time.perf_counter() - started
    assert all(ok), [w.state for w in watchers if w.probe is None]
    await asyncio.gather(*(w.tick() for w in watchers))  # first tick reads log tails
    times = []
    cpu0 = time.process_time()
    for _ in range(ticks):
        t0 = time.perf_counter()
        await asyncio.gather(*(w.tick() for w in watchers))
        times.append(time.perf_counter() - t0)
    client_cpu = (time.process_time() - cpu0) / ticks
    await asyncio.gather(*(w.close() for w in watchers))
    return times, connect_s, client_cpu


async def baseline_tick(root: Path, box: Path, hosts: int) -> float:
    config = root / "ssh_config"

    async def one_host(i: int) -> None:
        for metric in BASELINE_METRICS:
            proc = await asyncio.create_subprocess_exec(
                "ssh", "-F", str(config), "-o", "BatchMode=yes", "-o", "ConnectTimeout=15",
                f"h{i}", metric.format(box=box),
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                stdin=asyncio.subprocess.DEVNULL,
            )
            await proc.wait()

    t0 = time.perf_counter()
    await asyncio.gather(*(one_host(i) for i in range(hosts)))
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hosts", default="1,10,50")
    parser.add_argument("--ticks", type=int, default=5)
    parser.add_argument("--baseline-ticks", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cockpit-bench-") as tmp:
        root = Path(tmp)
        os.environ["COCKPIT_STATE_DIR"] = str(root / "state")
        sshd = Sshd(root / "sshd")
        sshd.start()
        box = make_box(root)
        rows = []
        try:
            for hosts in (int(h) for h in args.hosts.split(",")):
                sweep = write_sweep(root, sshd, box, hosts)
                times, connect_s, cpu = asyncio.run(cockpit_ticks(sweep, args.ticks))
                base = [asyncio.run(baseline_tick(root, box, hosts))
                        for _ in range(args.baseline_ticks)]
                rows.append((hosts, statistics.median(times), connect_s, cpu, statistics.median(base)))
        finally:
            sshd.stop()
    print(f"probe tick, loopback OpenSSH, remote shell sources ~/.bashrc; python {sys.version.split()[0]}")
    print("(every simulated host's probe runs on this same machine, so the remote work of all")
    print(" hosts shares its cores; 'client cpu' is the cockpit process's own CPU per tick)")
    print(f"{'hosts':>5} | {'cockpit tick':>12} | {'client cpu':>10} | {'(connect)':>9} | "
          f"{'ssh-per-metric':>14} | {'speed-up':>8}")
    for hosts, tick, connect_s, cpu, base in rows:
        print(f"{hosts:>5} | {tick * 1000:>9.1f} ms | {cpu * 1000:>7.1f} ms | {connect_s:>7.2f} s | "
              f"{base * 1000:>11.0f} ms | {base / tick:>7.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
