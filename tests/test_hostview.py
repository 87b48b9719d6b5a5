"""cockpit.models.hostview: series, trends, danger clocks and the HostTracker fed snapshots."""

from __future__ import annotations

import calendar
import time

import pytest

from cockpit.models.durations import parse_duration
from cockpit.models.health import PRESSURE_PCT
from cockpit.models.hostview import (
    ClockCountdown,
    HostTracker,
    Series,
    running_clocks,
    time_to_full,
)
from cockpit.models.profile import DangerClock, Profile
from cockpit.models.queue import CellState
from cockpit.models.snapshot import (
    NA,
    FileStat,
    Gpu,
    GpuReading,
    GpuStatus,
    HostSnapshot,
    LogChunk,
    Memory,
    Mount,
    QueueFacts,
)
from cockpit.models.sweep import Instance, moment_epoch
from cockpit.services.config.profiles import load_named
from cockpit.services.config.rulebook import load_rulebook

RULEBOOK = load_rulebook(user=False)

DAY = 86400.0
OFFSET = 28800.0  # the box's clock runs at +0800
MASTER = "/q/master.log"
LOGS = "/q/logs"
CLOCK_START = "2026-11-12 10:00"
RULE = "=" * 70
NO_CLOCK = NA("no header")


def remote(hms: str) -> float:
    """Epoch seconds of a `2026-11-21 HH:MM:SS` stamp on the box (+0800)."""
    return calendar.timegm(time.strptime(f"2026-11-21 {hms}", "%Y-%m-%d %H:%M:%S")) - OFFSET


def ts(hms: str) -> str:
    return f"[2026-11-21 {hms}]"


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_named("autodl")


def instance(**extra: object) -> Instance:
    fields: dict[str, object] = {
        "name": "a1", "profile": "autodl", "host": "h", "queue": "/q/queue_1.txt",
        "queue_log": MASTER, "run_logs": LOGS, "clocks_started": {"auto_release": CLOCK_START},
    }
    fields.update(extra)
    return Instance(**fields)  # type: ignore[arg-type]


def mount(path: str = "/root/autodl-tmp", *, used: int = 30, avail: int = 70, iused: int = 10,
          iavail: int = 90) -> Mount:
    return Mount(path, "/root/autodl-tmp", "ext4", used + avail, used, avail, iused + iavail, iused, iavail)


def missing_mount(path: str) -> Mount:
    na = NA("/nope: No such file or directory")
    return Mount(path, na, na, na, na, na, na, na, na, error=na.reason)


def gpu(util: float | NA, used: float = 1000.0) -> Gpu:
    na = NA("[N/A]")
    return Gpu(0, "NVIDIA A100", "GPU-1", util, used, 4000.0, 50.0, na, na, na, na)


def chunk(path: str, data: str, *, reset: bool = False) -> LogChunk:
    return LogChunk(path, 7, 0, data.encode(), reset)


def snapshot(
    *,
    observed_at: float = 0.0,
    remote_time: float | NA = NO_CLOCK,
    queue_text: str | None = None,
    marks: str | None = None,
    chunks: tuple[LogChunk, ...] = (),
    pids: tuple[int, ...] | NA = (4242,),
    mounts: tuple[Mount, ...] = (),
    memory: Memory | None = None,
    gpus: tuple[Gpu, ...] = (),
    run_logs: tuple[FileStat, ...] = (),
    queue_log: FileStat | None = None,
    checkpoint: FileStat | None = None,
) -> HostSnapshot:
    na = NA("not probed")
    return HostSnapshot(
        instance="a1",
        observed_at=observed_at,
        remote_time=remote_time,
        seq=1,
        hostname="demo-a1",
        gpu=GpuReading(GpuStatus.OK, gpus),
        mounts=mounts,
        memory=memory or Memory("none", na, na, na),
        tmux=(),
        queue=QueueFacts(pids, queue_log, run_logs, checkpoint, queue_text=queue_text,
                         queue_marks=marks),
        log_chunks=chunks,
        utc_offset=OFFSET,
    )


# --------------------------------------------------------------------------- Series


