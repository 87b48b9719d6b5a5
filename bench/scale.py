"""Benchmark: the cockpit at 200 hosts, where the hosts cost almost nothing.

With real sshd and real probe shells, 200 hosts on a 2-core VM measure the simulated remote
side: the load average passes 150 and records time out for the fleet service and the app
alike (bench/ui_load.py). Here every host is an asyncssh server in one separate process
that answers the probe protocol with a canned, real record (tests/data/records/gpu-box.rec,
its sequence number, clock and GPU utilisation rewritten each tick). So the figures are the
cockpit's own: SSH client, record parsing, trackers and the UI.

In one run, each in its own process for --seconds after every host delivered a record:
  a) the Textual app headless (160x60): CPU % of one core, RSS, repaint batches, the time
     a repaint takes (median, max), and key-press latency (`down` in the fleet table until
     the cursor moved, median of --keys presses);
  b) baseline: the fleet service alone, consuming the same events; it also reports the refresh
     tick per host (seconds between two records) and the probe round trip (median, p95, max).

Run: .venv/bin/python -m bench.scale [--hosts 200] [--seconds 300] [--keys 20]
Prints a table; asserts nothing. Never part of the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RECORD = Path(__file__).resolve().parents[1] / "tests" / "data" / "records" / "gpu-box.rec"


# -- the fake hosts (child process) ------------------------------------------------------------
GPU0 = re.compile(r"^(0, [^,]+, [^,]+, )\d+", re.M)


def with_util(body: str, util: int) -> str:
    """The record body with GPU 0's utilisation set to `util` (so the table has work)."""
    return GPU0.sub(lambda m: f"{m[1]}{util}", body)

async def serve_hosts(root: Path, hosts: int) -> None:
    """`hosts` asyncssh servers on 127.0.0.1 that answer each probe request with a record."""
    import asyncssh

    template = RECORD.read_text()
    body = template.split("\n", 1)[1].rsplit("@@end", 1)[0]
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    (root / "client_key").write_bytes(client_key.export_private_key())
    os.chmod(root / "client_key", 0o600)
    client_key.write_public_key(str(root / "client_key.pub"))

    async def probe(process: Any) -> None:
        tick = 0
        try:
            while True:
                line = await process.stdin.readline()
                if not line:
                    break
                if line.startswith("end "):
                    tick += 1
                    seq = line.split()[1]
                    process.stdout.write(f"@@begin {seq} {int(time.time())} fake\n"
                                         f"{with_util(body, (tick * 7) % 100)}@@end {seq}\n")
        except (asyncssh.Error, OSError):
            pass
        process.exit(0)

    servers, known = [], []
    public = host_key.export_public_key("openssh").decode().strip()
    for _ in range(hosts):
        server = await asyncssh.listen("127.0.0.1", 0, server_host_keys=[host_key],
                                       authorized_client_keys=str(root / "client_key.pub"),
                                       process_factory=probe)
        port = server.sockets[0].getsockname()[1]
        servers.append(server)
        known.append(f"[127.0.0.1]:{port} {public}")
    (root / "known_hosts").write_text("\n".join(known) + "\n")
    ports = [s.sockets[0].getsockname()[1] for s in servers]
    (root / "ssh_config").write_text("".join(
        f"Host f{i}\n  HostName 127.0.0.1\n  Port {p}\n  User bench\n"
        f"  IdentityFile {root / 'client_key'}\n" for i, p in enumerate(ports)))
    instances = "".join(f"  - {{name: f{i}, profile: generic-ssh, host: f{i}}}\n" for i in range(hosts))
    (root / "sweep.yaml").write_text(
        f"sweep: scale\ninterval: 2s\nssh: {{config: [ssh_config], known_hosts: [known_hosts]}}\n"
        f"instances:\n{instances}")
    (root / "READY").write_text("ok")
    await asyncio.Event().wait()


