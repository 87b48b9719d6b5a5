"""Everything the cockpit knows about one box over a session, built from fleet events.

A `HostTracker` absorbs connection states and snapshots and keeps: bounded histories (GPU
util and memory per GPU, bytes and inodes per mount) for sparklines, trends and
time-to-full; the queue (file, master log, per-run epochs); the failure log; and the open
alerts. It is pure (no I/O, no Textual), so the TUI, tests and benchmarks share it.
"""

from __future__ import annotations

import codecs
import dataclasses
import time
from collections import deque
from dataclasses import dataclass
from pathlib import PurePosixPath

from cockpit.models.classify import Finding, LogClassifier
from cockpit.models.durations import format_duration
from cockpit.models.failures import FailureLog
from cockpit.models.health import IDLE_PCT, Judgement, judge
from cockpit.models.profile import DangerClock, Profile
from cockpit.models.progress import last_redrawn, read_run_lines
from cockpit.models.queue import (
    CellState,
    LineSplitter,
    QueueLine,
    QueueLog,
    QueueView,
    RunProgress,
    build_view,
    parse_queue_file,
)
from cockpit.models.rules import Rulebook
from cockpit.models.slurm import TaskState, slurm_view
from cockpit.models.snapshot import NA, HostSnapshot, HostState, Mount, Reachability
from cockpit.models.sweep import Instance, moment_epoch
from cockpit.models.text import visible

MAX_BAD_REASON = 160
"""Characters of a bad record's reason kept for the box's screen and `status --json`."""
MAX_KERNEL_SEEN = 4096
"""Distinct kernel lines remembered so a Xid line is reported once (dmesg keeps ~1 MiB)."""
HISTORY_POINTS = 240
"""Points kept per series: 8 minutes at the 2 s default, enough for a sparkline and a trend."""
TREND_WINDOW_S = 600.0


class Series:
    """A bounded time series, plus the first point of the session for the session trend."""

    def __init__(self, maxlen: int = HISTORY_POINTS) -> None:
        self.points: deque[tuple[float, float]] = deque(maxlen=maxlen)
        self.first: tuple[float, float] | None = None

    def add(self, at: float, value: float | NA) -> None:
        """Append a known value (NA values leave a gap rather than a false zero)."""
        if isinstance(value, NA):
            return
        if self.first is None:
            self.first = (at, float(value))
        self.points.append((at, float(value)))

    def values(self) -> list[float]:
        """The values, oldest first."""
        return [v for _, v in self.points]

    @property
    def last(self) -> float | None:
        """The newest value."""
        return self.points[-1][1] if self.points else None

    def session_delta(self) -> float | None:
        """Newest minus first value of the session."""
        if self.first is None or not self.points:
            return None
        return self.points[-1][1] - self.first[1]

    def slope(self, window_s: float = TREND_WINDOW_S) -> float | None:
        """Least-squares change per second over the last `window_s`, from 3+ points."""
        if not self.points:
            return None
        newest = self.points[-1][0]
        pts = [(t, v) for t, v in self.points if t >= newest - window_s]
        if len(pts) < 3:
            return None
        mean_t = sum(t for t, _ in pts) / len(pts)
        mean_v = sum(v for _, v in pts) / len(pts)
        var = sum((t - mean_t) ** 2 for t, _ in pts)
        if var <= 0:
            return None
        return sum((t - mean_t) * (v - mean_v) for t, v in pts) / var


@dataclass(frozen=True)
class MountTrend:
    """How a mount's bytes and inodes moved this session and when they would run out."""

    bytes_delta: float | None
    inodes_delta: float | None
    bytes_full_s: float | None
    inodes_full_s: float | None


FULL_HORIZON_S = 90 * 86400.0
"""A time-to-full past 90 days is "not filling": a session's slope that far out is noise (a
few KiB of logs read as `full in 1433d20h`) and no rental lasts that long unwatched."""


def time_to_full(slope: float | None, avail: int | NA) -> float | None:
    """Seconds until `avail` is used up at `slope` per second; None when not filling, or when
    it would take longer than `FULL_HORIZON_S`."""
    if slope is None or slope <= 0 or isinstance(avail, NA):
        return None
    seconds = avail / slope
    return seconds if seconds <= FULL_HORIZON_S else None