def test_series_skips_na_values() -> None:
    s = Series()
    s.add(1.0, NA("[N/A]"))
    assert s.last is None
    assert s.first is None
    assert s.session_delta() is None
    s.add(2.0, 10)
    s.add(3.0, NA("[N/A]"))
    s.add(4.0, 25.5)
    assert s.values() == [10.0, 25.5]
    assert s.last == 25.5
    assert s.session_delta() == 15.5


def test_series_session_delta_survives_the_bounded_history() -> None:
    s = Series(maxlen=3)
    for i, v in enumerate([100.0, 110.0, 120.0, 130.0, 140.0]):
        s.add(float(i), v)
    assert s.values() == [120.0, 130.0, 140.0]
    assert s.first == (0.0, 100.0)
    assert s.session_delta() == 40.0


def test_series_slope_needs_three_points() -> None:
    s = Series()
    assert s.slope() is None
    s.add(0.0, 0.0)
    s.add(10.0, 20.0)
    assert s.slope() is None
    s.add(20.0, 40.0)
    assert s.slope() == pytest.approx(2.0)


def test_series_slope_is_least_squares() -> None:
    s = Series()
    for t, v in [(0.0, 1.0), (1.0, 3.0), (2.0, 2.0), (3.0, 5.0)]:
        s.add(t, v)
    # Least squares over (0,1) (1,3) (2,2) (3,5): slope = 5.5 / 5 = 1.1.
    assert s.slope() == pytest.approx(1.1)


def test_series_slope_uses_only_the_window() -> None:
    s = Series()
    s.add(0.0, 1_000_000.0)  # old point far off the line: outside a 600 s window
    for t in (1000.0, 1010.0, 1020.0, 1030.0):
        s.add(t, t)
    assert s.slope(window_s=600.0) == pytest.approx(1.0)
    assert s.slope(window_s=2000.0) is not None
    assert s.slope(window_s=2000.0) != pytest.approx(1.0)
    assert s.slope(window_s=15.0) is None  # only two points inside


def test_series_slope_of_points_at_one_instant_is_none() -> None:
    s = Series()
    for v in (1.0, 2.0, 3.0):
        s.add(5.0, v)
    assert s.slope() is None


def test_time_to_full() -> None:
    assert time_to_full(10.0, 1000) == 100.0
    assert time_to_full(None, 1000) is None
    assert time_to_full(0.0, 1000) is None
    assert time_to_full(-5.0, 1000) is None  # shrinking: never full
    assert time_to_full(10.0, NA("not reported")) is None


# --------------------------------------------------------------------------- danger clocks


def test_running_clocks_from_the_sweep(profile: Profile) -> None:
    (clock,) = running_clocks(instance(), profile)
    assert clock.clock.id == "auto_release"
    assert clock.instance == "a1"
    assert clock.started_at == moment_epoch(CLOCK_START)
    assert clock.ends_at - clock.started_at == parse_duration("15d")


def test_running_clocks_need_a_start_and_a_length(profile: Profile) -> None:
    assert running_clocks(instance(clocks_started={}), profile) == []
    assert running_clocks(instance(clocks_started={"no_such_clock": CLOCK_START}), profile) == []
    open_ended = DangerClock(id="auto_release", name="x", starts="s", destroys="d")
    changed = profile.model_copy(update={
        "danger_clocks": profile.danger_clocks.model_copy(update={"clocks": (open_ended,)})})
    assert running_clocks(instance(), changed) == []


def test_clock_countdown_text(profile: Profile) -> None:
    (clock,) = running_clocks(instance(), profile)
    start = clock.started_at
    assert clock.text(start + 9 * DAY) == "6d left"
    assert clock.text(start + 9 * DAY + 3 * 3600) == "5d21h left"
    assert clock.text(start + 15 * DAY - 90) == "1m30s left"
    assert clock.text(start + 15 * DAY) == "EXPIRED 0s ago"
    assert clock.text(start + 17 * DAY + 3600) == "EXPIRED 2d1h ago"


def test_clock_countdown_text_is_standalone() -> None:
    clock = DangerClock(id="c", name="n", duration="1h", starts="s", destroys="d")
    countdown = ClockCountdown("b", clock, 1000.0, 4600.0)
    assert countdown.text(1000.0) == "1h left"
    assert countdown.text(4600.0 + 7200.0).startswith("EXPIRED 2h")


