"""Job groups as one job (issue 21): ranks by box, the root cause across boxes, stalled in a
collective, the job's one alert, the group gate and preflight. The crash logs are a real
2-node gloo run recorded on this machine (tests/data/jobs: train_ddp.py under torchrun, one
box per network namespace, rank 1 raising at step 10)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cockpit.models.events import SnapshotTaken
from cockpit.models.hostview import HostTracker
from cockpit.models.jobs import STALL_RECORDS, JobState, JobTracker, judge_job
from cockpit.models.snapshot import (
    NA,
    FileStat,
    Gpu,
    GpuReading,
    GpuStatus,
    HostSnapshot,
    LogChunk,
    Memory,
    QueueFacts,
)
from cockpit.models.sweep import Sweep
from cockpit.services.config.profiles import load_named
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.config.yamlfile import ConfigError
from cockpit.services.watch.monitor import Monitor

DATA = Path(__file__).parent / "data" / "jobs"
RULES = load_rulebook(user=False)
QUEUE = "cfg/ddp.yaml ddp 1\n"
STARTED = "[2026-11-24 12:20:00] [1/1] STARTING ddp (ddp, 1ep)\n"


def finished(code: int) -> str:
    return f"[2026-11-24 12:20:09] [1/1] FINISHED ddp (exit={code})\n"


def sweep_text(ranks: dict[str, list[int]], world: int, extra: str = "") -> str:
    lines = ["sweep: mn", "instances:"]
    for name in ranks:
        lines += [f"  - name: {name}", "    profile: generic-ssh", f"    host: {name}.example",
                  f"    queue: /w/{name}/queue.txt", f"    queue_log: /w/{name}/master.log",
                  f"    run_logs: /w/{name}/logs"]
    lines += ["jobs:", "  - name: ddp", f"    world_size: {world}", "    stall_after: 30s",
              "    members:"]
    lines += [f"      - {{instance: {name}, ranks: {r}}}" for name, r in ranks.items()]
    return "\n".join(lines) + "\n" + extra


def load(tmp_path: Path, text: str) -> Sweep:
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    return load_sweep(path).sweep


class Fleet:
    """Trackers of a sweep's boxes and its one job, fed hand-made probe records."""

    def __init__(self, sweep: Sweep, monitor: Monitor | None = None) -> None:
        profile = load_named("generic-ssh")
        self.monitor = monitor
        if monitor is not None:
            self.trackers, self.job = monitor.trackers, monitor.jobs[sweep.jobs[0].name]
        else:
            self.trackers = {i.name: HostTracker(i, profile, RULES) for i in sweep.instances}
            self.job = JobTracker(sweep.jobs[0])
        self.offsets: dict[str, int] = {}
        self.seq = 0

    def record(self, name: str, at: float, *, log: bytes = b"", marks: str | None = None,
               alive: bool = True, mtime: float | None = None, util: float | None = None) -> None:
        self.seq += 1
        path = f"/w/{name}/logs/ddp.log"
        offset = self.offsets.get(name, 0)
        chunks = (LogChunk(path, 7, offset, log, reset=offset == 0),) if log else ()
        self.offsets[name] = offset + len(log)
        na = NA("not probed")
        gpus = () if util is None else (Gpu(0, "NVIDIA H100", "GPU-0", util, 9000.0, 80000.0, 60.0,
                                            300.0, 700.0, 1900.0, 1980.0),)
        snap = HostSnapshot(
            instance=name, observed_at=at, remote_time=at, seq=self.seq, hostname=name,
            gpu=GpuReading(GpuStatus.OK if gpus else GpuStatus.ABSENT, gpus),
            mounts=(), memory=Memory("none", na, na, na), tmux=(),
            queue=QueueFacts((4242,) if alive else (),
                             FileStat(f"/w/{name}/master.log", 100, at),
                             (FileStat(path, self.offsets[name], mtime if mtime is not None else at),),
                             None, queue_text=QUEUE if self.seq <= 2 else None,
                             queue_marks=marks),
            log_chunks=chunks)
        if self.monitor is not None:
            assert self.monitor.absorb(SnapshotTaken(snap)) == name
            return
        self.trackers[name].absorb(snap)
        self.job.absorb(snap)

    def view(self, now: float):  # type: ignore[no-untyped-def]
        return judge_job(self.job, self.trackers, now)


