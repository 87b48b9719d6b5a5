"""A multi-node job is one job (issue 21), against a real 2-node `torch.distributed` run.

Two boxes, each a network namespace with its own sshd (tests/netns.py), joined by a direct
link of their own; on each, a queue runner starts `torchrun --nnodes 2` (gloo on CPU, a tiny
model, a few steps a second) on that link, output into the box's `<cell>.log`. The cockpit
watches both over ssh with the real fleet service and the real monitor:

- rank 1 raises mid-training: the cockpit shows one job, failed, whose cause is rank 1's own
  error on its box, and the other box's lost peer as the symptom; one alert, no cell-failed
  alert per box;
- one rank is frozen (SIGSTOP): the job is shown stalled in a collective while every
  process still lives and before gloo's timeout (120 s) could fire.

Every process started here is killed in a finally (and the namespaces with what ran in them).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cockpit.models.alerts import Alert
from cockpit.models.events import HostStateChanged
from cockpit.models.jobs import JobState, JobView
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import Fleet
from cockpit.services.watch.monitor import Monitor
from tests.netns import NetBox
from tests.sshd import descendants, require

pytestmark = pytest.mark.sshd
TRAIN = Path(__file__).parent / "data" / "jobs" / "train_ddp.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"
RUNNER = """#!/bin/bash
# The queue contract (run_queue.sh): STARTING, the cell, FINISHED with its exit code.
q="$1"; set -- $(head -n 1 "$q"); cfg=$1; name=$(basename "$cfg" .yaml)
echo "[$(date '+%F %T')] [1/1] STARTING $name ($2, $3ep)" >> master.log
"$TORCHRUN" --nnodes 2 --node-rank "$NODE_RANK" --nproc-per-node 1 \\
  --master-addr "$MASTER" --master-port 29500 "$TRAIN" > "logs/$name.log" 2>&1