# --------------------------------------------------------------------------- HostTracker: the queue

QUEUE_TEXT = (
    "# sweep queue 1\n"
    "configs/baseline.yaml reconstruction 6\n"
    "\n"
    "configs/det_baseline.yaml detection 6\n"
    "configs/aug_strong.yaml reconstruction 10\n"
)

MARKS = "\n".join([
    "=== Queue /q/queue_1.txt: 3 ablations, starting from 1 on demo-a1 ===",
    f"{ts('10:00:00')} [1/3] STARTING baseline (reconstruction, 6ep)",
    f"{ts('10:10:00')} [1/3] FINISHED baseline (exit=0)",
    f"{ts('10:10:00')} [2/3] STARTING det_baseline (detection, 6ep)",
]) + "\n"

# The 64 KiB tail of the master log: starts mid-line, overlaps the marks, ends mid-line.
MASTER_TAIL_1 = (
    "ing from 1 on demo-a1 ===\n"
    f"{RULE}\n{ts('10:00:00')} [1/3] STARTING baseline (reconstruction, 6ep)\n{RULE}\n"
    "Epoch 6/6 | step 60 | loss 0.1\n"
    f"{ts('10:10:00')} [1/3] FINISHED baseline (exit=0)\n"
    f"{RULE}\n{ts('10:10:00')} [2/3] STARTING det_baseline (detection, 6ep)\n{RULE}\n"
    f"{ts('10:16:00')} [2/3] FINI"
)
MASTER_TAIL_2 = (
    "SHED det_baseline (exit=1)\n"
    f"{RULE}\n{ts('10:16:01')} [3/3] STARTING aug_strong (reconstruction, 10ep)\n{RULE}\n"
)


def two_snapshots() -> tuple[HostSnapshot, HostSnapshot]:
    first = snapshot(
        observed_at=1.0,
        remote_time=remote("10:15:00"),
        queue_text=QUEUE_TEXT,
        marks=MARKS,
        chunks=(
            chunk(MASTER, MASTER_TAIL_1, reset=True),
            chunk(f"{LOGS}/baseline.log",
                  "".join(f"Epoch {k}/6 | step {10 * k} | loss 0.{9 - k}\n" for k in range(1, 7))
                  + "Training completed\n", reset=True),
            chunk(f"{LOGS}/det_baseline.log", "Epoch 1/6 | step 10 | loss 0.9\nEpoch 2/6 | step 20 | lo",
                  reset=True),
        ),
    )
    second = snapshot(
        observed_at=2.0,
        remote_time=remote("10:20:01"),
        chunks=(
            chunk(MASTER, MASTER_TAIL_2),
            chunk(f"{LOGS}/det_baseline.log",
                  "ss 0.8\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"),
            chunk(f"{LOGS}/aug_strong.log",
                  "Epoch 1/10 | step 5 | loss 1.2\nEpoch 2/10 | step 10 | loss 1.1\n", reset=True),
        ),
    )
    return first, second