def test_the_crashed_rank_is_the_cause_and_the_peer_loss_its_symptom(tmp_path: Path) -> None:
    crash = (DATA / "gloo_crash_rank1.log").read_bytes()
    peer = (DATA / "gloo_peer_closed_rank0.log").read_bytes()
    for order in (("a", "b"), ("b", "a")):  # whichever box's record arrives first
        fleet = Fleet(load(tmp_path, sweep_text({"a": [0], "b": [1]}, 2)))
        fleet.record("a", 100.0, marks=STARTED)
        fleet.record("b", 100.0, marks=STARTED)
        logs = {"a": peer, "b": crash}
        for name in order:
            fleet.record(name, 110.0, log=logs[name], marks=finished(1), alive=False)
        view = fleet.view(111.0)
        assert view.state is JobState.FAILED
        assert view.cause is not None and view.cause.instance == "b" and view.cause.ranks == (1,)
        assert "ValueError: bad batch at step 10" in view.cause.message
        assert [s.instance for s in view.symptoms] == ["a"]
        assert "Connection closed by peer" in view.symptoms[0].text
        assert view.text.startswith("failed: rank 1 on b")
        roles = {m.instance: m.role for m in view.members}
        assert roles == {"a": "symptom", "b": "cause"}
        # Both ranks' progress was read from their own box's log, 10 steps each.
        assert [(r.rank, r.instance, r.step, r.steps) for r in view.ranks] == [
            (0, "a", 10, 40), (1, "b", 10, 40)]
        assert fleet.job.ranks[1].exit_code == 1 and fleet.job.ranks[1].failed_clock


def progress(rank: int, step: int, tag: str = "") -> bytes:
    return f"{tag}rank {rank} step {step}/40 loss 0.1\n".encode()


def test_stalled_in_a_collective_needs_quiet_from_every_box_over_several_records(
        tmp_path: Path) -> None:
    fleet = Fleet(load(tmp_path, sweep_text({"a": [0], "b": [1]}, 2)))
    for name, rank in (("a", 0), ("b", 1)):
        fleet.record(name, 100.0, marks=STARTED, log=progress(rank, 5), util=99.0)
    assert fleet.view(100.0).state is JobState.RUNNING
    # Quiet, but only two records from each box: a slow step, not yet evidence.
    for at in (140.0, 141.0):
        for name in ("a", "b"):
            fleet.record(name, at, mtime=100.0, util=99.0)
    assert fleet.view(141.0).state is JobState.RUNNING
    for at in range(142, 142 + STALL_RECORDS):
        for name in ("a", "b"):
            fleet.record(name, float(at), mtime=100.0, util=99.0)
    view = fleet.view(145.0)
    assert view.state is JobState.STALLED, view.text
    assert view.text.startswith("stalled 45s in a collective")
    assert "D19" in view.detail and "step 5" in view.detail  # GPUs busy, nothing progresses
    assert view.cause is None and not view.symptoms
    # One rank moving again ends the stall.
    fleet.record("a", 146.0, log=progress(0, 6))
    assert fleet.view(146.0).state is JobState.RUNNING


def test_a_dead_process_is_not_a_stall(tmp_path: Path) -> None:
    fleet = Fleet(load(tmp_path, sweep_text({"a": [0], "b": [1]}, 2)))
    for name, rank in (("a", 0), ("b", 1)):
        fleet.record(name, 100.0, marks=STARTED, log=progress(rank, 5))
    for at in range(140, 146):
        fleet.record("a", float(at))
        fleet.record("b", float(at), alive=False)
    view = fleet.view(146.0)
    assert view.state is not JobState.STALLED


def test_a_rank_killed_without_a_word_is_the_cause_and_the_peer_waits(tmp_path: Path) -> None:
    fleet = Fleet(load(tmp_path, sweep_text({"a": [0], "b": [1]}, 2)))
    for name, rank in (("a", 0), ("b", 1)):
        fleet.record(name, 100.0, marks=STARTED, log=progress(rank, 5))
    fleet.record("b", 101.0, marks=finished(137), alive=False)  # SIGKILL: no traceback
    fleet.record("a", 101.0)
    # The exit code came before any log line could: one more record from b decides.
    assert not fleet.view(101.5).settled
    fleet.record("b", 102.0, alive=False)
    view = fleet.view(102.0)
    assert view.state is JobState.FAILED
    assert view.cause is not None and view.cause.instance == "b"
    assert [s.instance for s in view.symptoms] == ["a"]


