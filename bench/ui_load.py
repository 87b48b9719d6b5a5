"""Benchmark: what the cockpit TUI costs while watching a fleet, and how fast it starts.

Two figures, each with a baseline measured in the same run and the ratio:

1. Watch load. One real OpenSSH sshd on loopback (tests/sshd.py) stands in for N hosts
   (`Host h0..hN-1` aliases in one ssh_config, sweep `interval: 2s`, as in
   bench/probe_tick.py). In its own subprocess each:
     a) the cockpit Textual app, headless (`CockpitApp.run_test(size=(160, 60))`);
     b) baseline: the fleet service alone (`Fleet.start()` + consuming `Fleet.events()`).
   Once every host has delivered its first snapshot, the child reads its CPU time
   (getrusage(RUSAGE_SELF)), watches for --seconds, reads it again, and reports CPU % of
   one core over that window, current and peak RSS (/proc/self/status VmRSS / VmHWM),
   snapshots received and, for the app, repaint batches. Goals: < 10 % of one core and
   RSS < 250 MB for the app. The difference between a) and b) is what the UI itself costs.
   Every probe runs on this same machine, so the sshd side competes for the same cores.

2. Launch to first frame on the demo fleet (`cockpit demo --serve`, 3 boxes). Each launch
   is a fresh `python -m bench.ui_load --child launch` process; the parent takes
   time.time() just before Popen and the child reports time.time() when the first frame
   was painted (the app's own on_mount call_after_refresh hook, plus when `pilot.pause()`
   returned, an upper bound since it waits for CPU idle), when every host had a snapshot
   (first live row data) and the repaint batch after that. Goal: first frame < 3 s.
   Baseline: wall time of the headless one-shot `python -m cockpit status SWEEP --json`;
   breakdown: `python -c pass` and `python -c "import cockpit.ui.app"`.

Run: .venv/bin/python -m bench.ui_load [--hosts 50] [--seconds 60] [--launches 5]
                                       [--skip-load] [--skip-launch]
Needs /usr/sbin/sshd for part 1. Prints a table; asserts nothing about timings.
Never part of the tests.
"""

from __future__ import annotations

import time

CHILD_STARTED = time.time()  # first thing the module does: launch timing starts here

import argparse  # noqa: E402
import asyncio  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from collections import Counter  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

# cockpit, tests.* and bench.probe_tick are imported inside functions only, so a launch
# child pays for importing the cockpit after CHILD_STARTED, as a real launch does.

FIRST_SNAPSHOT_TIMEOUT_S = 120.0
CPU_GOAL_PCT = 10.0
RSS_GOAL_MB = 250.0
FIRST_FRAME_GOAL_S = 3.0


# -- measurements inside a child --------------------------------------------------------------
def cpu_seconds() -> float:
    """User + system CPU time of this process (not its children)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def memory_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MB, from /proc/self/status."""
    fields: dict[str, float] = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0]) / 1024.0  # kB -> MB
    return fields["VmRSS"], fields["VmHWM"]


class Window:
    """CPU and wall clock between `open()` and `close()`."""

    def __init__(self) -> None:
        self.cpu0 = self.wall0 = self.cpu1 = self.wall1 = 0.0

    def open(self) -> None:
        self.cpu0, self.wall0 = cpu_seconds(), time.perf_counter()

    def close(self) -> None:
        self.cpu1, self.wall1 = cpu_seconds(), time.perf_counter()

    def report(self) -> dict[str, float]:
        rss, peak = memory_mb()
        return {
            "startup_cpu_s": self.cpu0,
            "cpu_s": self.cpu1 - self.cpu0,
            "wall_s": self.wall1 - self.wall0,
            "rss_mb": rss,
            "peak_rss_mb": peak,
        }


