"""Everything the cockpit knows about one box over a session, built from fleet events.

A `HostTracker` absorbs connection states and snapshots and keeps: bounded histories (GPU
util and memory per GPU, bytes and inodes per mount) for sparklines, trends and
time-to-full; the queue (file, master log, per-run epochs); the failure log; and the open
alerts. It is pure (no I/O, no Textual), so the TUI, tests and benchmarks share it.
"""

from __future__ import annotations

import codecs
import time
from collections import deque
from dataclasses import dataclass
from pathlib import PurePosixPath

from cockpit.models.durations import format_duration, parse_duration
from cockpit.models.failures import FailureLog
from cockpit.models.profile import DangerClock, Profile
from cockpit.models.queue import (
    EPOCH_RE,
    LineSplitter,
    QueueLine,
    QueueLog,
    QueueView,
    RunProgress,
    build_view,
    parse_queue_file,
)
from cockpit.models.snapshot import NA, HostSnapshot, HostState, Mount, Reachability
from cockpit.models.summary import worst_disk, worst_inodes
from cockpit.models.sweep import Instance, moment_epoch

HISTORY_POINTS = 240
"""Points kept per series: 8 minutes at the 2 s default, enough for a sparkline and a trend."""
TREND_WINDOW_S = 600.0
ALERT_PCT = 90.0
"""Disk, inodes or cgroup memory at or above this is an alert (platform-facts §5.3)."""


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


def time_to_full(slope: float | None, avail: int | NA) -> float | None:
    """Seconds until `avail` is used up at `slope` per second; None when not filling."""
    if slope is None or slope <= 0 or isinstance(avail, NA):
        return None
    return avail / slope


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

    def __init__(self, instance: Instance, profile: Profile) -> None:
        self.instance = instance
        self.profile = profile
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
        self.clocks = running_clocks(instance, profile)
        self._view: tuple[int, QueueView] | None = None
        self.version = 0
        """Bumped on every absorbed event, so views redraw only what changed."""

    # -- input --------------------------------------------------------------------------
    def absorb_state(self, state: HostState) -> None:
        """A connection state change."""
        self.state = state
        self.version += 1

    def absorb(self, snap: HostSnapshot) -> None:
        """A probe record: histories, queue, logs, failures."""
        self.snapshot = snap
        self.version += 1
        at = snap.observed_at
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
        for chunk in snap.log_chunks:
            # One incremental decoder per log: a UTF-8 character may straddle two chunks.
            decoder = self._decoders.get(chunk.path)
            if decoder is None or chunk.reset:
                decoder = self._decoders[chunk.path] = codecs.getincrementaldecoder("utf-8")(
                    errors="replace")
            text = decoder.decode(chunk.data)
            lines = self._splitters.setdefault(chunk.path, LineSplitter()).feed(text, chunk.reset)
            if chunk.reset and chunk.path != self.instance.queue_log:
                self.progress.pop(_cell_name(chunk.path), None)  # truncated or re-run
            if chunk.path == self.instance.queue_log:
                self._master_lines(lines, snap)
            else:
                self._run_lines(_cell_name(chunk.path), lines, at)

    def _master_lines(self, lines: list[str], snap: HostSnapshot) -> None:
        for name, fin in self.queue_log.feed(lines, snap.utc_offset):
            self.failures.cell_finished(name, fin.exit_code, fin.at)

    def _run_lines(self, cell: str, lines: list[str], at: float) -> None:
        prog = self.progress.setdefault(cell, RunProgress())
        for line in lines:
            for match in EPOCH_RE.finditer(line):
                prog.epoch, prog.epochs = int(match["k"]), int(match["n"])
            if "Training completed" in line:
                prog.completed = True
        self.failures.scan(cell, lines, at)

    # -- views --------------------------------------------------------------------------
    @property
    def alive(self) -> bool | None:
        """Whether the queue has a live process (None when it could not be checked)."""
        if self.snapshot is None:
            return None
        pids = self.snapshot.queue.process_pids
        return None if isinstance(pids, NA) else bool(pids)

    def queue_view(self) -> QueueView:
        """The queue's cells as of the newest snapshot (remote clock).

        Built once per absorbed record: the fleet row, its alerts and the box screen all ask
        for it on every repaint. Without a remote clock it depends on this machine's clock,
        so it is rebuilt each time.
        """
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

    def stalled_for(self) -> float | None:
        """Seconds since the newest log or checkpoint write while the queue is alive, if that
        exceeds the instance's `stall_after` (alive but silent: platform-facts §5.5)."""
        snap = self.snapshot
        if snap is None or not self.alive or isinstance(snap.remote_time, NA):
            return None
        stats = [*snap.queue.run_logs, snap.queue.queue_log, snap.queue.newest_checkpoint]
        mtimes = [s.mtime for s in stats if s is not None and not isinstance(s.mtime, NA)]
        if not mtimes:
            return None
        quiet = snap.remote_time - max(mtimes)
        return quiet if quiet >= parse_duration(self.instance.stall_after) else None

    def alerts(self, now: float | None = None) -> list[str]:
        """Open alerts: resources at 90%+, a stall, failed cells, running danger clocks."""
        now = time.time() if now is None else now
        out: list[str] = []
        snap = self.snapshot
        if snap is not None:
            for label, top in (("disk", worst_disk(snap)), ("inodes", worst_inodes(snap))):
                if not isinstance(top, NA) and top >= ALERT_PCT:
                    out.append(f"{label} {top:.0f}%")
            mem = snap.memory.pct
            if not isinstance(mem, NA) and mem >= ALERT_PCT:
                out.append(f"memory {mem:.0f}%")
            if not isinstance(snap.memory.oom_kills, NA) and snap.memory.oom_kills > 0:
                out.append(f"oom_kill {snap.memory.oom_kills}")
        stalled = self.stalled_for()
        if stalled is not None:
            out.append(f"stalled {format_duration(stalled)}")
        failed = self.queue_view().failed
        if failed:
            out.append(f"{len(failed)} failed")
        out += [f"{c.clock.id} {c.text(now)}" for c in self.clocks]
        return out


def _used(value: int | NA) -> float | NA:
    return value if isinstance(value, NA) else float(value)


def _cell_name(path: str) -> str:
    name = PurePosixPath(path).name
    return name[: -len(".log")] if name.endswith(".log") else name
