"""The job view's screenshot (issue 21): a 2-box torchrun job whose rank 1 crashed (and the
fleet with its job row).

Replays the real logs of a 2-node gloo run recorded on this machine (tests/data/jobs: each box
in its own network namespace, rank 1 raising at step 10) through the real app, opens the job
view with `J` and saves an SVG (and a PNG when rsvg-convert is installed).

    .venv/bin/python -m bench.job_view_screenshot [OUT_DIR]   # default: screenshots/
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

from cockpit.models.events import FleetEvent, HostStateChanged, SnapshotTaken
from cockpit.models.snapshot import (
    NA,
    FileStat,
    GpuReading,
    GpuStatus,
    HostSnapshot,
    HostState,
    LogChunk,
    Memory,
    QueueFacts,
    Reachability,
)
from cockpit.services.config.acks import AckStore
from cockpit.services.config.sweepfile import LoadedSweep, load_sweep

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "jobs"
SIZE = (120, 36)
SWEEP = """sweep: multinode
instances:
  - {name: node-a, profile: generic-ssh, host: node-a.example, queue: /w/queue.txt,
     queue_log: /w/master.log, run_logs: /w/logs}
  - {name: node-b, profile: generic-ssh, host: node-b.example, queue: /w/queue.txt,
     queue_log: /w/master.log, run_logs: /w/logs}
jobs:
  - name: ddp
    launcher: torchrun
    world_size: 2
    members:
      - {instance: node-a, ranks: [0]}
      - {instance: node-b, ranks: [1]}
"""
LOGS = {"node-a": "gloo_peer_closed_rank0.log", "node-b": "gloo_crash_rank1.log"}


def _snap(name: str, at: float, seq: int, log: bytes, marks: str, alive: bool) -> HostSnapshot:
    na = NA("not probed")
    return HostSnapshot(
        instance=name, observed_at=at, remote_time=at, seq=seq, hostname=name,
        gpu=GpuReading(GpuStatus.ABSENT), mounts=(), memory=Memory("none", na, na, na), tmux=(),
        queue=QueueFacts((4242,) if alive else (), FileStat("/w/master.log", 100, at),
                         (FileStat("/w/logs/ddp.log", len(log), at),), None,
                         queue_text="cfg/ddp.yaml ddp 1\n", queue_marks=marks),
        log_chunks=(LogChunk("/w/logs/ddp.log", 7, 0, log, reset=True),) if log else ())


def replay(now: float) -> AsyncIterator[FleetEvent]:
    """Both boxes connect, start the job, then send their logs as the crash happened."""
    async def events() -> AsyncIterator[FleetEvent]:
        started = "[2026-11-24 12:20:00] [1/1] STARTING ddp (ddp, 1ep)\n"
        finished = "[2026-11-24 12:20:09] [1/1] FINISHED ddp (exit=1)\n"
        for seq, name in enumerate(LOGS, start=1):
            yield HostStateChanged(HostState(name, Reachability.CONNECTED, now - 60))
            yield SnapshotTaken(_snap(name, now - 20, seq, b"", started, True))
        for seq, (name, log) in enumerate(LOGS.items(), start=10):
            yield SnapshotTaken(_snap(name, now - 5, seq, (DATA / log).read_bytes(),
                                      started + finished, False))
        for seq, name in enumerate(LOGS, start=20):
            yield SnapshotTaken(_snap(name, now - 4, seq, b"", started + finished, False))
        await asyncio.Event().wait()  # the boxes stay connected
    return events()


def loaded_sweep(folder: Path) -> LoadedSweep:
    """The two-box sweep with its job group."""
    path = folder / "sweep.yaml"
    path.write_text(SWEEP)
    return load_sweep(path)


async def shoot(out: Path) -> Path:
    """Open the job view on the replayed crash and save it as SVG into the folder `out`
    (which must exist); the path written."""
    import time

    from cockpit.ui.app import CockpitApp
    from cockpit.ui.jobs import JobScreen

    now = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        app = CockpitApp(loaded_sweep(Path(tmp)), source=lambda: replay(now), banners=False,
                         acks=AckStore(Path(tmp) / "acks.json"), clock=lambda: now)
        async with app.run_test(size=SIZE) as pilot:
            deadline = asyncio.get_running_loop().time() + 30
            while app.monitor.job_views.get("ddp") is None or \
                    app.monitor.job_views["ddp"].cause is None:
                app.check_alerts()
                assert asyncio.get_running_loop().time() < deadline, "the job never failed"
                await pilot.pause(0.1)
            await pilot.pause(1.2)  # the fleet's once-a-second tick draws the job row
            app.save_screenshot(str(out / "fleet-job-row-cockpit-dark.svg"))
            await pilot.press("J")
            await pilot.pause(0.3)
            assert isinstance(app.screen, JobScreen)
            path = out / "job-view-cockpit-dark.svg"
            app.save_screenshot(str(path))
    return path


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("screenshots")
    out.mkdir(parents=True, exist_ok=True)
    svg = asyncio.run(shoot(out))
    print(svg)
    if shutil.which("rsvg-convert"):
        png = svg.with_suffix(".png")
        subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True)
        print(png)


if __name__ == "__main__":
    main()