def test_rank_tags_map_to_global_ranks_on_a_box_with_several(tmp_path: Path) -> None:
    fleet = Fleet(load(tmp_path, sweep_text({"a": [0, 1], "b": [2, 3]}, 4)))
    fleet.record("b", 100.0, marks=STARTED,
                 log=progress(2, 7, "[default0]:") + progress(3, 9, "[rank3]:") + b"[rank1]: x 1/2\n")
    fleet.record("a", 100.0, marks=STARTED, log=b"step 4/40\n")  # untagged: every rank of a
    steps = {r.rank: r.step for r in fleet.view(100.0).ranks}
    assert steps == {0: 4, 1: 4, 2: 7, 3: 9}  # [rank1] printed on b is not b's rank: ignored


def test_a_stale_member_makes_the_job_unknown_not_failed(tmp_path: Path) -> None:
    import dataclasses

    from cockpit.models.snapshot import Reachability

    fleet = Fleet(load(tmp_path, sweep_text({"a": [0], "b": [1]}, 2)))
    for name, rank in (("a", 0), ("b", 1)):
        fleet.record(name, 100.0, marks=STARTED, log=progress(rank, 5))
    tracker = fleet.trackers["b"]
    tracker.absorb_state(dataclasses.replace(tracker.state, reachability=Reachability.STALE))
    view = fleet.view(500.0)
    assert view.state is JobState.UNKNOWN and "b" in view.text


@pytest.mark.parametrize(("ranks", "world", "error"), [
    ({"a": [0], "b": [0]}, 2, "rank(s) on more than one box: 0"),
    ({"a": [0], "b": [2]}, 2, "missing [1]"),
    ({"a": [0], "zz": [1]}, 2, None),
])
def test_the_jobs_block_is_validated(tmp_path: Path, ranks: dict[str, list[int]], world: int,
                                     error: str | None) -> None:
    text = sweep_text(ranks, world)
    if error is None:  # a member that is no instance
        text = text.replace("{instance: zz", "{instance: nosuch")
        error = "no instance called nosuch"
    with pytest.raises(ConfigError, match=re.escape(error)):
        load(tmp_path, text)