def test_tracker_follows_the_queue_across_snapshots(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    first, second = two_snapshots()

    tracker.absorb(first)
    assert tracker.version == 1
    assert [c.name for c in tracker.queue_lines] == ["baseline", "det_baseline", "aug_strong"]
    view = tracker.queue_view()
    assert [(c.name, c.state_text) for c in view.cells] == [
        ("baseline", "finished ok"), ("det_baseline", "running"), ("aug_strong", "pending")]
    # The half line "Epoch 2/6 | lo" is held back until it is complete.
    assert (tracker.progress["det_baseline"].epoch, tracker.progress["det_baseline"].epochs) == (1, 6)
    assert tracker.progress["baseline"].completed
    assert view.summary == "1/3 det_baseline"
    assert view.start_index == 2
    assert view.cells[0].elapsed_s == 600.0
    # det_baseline: 300 s for 1 epoch; baseline: 600 s / 6 epochs.
    assert view.running is not None and view.running.eta_s == pytest.approx(5 * 300.0)
    assert tracker.failures.events == []

    tracker.absorb(second)
    assert tracker.version == 2
    assert (tracker.progress["det_baseline"].epoch, tracker.progress["det_baseline"].epochs) == (2, 6)
    assert not tracker.progress["det_baseline"].completed
    view = tracker.queue_view()
    assert [(c.name, c.state_text) for c in view.cells] == [
        ("baseline", "finished ok"), ("det_baseline", "failed exit=1"), ("aug_strong", "running")]
    assert view.summary == "2/3 aug_strong"
    assert view.start_index == 3
    run = view.running
    assert run is not None and (run.epoch, run.epochs) == (2, 10)
    # aug_strong started 10:16:01, now 10:20:01: 240 s for 2 epochs, 8 to go.
    assert run.elapsed_s == 240.0
    assert run.eta_s == pytest.approx(8 * 120.0)

    # The OOM in det_baseline's own log and its FINISHED exit=1 are one event: the cause.
    (oom,) = tracker.failures.events
    assert (oom.rule_id, oom.klass, oom.cell, oom.exit_code) == ("M2", "real-bug", "det_baseline", 1)
    assert oom.message == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert oom.first_at == 2.0  # when the cockpit saw it
    assert oom.count == 1


def test_tracker_reports_a_finish_in_both_marks_and_tail_once(profile: Profile) -> None:
    lines = [
        "=== Queue /q/queue_1.txt: 2 ablations, starting from 1 on demo-a1 ===",
        f"{ts('10:00:00')} [1/2] STARTING baseline (reconstruction, 6ep)",
        f"{ts('10:00:09')} [1/2] FINISHED baseline (exit=3)",
        f"{ts('10:00:09')} [2/2] STARTING det_baseline (detection, 6ep)",
    ]
    tracker = HostTracker(instance(), profile, RULEBOOK)
    tracker.absorb(snapshot(queue_text="baseline.yaml r 6\ndet_baseline.yaml d 6\n",
                            marks="\n".join(lines) + "\n",
                            chunks=(chunk(MASTER, "\n".join(lines[1:]) + "\n", reset=True),)))
    (event,) = tracker.failures.events  # exit 3 from a runner not known to be ours: unclassified
    assert (event.rule_id, event.klass, event.cell, event.count) == (
        "", "unclassified", "baseline", 1)
    # The same lines again later (a rotation re-read) still add nothing.
    tracker.absorb(snapshot(chunks=(chunk(MASTER, "\n".join(lines) + "\n", reset=True),)))
    assert tracker.failures.events[0].count == 1
    assert tracker.queue_view().summary == "1/2 det_baseline"


def test_tracker_queue_text_is_kept_until_it_changes(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    tracker.absorb(snapshot(queue_text="a.yaml t 3\nb.yaml t 3\n"))
    tracker.absorb(snapshot())  # unchanged queue file: not resent
    assert [c.name for c in tracker.queue_lines] == ["a", "b"]
    tracker.absorb(snapshot(queue_text="a.yaml t 3\nb.yaml t 3\nc.yaml t 3\n"))
    assert [c.name for c in tracker.queue_lines] == ["a", "b", "c"]


def test_tracker_alive_and_interrupted(profile: Profile) -> None:
    marks = (f"{ts('10:00:00')} [1/2] STARTING a (t, 3ep)\n")
    tracker = HostTracker(instance(), profile, RULEBOOK)
    assert tracker.alive is None
    tracker.absorb(snapshot(queue_text="a.yaml t 3\nb.yaml t 3\n", marks=marks, pids=NA("no ps"),
                            remote_time=remote("10:01:00")))
    assert tracker.alive is None
    assert tracker.queue_view().cells[0].state is CellState.RUNNING
    tracker.absorb(snapshot(pids=(), remote_time=remote("10:02:00")))
    assert tracker.alive is False
    view = tracker.queue_view()
    assert view.cells[0].state is CellState.INTERRUPTED
    assert view.summary == "0/2"
    tracker.absorb(snapshot(pids=(99,), remote_time=remote("10:03:00")))
    assert tracker.alive is True
    assert tracker.queue_view().cells[0].elapsed_s == 180.0


def test_tracker_run_log_failures_go_to_their_own_cell(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    tracker.absorb(snapshot(observed_at=5.0, chunks=(
        chunk(f"{LOGS}/det_aug.log", "OSError: [Errno 28] No space left on device\n"),
        chunk(f"{LOGS}/baseline.log", "Epoch 3/20 | step 40 | loss is nan\nKilled\n"),
    )))
    assert [(e.rule_id, e.klass, e.cell) for e in tracker.failures.events] == [
        ("U7", "disk-full", "det_aug"), ("O13", "real-bug", "baseline"),
        ("U9", "host-oom", "baseline")]
    assert tracker.progress["baseline"].epoch == 3


def test_tracker_log_reset_drops_a_stale_partial_line(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    path = f"{LOGS}/a.log"
    tracker.absorb(snapshot(chunks=(chunk(path, "Epoch 1/5\nEpoch 2/5 | torch.OutOfMem"),)))
    # The file was replaced: the held "Epoch 2/5 | torch.OutOfMem" must not join the new text.
    tracker.absorb(snapshot(chunks=(chunk(path, "oryError in a new file\n", reset=True),)))
    assert tracker.failures.events == []
    assert tracker.progress["a"].epoch == 0, "a replaced log (re-run cell) starts its epochs again"


def test_tracker_keeps_a_utf8_character_split_between_chunks(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    line = "torch.OutOfMemoryError: CUDA out of memory (显存不足)\n".encode()
    cut = line.index("存".encode()) + 1  # inside the 3-byte character
    path = f"{LOGS}/a.log"
    tracker.absorb(snapshot(chunks=(LogChunk(path, 7, 0, line[:cut]),)))
    tracker.absorb(snapshot(chunks=(LogChunk(path, 7, cut, line[cut:]),)))
    (event,) = tracker.failures.events
    assert event.message == "torch.OutOfMemoryError: CUDA out of memory (显存不足)"


# --------------------------------------------------------------------------- HostTracker: alerts


def test_alerts_for_disk_inodes_memory_and_oom_kills(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    assert tracker.alerts(now=0.0) == []
    tracker.absorb(snapshot(
        mounts=(mount("/", used=95, avail=5), mount("/root/autodl-tmp", iused=92, iavail=8)),
        memory=Memory("cgroup-v2", 91, 100, 2),
        pids=(),
    ))
    # Two OOM kills from before this session are history, not news.
    assert tracker.alerts(now=0.0) == ["disk 95% /", "inodes 92% /root/autodl-tmp", "memory 91%"]
    tracker.absorb(snapshot(mounts=(), memory=Memory("cgroup-v2", 50, 100, 3), pids=()))
    assert tracker.alerts(now=0.0) == ["oom_kill +1"]


def test_no_alerts_just_below_the_threshold(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    below = int(PRESSURE_PCT) - 1
    tracker.absorb(snapshot(
        mounts=(mount(used=below, avail=100 - below, iused=below, iavail=100 - below),
                missing_mount("/nope")),
        memory=Memory("cgroup-v2", below, 100, 0),
        pids=(),
    ))
    assert tracker.alerts(now=0.0) == []
    tracker.absorb(snapshot(mounts=(mount(used=90, avail=10),), pids=()))
    assert tracker.alerts(now=0.0) == ["disk 90% /root/autodl-tmp"]


def test_alerts_name_failed_cells_and_running_clocks(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    first, second = two_snapshots()
    tracker.absorb(first)
    tracker.absorb(second)
    start = moment_epoch(CLOCK_START)
    failed = "det_baseline failed: CUDA out of memory (PyTorch allocator)"
    assert tracker.alerts(now=start + 9 * DAY) == [failed, "auto_release 6d left"]
    assert tracker.alerts(now=start + 16 * DAY) == [failed, "auto_release EXPIRED 1d ago"]


def stall_snapshot(*, pids: tuple[int, ...] | NA, quiet_s: float, ckpt_quiet_s: float | None = None,
                   remote_time: float | NA = 100_000.0) -> HostSnapshot:
    now = 100_000.0
    return snapshot(
        remote_time=remote_time,
        pids=pids,
        run_logs=(FileStat(f"{LOGS}/a.log", 10, now - quiet_s - 60), FileStat(f"{LOGS}/b.log", 10, NA("x"))),
        queue_log=FileStat(MASTER, 10, now - quiet_s),
        checkpoint=None if ckpt_quiet_s is None else FileStat("/ck/best.pth", 10, now - ckpt_quiet_s),
    )


def stall(tracker: HostTracker) -> str | None:
    found = [j for j in tracker.judgements(now=0.0) if j.kind in ("stalled", "buffered-log")]
    assert len(found) <= 1
    return f"{found[0].kind} {found[0].text}" if found else None


def test_stall_when_alive_and_silent_longer_than_stall_after(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(stall_snapshot(pids=(1,), quiet_s=3000.0))
    assert stall(tracker) == "stalled stalled 50m"
    assert tracker.alerts(now=0.0) == ["stalled 50m"]


def test_no_stall_below_stall_after_or_when_a_checkpoint_is_fresh(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(stall_snapshot(pids=(1,), quiet_s=1700.0))
    assert stall(tracker) is None
    # U43: the log froze (block-buffered stdout) but checkpoints advance: alive, not stalled.
    tracker.absorb(stall_snapshot(pids=(1,), quiet_s=3000.0, ckpt_quiet_s=60.0))
    assert stall(tracker) == "buffered-log log quiet, checkpoints advancing"
    assert tracker.alerts(now=0.0) == []
    # Both frozen: stalled, timed from the newest of the two.
    tracker.absorb(stall_snapshot(pids=(1,), quiet_s=3000.0, ckpt_quiet_s=2400.0))
    assert stall(tracker) == "stalled stalled 40m"


def test_no_stall_without_a_live_queue_or_a_remote_clock(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(stall_snapshot(pids=(), quiet_s=99_000.0))
    assert stall(tracker) is None
    tracker.absorb(stall_snapshot(pids=NA("no ps"), quiet_s=99_000.0))
    assert stall(tracker) is None
    tracker.absorb(stall_snapshot(pids=(1,), quiet_s=99_000.0, remote_time=NA("no header")))
    assert stall(tracker) is None
    assert tracker.alerts(now=0.0) == []


def test_stall_after_comes_from_the_instance(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}, stall_after="5m"), profile, RULEBOOK)
    tracker.absorb(stall_snapshot(pids=(1,), quiet_s=301.0))
    assert stall(tracker) == "stalled stalled 5m1s"


# --------------------------------------------------------------------------- HostTracker: histories


def test_mount_trend_time_to_full(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    total = 10_000_000_000
    last = mount()
    for k in range(5):
        used = 1_000_000_000 + 5_000_000 * k  # +500 kB/s, sampled every 10 s
        last = mount(used=used, avail=total - used, iused=1000, iavail=9000)
        tracker.absorb(snapshot(observed_at=100.0 + 10 * k, mounts=(last,)))
    trend = tracker.mount_trend(last)
    assert trend.bytes_delta == 20_000_000.0
    assert trend.inodes_delta == 0.0
    assert trend.bytes_full_s == pytest.approx((total - 1_020_000_000) / 500_000.0)
    assert trend.bytes_full_s is not None and trend.bytes_full_s > 0
    assert trend.inodes_full_s is None  # flat: never full


def test_mount_trend_of_an_unknown_mount_is_empty(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    trend = tracker.mount_trend(mount("/never/seen"))
    assert (trend.bytes_delta, trend.inodes_delta, trend.bytes_full_s, trend.inodes_full_s) == (
        None, None, None, None)


def test_gpu_histories_leave_gaps_for_na(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    tracker.absorb(snapshot(observed_at=1.0, gpus=(gpu(40.0, 1000.0),)))
    tracker.absorb(snapshot(observed_at=2.0, gpus=(gpu(NA("[N/A]"), 2000.0),)))
    tracker.absorb(snapshot(observed_at=3.0, gpus=(gpu(60.0, 3000.0),)))
    assert tracker.gpu_util[0].values() == [40.0, 60.0]
    assert tracker.gpu_mem[0].values() == [25.0, 50.0, 75.0]