rc=$?
echo "[$(date '+%F %T')] [1/1] FINISHED $name (exit=$rc)" >> master.log
"""


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


class Pair:
    """Two boxes and a direct link between their namespaces (10.232.N.1 <-> 10.232.N.2)."""

    def __init__(self, root: Path, base: int) -> None:
        self.boxes = [NetBox(root, base), NetBox(root, base + 1)]
        tag = f"{os.getpid() % 10000}{base}"
        self.ifs = [f"ckja{tag}", f"ckjb{tag}"]
        self.addrs = [f"10.232.{base}.1", f"10.232.{base}.2"]
        self.linked = False

    def start(self) -> None:
        for box in self.boxes:
            box.start()
        _ip("link", "add", self.ifs[0], "type", "veth", "peer", "name", self.ifs[1])
        self.linked = True
        for box, name, addr in zip(self.boxes, self.ifs, self.addrs, strict=True):
            _ip("link", "set", name, "netns", box.ns)
            _ip("-n", box.ns, "addr", "add", f"{addr}/24", "dev", name)
            _ip("-n", box.ns, "link", "set", name, "up")

    def stop(self) -> None:
        for box in self.boxes:
            box.stop()  # kills what still runs in its namespace, deletes it and its links
        if self.linked:
            subprocess.run(["ip", "link", "del", self.ifs[0]], check=False, capture_output=True)


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    require(str(TORCHRUN), "torchrun (torch in the venv)")
    made = Pair(tmp_path, 41)
    try:
        made.start()
        yield made
    finally:
        made.stop()


def sweep_for(tmp_path: Path, pair: Pair, stall_after: str) -> Path:
    config = tmp_path / "ssh_config"
    config.write_text("\n".join(b.config_block(f"jb{b.index}") for b in pair.boxes))
    known = tmp_path / "known_hosts"
    known.write_text("".join(b.sshd.known_hosts_line() for b in pair.boxes))
    lines = ["sweep: multinode", "interval: 1s",
             f"ssh: {{config: [{config}], known_hosts: [{known}], keepalive_interval: 1s, "
             f"keepalive_count_max: 3, connect_timeout: 3s}}", "instances:"]
    for box in pair.boxes:
        work = tmp_path / f"work{box.index}"
        (work / "logs").mkdir(parents=True)
        (work / "queue.txt").write_text("cfg/ddp.yaml ddp 1\n")
        (work / "master.log").write_text("")
        (work / "run_queue.sh").write_text(RUNNER)
        lines += [f"  - name: n{box.index}", "    profile: generic-ssh", f"    host: jb{box.index}",
                  f"    queue: {work}/queue.txt", f"    queue_log: {work}/master.log",
                  f"    run_logs: {work}/logs", "    stall_after: 1h"]
    a, b = (f"n{box.index}" for box in pair.boxes)
    lines += ["jobs:", "  - name: ddp", "    launcher: torchrun", "    world_size: 2",
              f"    stall_after: {stall_after}", "    members:",
              f"      - {{instance: {a}, ranks: [0]}}", f"      - {{instance: {b}, ranks: [1]}}"]
    path = tmp_path / "sweep.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def start_runners(pair: Pair, tmp_path: Path, env: dict[str, str]) -> list[subprocess.Popen[bytes]]:
    """Each box's queue runner in its namespace; torchrun's rendezvous on the direct link."""
    out = []
    for rank, (box, ifname) in enumerate(zip(pair.boxes, pair.ifs, strict=True)):
        run_env = {**os.environ, **env, "NODE_RANK": str(rank), "MASTER": pair.addrs[0],
                   "GLOO_SOCKET_IFNAME": ifname, "TORCHRUN": str(TORCHRUN), "TRAIN": str(TRAIN),
                   "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        out.append(subprocess.Popen(["ip", "netns", "exec", box.ns, "bash", "run_queue.sh",
                                     "queue.txt"], cwd=tmp_path / f"work{box.index}", env=run_env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                    start_new_session=True))
    return out


def kill_all(runners: list[subprocess.Popen[bytes]]) -> None:
    for runner in runners:
        doomed = [runner.pid, *descendants(runner.pid)]
        for pid in doomed:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        runner.wait(10)


def rank_workers(runner: int) -> list[int]:
    """The training processes under a runner (torchrun's workers, not torchrun itself)."""
    out = []
    for pid in descendants(runner):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"train_ddp.py" in argv and b"torchrun" not in argv:
                out.append(pid)
    return out


class Watch:
    """The fleet service and the monitor, ticking once a second as the TUI and watch do."""

    def __init__(self, sweep: Path) -> None:
        self.loaded = load_sweep(sweep)
        self.monitor = Monitor(self.loaded, load_rulebook(user=False))
        self.fleet = Fleet(self.loaded.sweep, self.loaded.profiles, self.loaded.directory)
        self.alerts: list[Alert] = []
        self.views: list[JobView] = []
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = 0.0
        async for event in self.fleet.events():
            self.monitor.absorb(event)
            if not isinstance(event, HostStateChanged) and time.monotonic() - last >= 0.5:
                last = time.monotonic()
                self.alerts += self.monitor.tick()
                self.views.append(self.monitor.job_views["ddp"])

    def start(self) -> None:
        self.fleet.start()
        self.task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        await self.fleet.stop()

    async def until(self, what: str, seconds: float, done: Callable[[JobView], bool]) -> JobView:
        deadline = time.monotonic() + seconds
        while True:
            view = self.monitor.job_views.get("ddp")
            if view is not None and done(view):
                return view
            assert self.task is not None and not self.task.done(), "the watcher ended"
            assert time.monotonic() < deadline, f"{what}: last view {view}"
            await asyncio.sleep(0.2)


async def test_a_crashed_rank_is_the_jobs_cause_and_the_other_box_shows_its_symptom(
        pair: Pair, tmp_path: Path) -> None:
    watch = Watch(sweep_for(tmp_path, pair, "1h"))
    runners = start_runners(pair, tmp_path, {"CRASH_RANK": "1", "CRASH_STEP": "8", "GLOO_T": "30",
                                             "STEPS": "200"})
    try:
        watch.start()
        running = await watch.until("both ranks progressing", 45, lambda v: all(
            r.step is not None for r in v.ranks))
        assert running.state in (JobState.RUNNING, JobState.FAILED)
        view = await watch.until("the job failed with a cause", 45, lambda v: v.state is
                                 JobState.FAILED and v.settled and len(v.symptoms) == 1
                                 and all(m.cell == "failed" for m in v.members))
        a, b = (f"n{box.index}" for box in pair.boxes)
        assert view.cause is not None
        assert (view.cause.instance, view.cause.ranks) == (b, (1,))
        assert "ValueError: bad batch at step 8" in view.cause.message
        assert view.symptoms[0].instance == a and "Connection closed by peer" in view.symptoms[0].text
        assert {m.instance: m.role for m in view.members} == {a: "symptom", b: "cause"}
        watch.alerts += watch.monitor.tick()
        failures = [x for x in watch.alerts if x.kind in ("cell-failed", "job-failed")]
        events = {n: [(e.rule_id, e.rank, e.title, e.message) for e in t.failures.events]
                  for n, t in watch.monitor.trackers.items()}
        assert [(x.kind, x.instance) for x in failures] == [("job-failed", b)], (failures, events)
        assert "rank 1 on " + b in failures[0].text
        # Each box alone would have called its cell failed: the job folds both into one.
        assert {j.kind for t in watch.monitor.trackers.values() for j in t.judgements()
                if j.cell == "ddp"} == {"failed"}
    finally:
        await watch.stop()
        kill_all(runners)


async def test_a_frozen_rank_shows_the_job_stalled_before_the_collective_times_out(
        pair: Pair, tmp_path: Path) -> None:
    gloo_timeout = 120.0
    watch = Watch(sweep_for(tmp_path, pair, "6s"))
    runners = start_runners(pair, tmp_path, {"GLOO_T": f"{gloo_timeout:.0f}", "STEPS": "2000"})
    frozen: int | None = None
    try:
        watch.start()
        await watch.until("both ranks progressing", 45, lambda v: all(
            r.step is not None and r.step >= 3 for r in v.ranks))
        workers = rank_workers(runners[1].pid)
        assert len(workers) == 1, workers
        frozen = workers[0]
        os.kill(frozen, signal.SIGSTOP)
        stopped_at = time.monotonic()
        view = await watch.until("the job shown stalled", 60,
                                 lambda v: v.state is JobState.STALLED)
        verdict_after = time.monotonic() - stopped_at
        # Before the collective's timeout: every rank's process still lives, no failure was
        # logged by either box, and no cell has finished (the timeout would end them all).
        assert all(m.alive for m in view.members) and all(m.cell == "running" for m in view.members)
        assert view.cause is None and not view.symptoms
        assert not any(t.failures.events for t in watch.monitor.trackers.values())
        assert view.quiet_s is not None and view.quiet_s < gloo_timeout
        assert "in a collective" in view.text
        watch.alerts += watch.monitor.tick()
        assert [x.kind for x in watch.alerts if x.kind.startswith("job")] == ["job-stalled"]
        print(f"frozen rank: job shown stalled {verdict_after:.1f}s after SIGSTOP "
              f"(gloo timeout {gloo_timeout:.0f}s)")
    finally:
        if frozen is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(frozen, signal.SIGCONT)
        await watch.stop()
        kill_all(runners)