def test_the_monitor_raises_one_alert_for_the_job_naming_the_cause_and_its_box(
        tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(sweep_text({"a": [0], "b": [1]}, 2))
    loaded = load_sweep(path)
    monitor = Monitor(loaded, RULES, clock=lambda: 0.0)
    fleet = Fleet(loaded.sweep, monitor)
    fleet.record("a", 100.0, marks=STARTED)
    fleet.record("b", 100.0, marks=STARTED)
    assert monitor.tick(100.0) == []
    fleet.record("a", 110.0, log=(DATA / "gloo_peer_closed_rank0.log").read_bytes(),
                 marks=finished(1), alive=False)
    # The peer's reaction arrived first: the job waits for the cause rather than alert now.
    assert [a.kind for a in monitor.tick(110.5)] == ["queue-done"]
    assert not monitor.job_views["ddp"].settled
    assert monitor.job_views["ddp"].text == "failing: waiting for the cause"
    fleet.record("b", 111.0, log=(DATA / "gloo_crash_rank1.log").read_bytes(),
                 marks=finished(1), alive=False)
    # Each box alone would raise its own cell-failed alert; the job folds them into one.
    from cockpit.models.alerts import material
    assert {a.kind for t in monitor.trackers.values() for a in material(t, 111.0)} == {
        "cell-failed", "queue-done"}
    fresh = monitor.tick(111.0)
    failed = [a for a in fresh if a.kind in ("cell-failed", "job-failed")]
    assert [(a.kind, a.instance) for a in failed] == [("job-failed", "b")]
    assert "rank 1 on b" in failed[0].text and "bad batch" in failed[0].detail
    assert "a:" in failed[0].detail  # the symptom on the other box is named as such
    assert monitor.job_views["ddp"].state is JobState.FAILED
    assert [a for a in monitor.tick(112.0) if a.kind == "job-failed"] == []  # once per episode


def test_only_symptoms_are_reported_once_the_wait_for_a_cause_is_over(tmp_path: Path) -> None:
    from cockpit.models.alerts import job_alerts
    from cockpit.models.jobs import SETTLE_S

    fleet = Fleet(load(tmp_path, sweep_text({"a": [0], "b": [1]}, 2)))
    for name in ("a", "b"):
        fleet.record(name, 100.0, marks=STARTED)
    fleet.record("a", 110.0, log=(DATA / "gloo_peer_closed_rank0.log").read_bytes(),
                 marks=finished(1), alive=False)
    fleet.record("b", 110.0)  # alive, says nothing
    assert job_alerts(fleet.view(111.0)) == []
    late = fleet.view(110.0 + SETTLE_S)
    assert late.settled and late.text == "failed: only symptoms seen" and late.cause is None
    assert [a.kind for a in job_alerts(late)] == ["job-failed"]


def test_no_box_of_a_job_is_torn_down_before_every_member_is_n_of_n() -> None:
    from cockpit.models.custody import CellStatus, CellVerdict, Verification
    from cockpit.models.gate import Gate, GateError, link_group, render_step
    from cockpit.models.profile import TeardownAction
    from cockpit.models.sweep import Instance

    destroy = TeardownAction(id="destroy", label="Destroy", stops_meter="yes", reversible=False,
                             command="vastai destroy instance {instance_id}")
    gates = {name: Gate(name) for name in ("a", "b")}
    link_group("ddp", list(gates.values()))
    for name in ("a", "b"):
        ok = Verification(name, "d" * 64, (CellVerdict("ddp", CellStatus.OK),), 15, 0.0)
        if name == "a":
            gates[name].verified(ok)
    step = render_step(Instance(name="a", profile="vastai", host="h", instance_id="1"), destroy)
    allowed, why = gates["a"].can_approve(step)
    assert not allowed and "job ddp" in why and "b not N/N" in why
    with pytest.raises(GateError, match="b not N/N"):
        gates["a"].approve(step, "a")
    gates["b"].verified(Verification("b", "e" * 64, (CellVerdict("ddp", CellStatus.OK),), 15, 0.0))
    assert gates["a"].can_approve(step) == (True, "")


async def test_the_job_view_shows_the_cause_its_box_and_the_symptom(tmp_path: Path) -> None:
    from bench.job_view_screenshot import shoot

    svg = (await shoot(tmp_path)).read_text()
    for shown in ("failed: rank 1 on node-b", "ValueError: bad batch at step 10", "symptom",
                  "Connection closed by peer", "step 10/40"):
        assert shown.replace(" ", "&#160;") in svg or shown in svg, shown


def test_group_preflight_checks_gpus_driver_fabric_manager_interface_and_mtu() -> None:
    import dataclasses

    from cockpit.models.preflight import Level, PreflightFacts, group_report, parse_interfaces
    from cockpit.models.snapshot import Gpu

    ifaces = parse_interfaces((DATA / "ip_o_link_addr.txt").read_text())
    eth0 = next(i for i in ifaces if i.name == "eth0")
    assert eth0.mtu == 1400 and "192.0.2.2" in eth0.addrs and eth0.up
    assert next(i for i in ifaces if i.name == "lo").addrs[0] == "127.0.0.1"

    def snap(model: str, count: int) -> HostSnapshot:
        na = NA("not probed")
        gpus = tuple(Gpu(i, model, f"GPU-{i}", 0.0, 0.0, 80000.0, 40.0, 60.0, 700.0, 1980.0,
                         1980.0) for i in range(count))
        return HostSnapshot("x", 0.0, 0.0, 1, "x", GpuReading(GpuStatus.OK, gpus), (),
                            Memory("none", na, na, na), (), QueueFacts((), None, (), None))

    good = PreflightFacts("550.54", "12.4", (), nvswitch=True, fabric_manager="active",
                          interfaces=ifaces)
    report = group_report("ddp", {"a": (8, snap("NVIDIA H100", 8), good),
                                  "b": (8, snap("NVIDIA H100", 8), good)})
    assert report.level is Level.PASS, report.checks
    assert {c.name for c in report.checks} >= {"gpu model", "driver", "mtu", "nccl interface (a)"}
    jumbo = tuple(dataclasses.replace(i, mtu=9000) if i.name == "eth0" else i for i in ifaces)
    bad = dataclasses.replace(good, cuda="11.8", fabric_manager="inactive", interfaces=jumbo)
    report = group_report("ddp", {"a": (8, snap("NVIDIA H100", 8), good),
                                  "b": (8, snap("NVIDIA A100", 4), bad)})
    failed = {c.name: c.reason for c in report.checks if c.level is Level.FAIL}
    assert set(failed) == {"gpus (b)", "gpu model", "cuda", "fabric manager (b)", "mtu"}
    assert "MN1" in failed["fabric manager (b)"] and "MN4" in failed["mtu"]
    assert "ping -M do -s 8972" in failed["mtu"]
    # NCCL told to use an interface a box does not have: that box fails with the fix.
    wrong = dataclasses.replace(good, nccl_ifname="ib0")
    report = group_report("ddp", {"a": (8, None, good), "b": (8, None, wrong)})
    assert [(c.name, c.level) for c in report.checks if c.level is not Level.PASS] == [
        ("nccl interface (b)", Level.FAIL)]


def test_discover_proposes_a_job_group_from_a_shared_rendezvous(tmp_path: Path) -> None:
    from cockpit.services.queue.discover import FoundQueue, rendezvous, sweep_document

    def torchrun(node: int) -> list[str]:  # the argv tests/test_jobs_netns.py's runner starts
        return ["/work/.venv/bin/python", "/work/.venv/bin/torchrun", "--nnodes", "2",
                "--node-rank", str(node), "--nproc-per-node", "4", "--master-addr", "10.232.41.1",
                "--master-port", "29500", "train_ddp.py", "--lr", "0.1"]

    seen = [rendezvous(torchrun(n)) for n in (0, 1)]
    assert seen[0] is not None and seen[0].endpoint == "10.232.41.1:29500"
    assert seen[1] is not None and seen[1].ranks == (4, 5, 6, 7)
    assert rendezvous(["python", "train.py", "--master-addr", "x"]) is None  # no launcher
    ds = rendezvous(["deepspeed", "--hostfile=/job/hostfile", "--num_gpus", "8", "train.py"])
    assert ds is not None and (ds.launcher, ds.endpoint) == ("deepspeed", "hostfile /job/hostfile")
    acc = rendezvous(["accelerate", "launch", "--config_file", "/c.yaml", "--machine_rank", "1",
                      "t.py"])
    assert acc is not None and acc.launcher == "accelerate" and acc.node_rank == 1

    def found(node: int) -> FoundQueue:
        return FoundQueue(f"/w/q{node}.txt", 1, f"/w/m{node}.log", "/w/logs", None, 100 + node,
                          rendezvous=seen[node])

    text = sweep_document("mn", [("node-a", "generic-ssh", [found(0)]),
                                 ("node-b", "generic-ssh", [found(1)])])
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    sweep = load_sweep(path).sweep  # loadable as printed, with the job group
    assert [(m.instance, m.ranks) for m in sweep.jobs[0].members] == [
        ("node-a", (0, 1, 2, 3)), ("node-b", (4, 5, 6, 7))]
    assert sweep.jobs[0].world_size == 8 and sweep.jobs[0].launcher == "torchrun"


def test_a_restarted_job_log_starts_its_boxes_ranks_over(tmp_path: Path) -> None:
    fleet = Fleet(load(tmp_path, sweep_text({"a": [0], "b": [1]}, 2)))
    fleet.record("b", 100.0, marks=STARTED, log=(DATA / "gloo_crash_rank1.log").read_bytes())
    assert fleet.job.ranks[1].exit_code == 1 and fleet.job.ranks[1].step == 10
    fleet.offsets["b"] = 0  # the log truncated: a re-run (or torchrun restarting from step 0)
    fleet.record("b", 200.0, log=progress(1, 2))
    rank = fleet.job.ranks[1]
    assert (rank.exit_code, rank.failed_clock, rank.step) == (None, "", 2)