async def wait_until(ready: Any, timeout: float) -> bool:
    """Poll `ready()` every 50 ms; False when it never became true within `timeout` s."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def instrumented_app(sweep: Path) -> Any:
    """A CockpitApp (banners off) that counts what it absorbs and stamps, with time.time(),
    its first frame, the moment every host first had a snapshot and the repaint after it."""
    from cockpit.models.events import FleetEvent, HostStateChanged, SnapshotTaken
    from cockpit.models.snapshot import Reachability
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.ui.app import CockpitApp

    class InstrumentedApp(CockpitApp):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.snapshots = 0
            self.probe_ms: list[float] = []
            self.trouble: Counter[str] = Counter()
            self.frame_wall: float | None = None
            self.live_wall: float | None = None
            self.live_painted_wall: float | None = None

        def _first_frame(self) -> None:
            super()._first_frame()
            self.frame_wall = time.time()

        def absorb(self, event: FleetEvent) -> None:
            super().absorb(event)
            if isinstance(event, HostStateChanged):
                if event.state.reachability not in (Reachability.CONNECTED, Reachability.CONNECTING):
                    self.trouble[f"{event.state.reachability.value}: {event.state.detail}"] += 1
                return
            assert isinstance(event, SnapshotTaken)
            self.snapshots += 1
            if isinstance(event.snapshot.probe_ms, float):
                self.probe_ms.append(event.snapshot.probe_ms)
            if self.live_wall is None and all(t.snapshot is not None for t in self.trackers.values()):
                self.live_wall = time.time()

        def repaint(self) -> None:
            before = self.repaints
            super().repaint()
            if self.live_wall is not None and self.live_painted_wall is None and self.repaints > before:
                self.live_painted_wall = time.time()

    return InstrumentedApp(load_sweep(sweep), banners=False)


def median_or_none(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


async def child_ui(sweep: Path, seconds: float) -> dict[str, Any]:
    """The cockpit app, headless, watching the sweep for `seconds` after first data."""
    app = instrumented_app(sweep)
    window = Window()
    out: dict[str, Any] = {}
    async with app.run_test(size=(160, 60)) as pilot:
        await pilot.pause()
        started = time.perf_counter()
        ok = await wait_until(lambda: app.live_wall is not None, FIRST_SNAPSHOT_TIMEOUT_S)
        out["first_data_s"] = time.perf_counter() - started
        out["all_hosts_reported"] = ok
        snaps0, repaints0, probes0 = app.snapshots, app.repaints, len(app.probe_ms)
        profile = None
        if os.environ.get("COCKPIT_BENCH_PROFILE"):  # where the UI's CPU goes, for tuning
            import cProfile

            profile = cProfile.Profile()
            profile.enable()
        window.open()
        await asyncio.sleep(seconds)
        window.close()
        if profile is not None:
            profile.disable()
            profile.dump_stats(os.environ["COCKPIT_BENCH_PROFILE"])
        out.update(window.report())
        out["snapshots"] = app.snapshots - snaps0
        out["repaints"] = app.repaints - repaints0
        out["probe_ms"] = median_or_none(app.probe_ms[probes0:])
        out["snapshots_total"] = app.snapshots
        out["seq_sum"] = sum(t.snapshot.seq for t in app.trackers.values() if t.snapshot is not None)
        out["missing"] = sorted(n for n, t in app.trackers.items() if t.snapshot is None)
        out["states"] = dict(Counter(t.state.reachability.value for t in app.trackers.values()))
        out["details"] = sorted({t.state.detail for t in app.trackers.values() if t.state.detail})
        out["trouble"] = dict(app.trouble)
        out["workers"] = [f"{w.name}: {w.state.name}" + (f" {w.error!r}" if w.error else "")
                          for w in app.workers]
    return out


async def child_fleet(sweep: Path, seconds: float) -> dict[str, Any]:
    """Baseline: the fleet service alone, no UI, same sweep and window."""
    from cockpit.models.events import HostStateChanged, SnapshotTaken
    from cockpit.models.snapshot import Reachability
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.transport.fleet import Fleet

    loaded = load_sweep(sweep)
    fleet = Fleet(loaded.sweep, loaded.profiles, loaded.directory)
    counted = {"snapshots": 0}
    probe_ms: list[float] = []
    trouble: Counter[str] = Counter()

    async def consume() -> None:
        async for event in fleet.events():
            if isinstance(event, SnapshotTaken):
                counted["snapshots"] += 1
                if isinstance(event.snapshot.probe_ms, float):
                    probe_ms.append(event.snapshot.probe_ms)
            elif isinstance(event, HostStateChanged) and event.state.reachability not in (
                    Reachability.CONNECTED, Reachability.CONNECTING):
                trouble[f"{event.state.reachability.value}: {event.state.detail}"] += 1

    fleet.start()
    consumer = asyncio.create_task(consume())
    window = Window()
    out: dict[str, Any] = {}
    try:
        started = time.perf_counter()
        ok = await wait_until(lambda: all(w.last_snapshot is not None for w in fleet.watchers.values()),
                              FIRST_SNAPSHOT_TIMEOUT_S)
        out["first_data_s"] = time.perf_counter() - started
        out["all_hosts_reported"] = ok
        snaps0, probes0 = counted["snapshots"], len(probe_ms)
        window.open()
        await asyncio.sleep(seconds)
        window.close()
        out.update(window.report())
        out["snapshots"] = counted["snapshots"] - snaps0
        out["repaints"] = None
        out["probe_ms"] = median_or_none(probe_ms[probes0:])
        out["snapshots_total"] = counted["snapshots"]
        out["missing"] = sorted(n for n, w in fleet.watchers.items() if w.last_snapshot is None)
        out["states"] = dict(Counter(w.state.reachability.value for w in fleet.watchers.values()))
        out["details"] = sorted({w.state.detail for w in fleet.watchers.values() if w.state.detail})
        out["trouble"] = dict(trouble)
    finally:
        consumer.cancel()
        await fleet.stop()
    return out


async def child_launch(sweep: Path) -> dict[str, Any]:
    """One launch: when the first frame was painted and when every row had live data."""
    imports0 = time.time()
    import cockpit.ui.app  # noqa: F401  (timed here; instrumented_app imports it again for free)
    imported = time.time()
    app = instrumented_app(sweep)
    out: dict[str, Any] = {"started": CHILD_STARTED, "imports_from": imports0, "imported": imported}
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        out["first_frame"] = time.time()
        await wait_until(lambda: app.live_painted_wall is not None, FIRST_SNAPSHOT_TIMEOUT_S)
        out["app_first_frame"] = app.frame_wall
        out["live"] = app.live_wall
        out["live_painted"] = app.live_painted_wall
        out["missing"] = sorted(n for n, t in app.trackers.items() if t.snapshot is None)
        out["trouble"] = dict(app.trouble)
    return out


def run_child(kind: str, sweep: Path, seconds: float, out: Path) -> None:
    if kind == "ui":
        result = asyncio.run(child_ui(sweep, seconds))
    elif kind == "fleet":
        result = asyncio.run(child_fleet(sweep, seconds))
    else:
        result = asyncio.run(child_launch(sweep))
    out.write_text(json.dumps(result))


# -- the parent ------------------------------------------------------------------------------
def spawn(kind: str, sweep: Path, seconds: float, root: Path, env: dict[str, str]) -> dict[str, Any]:
    """Run one child and return its JSON report, with `launched` = time.time() before Popen."""
    out = root / f"result-{kind}-{time.monotonic_ns()}.json"
    log = root / f"child-{kind}-{time.monotonic_ns()}.log"
    cmd = [sys.executable, "-m", "bench.ui_load", "--child", kind, "--sweep", str(sweep),
           "--seconds", str(seconds), "--out", str(out)]
    with log.open("wb") as sink:
        launched = time.time()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env,
                                cwd=Path(__file__).resolve().parent.parent)
        code = proc.wait()
    if code != 0 or not out.exists():
        text = log.read_text(errors="replace")
        errors = [ln for ln in text.splitlines() if "Error" in ln or "Exception" in ln][-5:]
        raise RuntimeError(f"child {kind} exited with {code}:\n" + "\n".join(errors) + "\n"
                           + text[-3000:])
    result: dict[str, Any] = json.loads(out.read_text())
    result["launched"] = launched
    noise = log.read_text(errors="replace").strip()
    if noise:
        result["output"] = noise[-2000:]
    return result


def child_env(root: Path) -> dict[str, str]:
    state = root / "state"
    state.mkdir(exist_ok=True)
    return {**os.environ, "COCKPIT_STATE_DIR": str(state)}


def write_interval_sweep(root: Path, sshd: Any, box: Path, hosts: int, interval: str) -> Path:
    from bench.probe_tick import write_sweep

    path: Path = write_sweep(root, sshd, box, hosts)
    lines = path.read_text().splitlines()
    lines.insert(1, f"interval: {interval}")
    path.write_text("\n".join(lines) + "\n")
    return path


def problems(name: str, result: dict[str, Any]) -> list[str]:
    found = []
    if not result.get("all_hosts_reported", True):
        found.append(f"{name}: hosts without any snapshot after {FIRST_SNAPSHOT_TIMEOUT_S:.0f} s: "
                     f"{result['missing']}")
    states = result.get("states", {})
    if set(states) - {"connected"}:
        found.append(f"{name}: end states {states}; details {result.get('details')}")
    for worker in result.get("workers", []):
        if "ERROR" in worker or "CANCELLED" in worker:
            found.append(f"{name}: worker {worker}")
    if result.get("trouble"):
        found.append(f"{name}: connection trouble (state: detail -> count) {result['trouble']}")
    if result.get("output"):
        found.append(f"{name}: child printed:\n{result['output']}")
    return found


def bench_load(hosts: int, seconds: float) -> list[str]:
    from bench.probe_tick import make_box
    from tests.sshd import Sshd

    with tempfile.TemporaryDirectory(prefix="cockpit-bench-ui-") as tmp:
        root = Path(tmp)
        env = child_env(root)
        sshd = Sshd(root / "sshd")
        sshd.start()
        load0 = os.getloadavg()
        try:
            sweep = write_interval_sweep(root, sshd, make_box(root), hosts, "2s")
            ui = spawn("ui", sweep, seconds, root, env)
            base = spawn("fleet", sweep, seconds, root, env)
        finally:
            sshd.stop()

    def pct(r: dict[str, Any]) -> float:
        return float(r["cpu_s"]) / float(r["wall_s"]) * 100.0

    def fmt_ms(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.1f} ms"

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}x" if b > 0 else "n/a"

    print(f"\n1) watch load: {hosts} hosts (one loopback OpenSSH sshd), interval 2 s, "
          f"window {seconds:.0f} s after every host's first snapshot; python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores")
    print("   (the hosts' probes and sshd run on this same machine and share its cores; "
          f"load average {load0[0]:.2f} before, {os.getloadavg()[0]:.2f} after)")
    print(f"   {'':<28} | {'cockpit app':>12} | {'fleet only':>12} | {'UI/baseline':>11}")
    rows = [
        ("CPU % of one core (window)", f"{pct(ui):.2f} %", f"{pct(base):.2f} %", ratio(pct(ui), pct(base))),
        ("CPU seconds (window)", f"{ui['cpu_s']:.2f} s", f"{base['cpu_s']:.2f} s",
         ratio(ui["cpu_s"], base["cpu_s"])),
        ("RSS at end", f"{ui['rss_mb']:.1f} MB", f"{base['rss_mb']:.1f} MB",
         ratio(ui["rss_mb"], base["rss_mb"])),
        ("peak RSS (VmHWM)", f"{ui['peak_rss_mb']:.1f} MB", f"{base['peak_rss_mb']:.1f} MB",
         ratio(ui["peak_rss_mb"], base["peak_rss_mb"])),
        ("snapshots (window)", str(ui["snapshots"]), str(base["snapshots"]),
         ratio(ui["snapshots"], base["snapshots"])),
        ("CPU ms per snapshot", f"{ui['cpu_s'] * 1000 / max(ui['snapshots'], 1):.2f}",
         f"{base['cpu_s'] * 1000 / max(base['snapshots'], 1):.2f}",
         ratio(ui["cpu_s"] / max(ui["snapshots"], 1), base["cpu_s"] / max(base["snapshots"], 1))),
        ("probe round trip (median)", fmt_ms(ui["probe_ms"]), fmt_ms(base["probe_ms"]),
         ratio(ui["probe_ms"] or 0.0, base["probe_ms"] or 0.0)),
        ("repaint batches (window)", str(ui["repaints"]), "-", ""),
        ("connect to all first data", f"{ui['first_data_s']:.2f} s", f"{base['first_data_s']:.2f} s", ""),
        ("CPU before window", f"{ui['startup_cpu_s']:.2f} s", f"{base['startup_cpu_s']:.2f} s", ""),
    ]
    for label, a, b, r in rows:
        print(f"   {label:<28} | {a:>12} | {b:>12} | {r:>11}")
    ideal = hosts * seconds / 2.0
    print(f"   (at most ~{ideal:.0f} snapshots fit a {seconds:.0f} s window at 2 s + tick time)")
    cpu_ok = pct(ui) < CPU_GOAL_PCT
    rss_ok = ui["peak_rss_mb"] < RSS_GOAL_MB
    print(f"   goal CPU < {CPU_GOAL_PCT:.0f} % of one core: {'met' if cpu_ok else 'NOT met'} "
          f"({pct(ui):.2f} %)")
    print(f"   goal RSS < {RSS_GOAL_MB:.0f} MB (peak):      {'met' if rss_ok else 'NOT met'} "
          f"({ui['peak_rss_mb']:.1f} MB)")
    return problems("app", ui) + problems("fleet", base)


def wall(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False, env=env)
    return time.perf_counter() - t0


def bench_launch(launches: int) -> list[str]:
    from tests.demo import start_demo

    found: list[str] = []
    with tempfile.TemporaryDirectory(prefix="cockpit-bench-launch-") as tmp:
        root = Path(tmp)
        env = child_env(root)
        demo_dir = root / "demo"
        demo_dir.mkdir()
        ready0 = time.perf_counter()
        demo = start_demo(demo_dir)
        demo_ready = time.perf_counter() - ready0
        sweep = demo_dir / "sweep.yaml"
        frames, lives, painted, app_frames, starts, imports = [], [], [], [], [], []
        bare, import_ui, status = [], [], []
        load0 = os.getloadavg()
        try:
            py = [sys.executable]
            # Interleaved, so a change in the machine's other load hits both sides alike.
            for _ in range(launches):
                bare.append(wall([*py, "-c", "pass"], env))
                import_ui.append(wall([*py, "-c", "import cockpit.ui.app"], env))
                status.append(wall([*py, "-m", "cockpit", "status", str(sweep), "--json"], env))
                r = spawn("launch", sweep, 0, root, env)
                t0 = r["launched"]
                starts.append(r["started"] - t0)
                imports.append(r["imported"] - r["imports_from"])
                frames.append(r["first_frame"] - t0)
                if r["app_first_frame"] is not None:
                    app_frames.append(r["app_first_frame"] - t0)
                if r["trouble"]:
                    found.append(f"launch: connection trouble {r['trouble']}")
                if r["live"] is None:
                    found.append(f"launch: hosts without a snapshot: {r['missing']}")
                else:
                    lives.append(r["live"] - t0)
                if r.get("live_painted") is not None:
                    painted.append(r["live_painted"] - t0)
                if r.get("output"):
                    found.append(f"launch child printed:\n{r['output']}")
        finally:
            demo.send_signal(signal.SIGTERM)
            demo.wait(30)

    def ms(values: list[float]) -> str:
        return f"{statistics.median(values) * 1000:8.0f} ms" if values else "     n/a   "

    def spread(values: list[float]) -> str:
        return f"({min(values) * 1000:.0f}-{max(values) * 1000:.0f})" if values else ""

    print(f"\n2) launch on the demo fleet (3 boxes; demo up in {demo_ready:.1f} s), "
          f"medians of {launches} fresh processes each, min-max in brackets")
    print(f"   (load average {load0[0]:.2f} before, {os.getloadavg()[0]:.2f} after, "
          f"{os.cpu_count()} cores: wall times move with other work on the machine)")
    print(f"   python -c pass                        {ms(bare)} {spread(bare)}")
    print(f"   python -c 'import cockpit.ui.app'     {ms(import_ui)} {spread(import_ui)}")
    print(f"   cockpit status --json (baseline)      {ms(status)} {spread(status)}")
    print(f"   app launch: Popen -> module top       {ms(starts)} {spread(starts)}")
    print(f"   app launch: cockpit.ui.app import     {ms(imports)} {spread(imports)}  (in-process)")
    print(f"   app launch -> first frame (app stamp) {ms(app_frames)} {spread(app_frames)}"
          "  (on_mount call_after_refresh)")
    print(f"   app launch -> pilot.pause() returned  {ms(frames)} {spread(frames)}"
          "  (upper bound: waits for CPU idle)")
    print(f"   app launch -> live data (all 3 hosts) {ms(lives)} {spread(lives)}")
    print(f"   app launch -> live rows repainted     {ms(painted)} {spread(painted)}")
    first = app_frames or frames
    if first and status:
        med_frame, med_status = statistics.median(first), statistics.median(status)
        print(f"   first frame / status ratio            {med_frame / med_status:8.2f}x")
        if lives:
            print(f"   live data / status ratio              {statistics.median(lives) / med_status:8.2f}x")
        ok = med_frame < FIRST_FRAME_GOAL_S
        paused = f", pilot.pause() {statistics.median(frames):.2f} s" if frames else ""
        print(f"   goal first frame < {FIRST_FRAME_GOAL_S:.0f} s: {'met' if ok else 'NOT met'} "
              f"(app stamp {med_frame:.2f} s{paused})")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--launches", type=int, default=5)
    parser.add_argument("--skip-load", action="store_true")
    parser.add_argument("--skip-launch", action="store_true")
    parser.add_argument("--child", choices=("ui", "fleet", "launch"), help=argparse.SUPPRESS)
    parser.add_argument("--sweep", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args.sweep, args.seconds, args.out)
        return 0
    found: list[str] = []
    if not args.skip_load:
        found += bench_load(args.hosts, args.seconds)
    if not args.skip_launch:
        found += bench_launch(args.launches)
    if found:
        print("\nproblems seen:")
        for line in found:
            print(f"   {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