@dataclass(frozen=True)
class ClockCountdown:
    """A running danger clock on one box."""

    instance: str
    clock: DangerClock
    started_at: float
    ends_at: float

    def text(self, now: float) -> str:
        """`5d 3h left` or `EXPIRED 2h ago`."""
        left = self.ends_at - now
        if left <= 0:
            return f"EXPIRED {format_duration(-left)} ago"
        return f"{format_duration(left)} left"


def running_clocks(instance: Instance, profile: Profile) -> list[ClockCountdown]:
    """The danger clocks the sweep says have started on this box."""
    out = []
    for clock in profile.danger_clocks.clocks:
        started = instance.clocks_started.get(clock.id)
        if started is not None and clock.seconds is not None:
            at = moment_epoch(started)
            out.append(ClockCountdown(instance.name, clock, at, at + clock.seconds))
    return out


class HostTracker:
    """One box's live model for the cockpit's screens."""

    def __init__(self, instance: Instance, profile: Profile, rulebook: Rulebook) -> None:
        self.instance = instance
        self.profile = profile
        self.rulebook = rulebook
        self.state = HostState(instance.name, Reachability.CONNECTING, time.time())
        self.snapshot: HostSnapshot | None = None
        self.gpu_util: dict[int, Series] = {}
        self.gpu_mem: dict[int, Series] = {}
        self.mount_bytes: dict[str, Series] = {}
        self.mount_inodes: dict[str, Series] = {}
        self.queue_lines: tuple[QueueLine, ...] = ()
        self.queue_log = QueueLog()
        self.progress: dict[str, RunProgress] = {}
        self.failures = FailureLog()
        self._splitters: dict[str, LineSplitter] = {}
        self._decoders: dict[str, codecs.IncrementalDecoder] = {}
        self._classifiers: dict[str, LogClassifier] = {}
        self.clocks = running_clocks(instance, profile)
        self.oom_kills_first: int | None = None
        """The cgroup's oom_kill count when first seen: a rise is news, an old count is not."""
        self.idle_since: float | None = None
        """Since when every GPU has been under the idle threshold (None: busy or no GPU)."""
        self.parents: dict[int, int] = {}
        self.kernel_findings: list[Finding] = []
        self._kernel_seen: set[str] = set()
        self._view: tuple[int, QueueView] | None = None
        self._judged: tuple[int, list[Judgement]] | None = None
        self.slurm_tasks: dict[int, TaskState] | None = None
        """Array-task states of a Slurm instance (from squeue/sacct), when it has a job."""
        self.version = 0
        """Bumped on every absorbed event, so views redraw only what changed."""
        self.absorb_failures = 0
        """Records this tracker could not absorb (an error in the model, not in the parser)."""
        self._bad_reason = ""

    # -- input --------------------------------------------------------------------------
    def absorb_state(self, state: HostState) -> None:
        """A connection state change."""
        if state.bad_records != self.state.bad_records and state.bad_reason:
            self._bad_reason = state.bad_reason
        self.state = state
        self.version += 1

    @property
    def bad_records(self) -> int:
        """Records from this box that could not be parsed or absorbed, this session."""
        return self.state.bad_records + self.absorb_failures

    @property
    def bad_reason(self) -> str:
        """Why the latest bad record was bad ("" when there was none)."""
        return self._bad_reason or self.state.bad_reason

    def absorb(self, snap: HostSnapshot) -> None:
        """A probe record: histories, queue, logs, failures.

        Isolated: a record that makes the model fail is counted and named (`bad_records`,
        `bad_reason`) and the box goes on being watched with its next record."""
        try:
            self._absorb(snap)
        except Exception as exc:  # one bad record must not stop the watcher
            self.absorb_failures += 1
            self._bad_reason = visible(f"{type(exc).__name__}: {exc}"[:MAX_BAD_REASON])
            self.version += 1

    def _absorb(self, snap: HostSnapshot) -> None:
        self.snapshot = snap
        self.version += 1
        at = snap.observed_at
        if self.state.reachability is not Reachability.CONNECTED:
            # A record is proof the box answered, whatever state event is still on its way.
            self.state = dataclasses.replace(
                self.state, reachability=Reachability.CONNECTED, since=at, detail="",
                host_key=None, attempts=0)
        self._evidence(snap)
        for gpu in snap.gpu.gpus:
            self.gpu_util.setdefault(gpu.index, Series()).add(at, gpu.util_pct)
            self.gpu_mem.setdefault(gpu.index, Series()).add(at, gpu.mem_pct)
        for mount in snap.mounts:
            self.mount_bytes.setdefault(mount.path, Series()).add(at, _used(mount.bytes_used))
            self.mount_inodes.setdefault(mount.path, Series()).add(at, _used(mount.inodes_used))
        if snap.queue.queue_text is not None:
            self.queue_lines = parse_queue_file(snap.queue.queue_text)
        if snap.queue.queue_marks:
            self._master_lines(snap.queue.queue_marks.splitlines(), snap)
        # Cells' own logs first: a FINISHED line's exit code is then matched against the
        # cause their log gave in the same record.
        chunks = sorted(snap.log_chunks, key=lambda c: c.path == self.instance.queue_log)
        for chunk in chunks:
            if chunk.path != self.instance.queue_log:
                self._classify(chunk.path, chunk.data, chunk.reset, at)
            # One incremental decoder per log: a UTF-8 character may straddle two chunks.
            decoder = self._decoders.get(chunk.path)
            if decoder is None or chunk.reset:
                decoder = self._decoders[chunk.path] = codecs.getincrementaldecoder("utf-8")(
                    errors="replace")
            text = decoder.decode(chunk.data)
            lines = self._splitters.setdefault(chunk.path, LineSplitter()).feed(text, chunk.reset)
            if chunk.reset and chunk.path != self.instance.queue_log:
                self.progress.pop(cell_name(chunk.path), None)  # truncated or re-run
            if chunk.path == self.instance.queue_log:
                self._master_lines(lines, snap)
            else:
                run = self.progress.setdefault(cell_name(chunk.path), RunProgress())
                read_run_lines(run, lines, last_redrawn(text))
        self._forget_gone(snap)

    def _forget_gone(self, snap: HostSnapshot) -> None:
        """Drop per-log state of logs the box no longer lists.

        Log names that change on every tick grew this state by ~90 MB a minute, never
        freed; only logs that are present (plus the master log) keep a splitter, a decoder
        and a classifier, and only cells the queue knows or a present log names keep progress.
        """
        present = {stat.path for stat in snap.queue.run_logs}
        present.update(chunk.path for chunk in snap.log_chunks)
        if self.instance.queue_log:
            present.add(self.instance.queue_log)
        for table in (self._splitters, self._decoders, self._classifiers):
            for path in [p for p in table if p not in present]:
                del table[path]
        cells = {cell_name(p) for p in present} | {ln.name for ln in self.queue_lines}
        cells.update(self.queue_log.started)
        for cell in [c for c in self.progress if c not in cells]:
            del self.progress[cell]

    def _evidence(self, snap: HostSnapshot) -> None:
        """Counters and process facts the health judgements compare across records."""
        kills = snap.memory.oom_kills
        if self.oom_kills_first is None and not isinstance(kills, NA):
            self.oom_kills_first = kills
        utils = [g.util_pct for g in snap.gpu.gpus]
        if utils and all(not isinstance(u, NA) and u < IDLE_PCT for u in utils):
            if self.idle_since is None:
                self.idle_since = snap.observed_at
        else:
            self.idle_since = None
        if isinstance(snap.parents, dict):
            self.parents = snap.parents
        elif not any(g.processes for g in snap.gpu.gpus):
            self.parents = {}
        if isinstance(snap.kernel_lines, tuple):
            for line in snap.kernel_lines:
                if line in self._kernel_seen:
                    continue
                if len(self._kernel_seen) >= MAX_KERNEL_SEEN:
                    self._kernel_seen.clear()
                self._kernel_seen.add(line)
                rule = self.rulebook.match_line(line.encode())
                if rule is not None and rule.klass == "hardware":
                    self.kernel_findings.append(Finding(rule, 0, line[:240]))

    def _classify(self, path: str, data: bytes, reset: bool, at: float) -> None:
        classifier = self._classifiers.get(path)
        if classifier is None:
            classifier = self._classifiers[path] = LogClassifier(self.rulebook)
        cell = cell_name(path)
        # flush(): a traceback whose exception line arrived is reported now, not when the
        # next line comes (a crashed process writes no next line).
        for finding in [*classifier.feed(data, reset), *classifier.flush()]:
            self.failures.add(cell, finding, at)

    def _master_lines(self, lines: list[str], snap: HostSnapshot) -> None:
        for name, fin in self.queue_log.feed(lines, snap.utc_offset):
            self.failures.cell_finished(name, fin.exit_code, fin.at, self.rulebook)

    # -- views --------------------------------------------------------------------------
    @property
    def alive(self) -> bool | None:
        """Whether the queue has a live process (None when it could not be checked)."""
        if self.snapshot is None:
            return None
        pids = self.snapshot.queue.process_pids
        return None if isinstance(pids, NA) else bool(pids)

    def absorb_slurm(self, tasks: dict[int, TaskState], at: float) -> None:
        """Slurm's view of the queue's array job; a failed task becomes a failure event."""
        self.slurm_tasks = tasks
        self.version += 1
        names = {line.index: line.name for line in self.queue_lines}
        for index, task in tasks.items():
            if task.cell_state is not CellState.FAILED or index not in names:
                continue
            rule = self.rulebook.by_id.get(task.rule_id) if task.rule_id else None
            if rule is not None:
                self.failures.add_rule(names[index], rule, at, f"Slurm: {task.text}")
            else:
                self.failures.cell_finished(names[index], task.exit_code or 1, at, self.rulebook,
                                            runner_known=True)  # our run_one.sh under sbatch

    def queue_view(self) -> QueueView:
        """The queue's cells as of the newest snapshot (remote clock).

        Built once per absorbed record: the fleet row, its alerts and the box screen all ask
        for it on every repaint. Without a remote clock it depends on this machine's clock,
        so it is rebuilt each time.
        """
        if self.slurm_tasks is not None:
            return slurm_view(self.queue_lines, self.slurm_tasks)
        snap = self.snapshot
        if snap is None or isinstance(snap.remote_time, NA):
            return build_view(self.queue_lines, self.queue_log, self.progress, alive=self.alive,
                              now=time.time())
        if self._view is None or self._view[0] != self.version:
            view = build_view(self.queue_lines, self.queue_log, self.progress, alive=self.alive,
                              now=snap.remote_time)
            self._view = (self.version, view)
        return self._view[1]

    def mount_trend(self, mount: Mount) -> MountTrend:
        """Session trend and time-to-full of one mount."""
        bytes_series = self.mount_bytes.get(mount.path, Series())
        inode_series = self.mount_inodes.get(mount.path, Series())
        return MountTrend(
            bytes_series.session_delta(), inode_series.session_delta(),
            time_to_full(bytes_series.slope(), mount.bytes_avail),
            time_to_full(inode_series.slope(), mount.inodes_avail),
        )

    def judgements(self, now: float | None = None) -> list[Judgement]:
        """Run-health judgements about this box and its cells (see `health`).

        Judged once per absorbed event while connected (they depend on the evidence only);
        a stale box's text counts time, so it is judged each time.
        """
        now = time.time() if now is None else now
        if self.state.reachability is not Reachability.CONNECTED:
            return judge(self, now)
        if self._judged is None or self._judged[0] != self.version:
            self._judged = (self.version, judge(self, now))
        return self._judged[1]

    def alerts(self, now: float | None = None) -> list[str]:
        """Short texts of what needs attention: alarming judgements and running danger clocks."""
        now = time.time() if now is None else now
        out = [j.text for j in self.judgements(now) if j.alarm]
        out += [f"{c.clock.id} {c.text(now)}" for c in self.clocks]
        return out


def _used(value: int | NA) -> float | NA:
    return value if isinstance(value, NA) else float(value)


def cell_name(path: str) -> str:
    """The cell a run log belongs to: its file name without `.log`."""
    name = PurePosixPath(path).name
    return name[: -len(".log")] if name.endswith(".log") else name