# -- the measured children ---------------------------------------------------------------------
async def until(check: Any, timeout: float, step: float = 0.5) -> bool:
    """Poll `check` until it is true or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if check() or time.monotonic() > deadline:
            return bool(check())
        await asyncio.sleep(step)

def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> tuple[float, float]:
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines()
                  if line.startswith(("VmRSS", "VmHWM")))
    return float(fields["VmRSS"].split()[0]) / 1024, float(fields["VmHWM"].split()[0]) / 1024


async def measure_app(sweep: Path, seconds: float, keys: int) -> dict[str, Any]:
    from textual.widgets import DataTable

    from cockpit.services.config.acks import AckStore
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.ui.app import CockpitApp

    durations: list[float] = []

    class Timed(CockpitApp):
        def repaint(self) -> None:
            began = time.perf_counter()
            super().repaint()
            durations.append(time.perf_counter() - began)

    app = Timed(load_sweep(sweep), banners=False, acks=AckStore(sweep.parent / "acks.json"))
    out: dict[str, Any] = {}
    async with app.run_test(size=(160, 60)) as pilot:
        await until(lambda: all(t.snapshot for t in app.trackers.values()), 180)
        out["reported"] = sum(1 for t in app.trackers.values() if t.snapshot)
        durations.clear()
        start_cpu, start = cpu(), time.perf_counter()
        await asyncio.sleep(seconds)
        out["cpu_pct"] = 100 * (cpu() - start_cpu) / (time.perf_counter() - start)
        out["repaint_ms"] = ([1000 * statistics.median(durations), 1000 * max(durations)]
                             if durations else None)
        table = app.query_one("#fleet", DataTable)
        latencies = []
        for _ in range(keys):
            row = table.cursor_row
            began = time.perf_counter()
            await pilot.press("down")
            await until(lambda row=row: table.cursor_row != row, 10, step=0.001)
            latencies.append(1000 * (time.perf_counter() - began))
        out["key_ms"] = [statistics.median(latencies), max(latencies)]
        out["rss_mb"] = rss_mb()
    return out


async def measure_fleet(sweep: Path, seconds: float) -> dict[str, Any]:
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.transport.fleet import Fleet

    loaded = load_sweep(sweep)
    fleet = Fleet(loaded.sweep, loaded.profiles, loaded.directory)
    seen: set[str] = set()
    probe_ms: list[float] = []
    not_connected: list[str] = []

    async def consume() -> None:
        async for event in fleet.events():
            snap = getattr(event, "snapshot", None)
            if snap is not None:
                seen.add(snap.instance)
                if isinstance(snap.probe_ms, float):
                    probe_ms.append(snap.probe_ms)
            elif event.state.reachability.value != "connected":
                not_connected.append(event.state.reachability.value)

    fleet.start()
    reader = asyncio.create_task(consume())
    await until(lambda: len(seen) >= len(loaded.sweep.instances), 180)
    probe_ms.clear()
    not_connected.clear()
    start_cpu, start = cpu(), time.perf_counter()
    await asyncio.sleep(seconds)
    elapsed = time.perf_counter() - start
    window = sorted(probe_ms)
    out = {"reported": len(seen), "cpu_pct": 100 * (cpu() - start_cpu) / elapsed, "rss_mb": rss_mb(),
           "records": len(window),
           # Seconds between two records of one host, averaged over hosts (target: the interval
           # plus one round trip, since the next tick starts after the previous record).
           "refresh_s": elapsed * len(loaded.sweep.instances) / max(len(window), 1),
           "probe_ms": ([statistics.median(window), window[int(0.95 * (len(window) - 1))], window[-1]]
                        if window else None),
           "not_connected": len(not_connected)}
    reader.cancel()
    await fleet.stop()
    return out


def child(kind: str, root: Path, seconds: float, keys: int) -> None:
    if kind == "hosts":
        asyncio.run(serve_hosts(root, int(seconds)))
        return
    sweep = root / "sweep.yaml"
    work = measure_app(sweep, seconds, keys) if kind == "app" else measure_fleet(sweep, seconds)
    result = asyncio.run(work)
    (root / f"{kind}.json").write_text(json.dumps(result))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=300.0)
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--child", choices=("hosts", "app", "fleet"), help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root, args.hosts if args.child == "hosts" else args.seconds, args.keys)
        return 0
    with tempfile.TemporaryDirectory(prefix="cockpit-scale-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "COCKPIT_STATE_DIR": str(root / "state")}
        hosts = subprocess.Popen([sys.executable, "-m", "bench.scale", "--child", "hosts",
                                  "--root", str(root), "--hosts", str(args.hosts)], env=env)
        try:
            deadline = time.monotonic() + 120
            while not (root / "READY").exists():
                if time.monotonic() > deadline or hosts.poll() is not None:
                    raise RuntimeError("the fake hosts did not start")
                time.sleep(0.2)
            results = {}
            for kind in ("fleet", "app"):
                subprocess.run([sys.executable, "-m", "bench.scale", "--child", kind,
                                "--root", str(root), "--seconds", str(args.seconds),
                                "--keys", str(args.keys)], env=env, check=True)
                results[kind] = json.loads((root / f"{kind}.json").read_text())
        finally:
            hosts.terminate()
            hosts.wait(10)
    app, fleet = results["app"], results["fleet"]
    print(f"{args.hosts} cheap hosts (asyncssh, canned real records) at 2 s, {args.seconds:.0f} s window, "
          f"{os.cpu_count()} cores")
    print(f"  reported: app {app['reported']}, fleet service {fleet['reported']}")
    print(f"  CPU % of one core: app {app['cpu_pct']:.1f}%, fleet service alone {fleet['cpu_pct']:.1f}% "
          f"({app['cpu_pct'] / max(fleet['cpu_pct'], 0.01):.2f}x)")
    print(f"  RSS MB (now, peak): app {app['rss_mb'][0]:.0f}, {app['rss_mb'][1]:.0f}; "
          f"fleet {fleet['rss_mb'][0]:.0f}, {fleet['rss_mb'][1]:.0f}")
    if fleet.get("probe_ms"):
        print(f"  refresh per host (fleet service): one record every {fleet['refresh_s']:.2f} s "
              f"(interval 2 s + round trip); round trip median {fleet['probe_ms'][0]:.1f} ms, "
              f"p95 {fleet['probe_ms'][1]:.1f} ms, max {fleet['probe_ms'][2]:.1f} ms; "
              f"{fleet['records']} records, {fleet['not_connected']} state changes away from connected")
    if app["repaint_ms"]:
        print(f"  repaint (one batch of changed rows): median {app['repaint_ms'][0]:.1f} ms, "
              f"max {app['repaint_ms'][1]:.1f} ms")
    print(f"  key press `down` to the cursor moving: median {app['key_ms'][0]:.1f} ms, "
          f"max {app['key_ms'][1]:.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
