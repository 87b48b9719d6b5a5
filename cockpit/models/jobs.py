"""Job groups: one distributed training across several boxes, judged as ONE job.

A sweep's `jobs:` block names the boxes of a distributed job (torchrun, DeepSpeed, accelerate
over a rendezvous) and the global ranks each runs. Each box is still watched alone by its
`HostTracker`; this module reads across them (platform-facts D19, D20, MN3):

- **ranks by box**: each rank's last progress, from the job's log on its box (`<cell>.log`).
  A line tagged `[rankN]:` (PyTorch's own prefix) belongs to global rank N, `[defaultK]:`
  (torchrun `--tee`) to the box's K-th local rank; an untagged line to the box's only rank
  (or, on a box with several, to all of them). torchrun's `ChildFailedError` summary names
  each failed `rank : N (local_rank: K)` with its `exitcode` and the box's clock `time`.
- **root cause across boxes**: one rank's own error (an OOM, a NaN, an exception) is the
  job's cause; the other ranks' watchdog timeouts, `Connection closed by peer`s, launcher
  `ChildFailedError`s and hangs are its *symptoms*, never failures of their own (D20).
- **stalled in a collective**: every member's process lives, yet no rank has progressed for
  the job's `stall_after`, over at least `STALL_RECORDS` fresh records from every box. That
  verdict needs only the probe's evidence and comes long before the watchdog (1800 s, MN3).

Pure (no I/O, no Textual): the monitor feeds snapshots in, the TUI and alerts read `JobView`.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from cockpit.models.durations import format_duration, parse_duration
from cockpit.models.failures import FailureEvent
from cockpit.models.progress import parse_progress
from cockpit.models.queue import CellState, LineSplitter
from cockpit.models.rules import TIERS
from cockpit.models.snapshot import NA, HostSnapshot, Reachability
from cockpit.models.sweep import Job
from cockpit.models.text import visible

if TYPE_CHECKING:
    from cockpit.models.hostview import HostTracker

STALL_RECORDS = 3
"""Fresh records every member must have sent since the last progress before the job is judged
stalled: one quiet record is a slow step, a few in a row from every box is evidence."""
MAX_LINE_SCAN = 4096
"""Characters of one log line read for a rank tag, progress or a failure summary (the same
bound as progress.MAX_SCAN: what a launcher prints fits; a longer line is a bar or noise)."""
MAX_TEXT = 240
"""Characters of a box's error line kept in a view (the box's own screen has the whole log)."""
SETTLE_S = 30.0
"""How long a job whose ranks report only symptoms (a closed peer, a timeout) waits for the
rank that failed first to say why, before it is reported without a cause: the crashed box's
log usually arrives a record later than the peer's reaction."""
BUSY_PCT = 90.0
"""GPU utilisation that, with no rank progressing, reads as NCCL kernels spinning (D19)."""

SYMPTOM_RANK = TIERS.index("symptom")
SYMPTOM_RULES = frozenset({"MN3", "NCCL-PEER", "D20", "INT"})
"""Rules that name a peer's or the launcher's reaction, not a rank's own failure."""
PEER_LOSS = re.compile(
    r"Connection closed by (?:remote )?peer|caused by a remote worker crashing|"
    r"Connection reset by peer.*(?:gloo|pair\.cc)|(?:gloo|pair\.(?:cc|h)).*(?:timed? ?out|"
    r"Connection reset)|Timed out waiting \d+ms for (?:recv|send)|ncclRemoteError|"
    r"Watchdog caught collective|ran for \d+ milliseconds before timing out|"
    r"ChildFailedError|SIGTERM death signal|RendezvousClosedError|RendezvousTimeoutError",
    re.IGNORECASE)
"""A rank's error that only says a peer went away or a collective timed out (gloo's
`Connection closed by peer ... typically caused by a remote worker crashing`, NCCL's
watchdog, torchrun's summary): the cause is on the other side."""

_RANK_TAG = re.compile(r"^\[(?:rank)([0-9]{1,5})\]:\s?")
"""PyTorch's `[rank3]:` prefix on a worker's traceback and prints: a global rank."""
_LOCAL_TAG = re.compile(r"^\[([A-Za-z_]{1,32}?)([0-9]{1,5})\]:\s?")
"""torchrun `--tee`'s `[default0]:` prefix: a role and a LOCAL rank."""
_NOT_PROGRESS = re.compile(r"Error\b|Exception\b|Traceback|^\s+File \"|^\s+\^")
"""Traceback and error lines: `ValueError: bad batch at step 10` is no step counter."""
_SUMMARY_RANK = re.compile(r"^\s{0,8}rank\s{0,16}:\s{0,4}([0-9]{1,5}) \(local_rank: ([0-9]{1,5})\)")
_SUMMARY_EXIT = re.compile(r"^\s{0,8}exitcode\s{0,16}:\s{0,4}(-?[0-9]{1,5})")
_SUMMARY_TIME = re.compile(r"^\s{0,8}time\s{0,16}:\s{0,4}([0-9_:-]{10,32})")


class JobState(Enum):
    """Where a job group stands, judged from all its boxes."""

    WAITING = "waiting"
    RUNNING = "running"
    STALLED = "stalled"
    FAILED = "failed"
    FINISHED = "finished"
    UNKNOWN = "unknown"
    """A member cannot be reached: nothing is judged from silence."""


@dataclass
class RankProgress:
    """One rank: how far its box's log says it is, and when that was last seen to move."""

    rank: int
    instance: str
    step: float | None = None
    steps: int | None = None
    unit: str = "step"
    moved_at: float | None = None
    """Local time of the record that carried this rank's newest progress line."""
    exit_code: int | None = None
    """From the launcher's failure summary (`exitcode : 1`), when it printed one."""
    failed_clock: str = ""
    """The box's own clock in that summary (`2026-11-24_12:20:07`), for ordering failures."""


@dataclass
class _MemberLog:
    splitter: LineSplitter = field(default_factory=LineSplitter)
    decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")(errors="replace"))
    records_since_move: int = 0
    """Records from this box since any rank of the job last moved (stall evidence)."""
    first_at: float | None = None
    records: int = 0
    """Records absorbed from this box (to tell whether one came after an event was seen)."""
    summary_rank: int | None = None
    summary_clock: str = ""
    """The `time :` line of the failure summary being read (it comes before its `rank :`)."""


class JobTracker:
    """The live state of one job group, fed the same snapshots as its boxes' trackers."""

    def __init__(self, job: Job) -> None:
        self.job = job
        self.ranks: dict[int, RankProgress] = {}
        self.local: dict[str, tuple[int, ...]] = {}
        for member in job.members:
            self.local[member.instance] = member.ranks
            for rank in member.ranks:
                self.ranks[rank] = RankProgress(rank, member.instance)
        self._logs: dict[str, _MemberLog] = {m.instance: _MemberLog() for m in job.members}
        self.last_move: float | None = None
        self.exit_seen: dict[tuple[str, str], int] = {}
        """(box, event key) of an exit-code-only event -> the box's record count when a
        judgement first saw it (see `judge_job`)."""
        """Local time any rank last moved (None: none has yet)."""
        self.version = 0

    def is_job_log(self, path: str) -> bool:
        """Whether `path` is this job's log (`<cell>.log`) on a member."""
        name = path.rsplit("/", 1)[-1]
        return name == f"{self.job.log_cell}.log"

    def absorb(self, snap: HostSnapshot) -> None:
        """A member's probe record: its job log's new lines, and one more record of evidence."""
        log = self._logs.get(snap.instance)
        if log is None:
            return
        self.version += 1
        log.records += 1
        if log.first_at is None:
            log.first_at = snap.observed_at
        moved = False
        for chunk in snap.log_chunks:
            if not self.is_job_log(chunk.path):
                continue
            if chunk.reset:
                # The job's log was truncated or started again (a re-run, a torchrun restart
                # from step 0, MN5): this box's ranks start over.
                log.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
                log.summary_rank, log.summary_clock = None, ""
                for rank in self.local[snap.instance]:
                    self.ranks[rank] = RankProgress(rank, snap.instance)
                self.exit_seen = {k: v for k, v in self.exit_seen.items() if k[0] != snap.instance}
            lines = log.splitter.feed(log.decoder.decode(chunk.data), chunk.reset)
            for line in lines:
                moved |= self._line(snap.instance, log, line[:MAX_LINE_SCAN], snap.observed_at)
        if moved:
            self.last_move = snap.observed_at
            for other in self._logs.values():
                other.records_since_move = 0
        else:
            log.records_since_move += 1

    def _line(self, instance: str, log: _MemberLog, line: str, at: float) -> bool:
        local = self.local[instance]
        targets: tuple[int, ...] = local
        tag = _RANK_TAG.match(line)
        if tag:
            rank = int(tag.group(1))
            targets = (rank,) if rank in local else ()
            line = line[tag.end():]
        elif (ltag := _LOCAL_TAG.match(line)) is not None:
            index = int(ltag.group(2))
            targets = (local[index],) if index < len(local) else ()
            line = line[ltag.end():]
        if (m := _SUMMARY_TIME.match(line)) is not None:
            log.summary_clock, log.summary_rank = m.group(1), None
            return False
        if (m := _SUMMARY_RANK.match(line)) is not None:
            rank = int(m.group(1))
            log.summary_rank = rank if rank in self.ranks else None
            if log.summary_rank is not None and log.summary_clock:
                self.ranks[rank].failed_clock = log.summary_clock
            return False
        if log.summary_rank is not None and (m := _SUMMARY_EXIT.match(line)) is not None:
            self.ranks[log.summary_rank].exit_code = int(m.group(1))
            return False
        if not targets or _NOT_PROGRESS.search(line):
            return False
        progress = parse_progress(line)
        if progress is None:
            return False
        for rank in targets:
            row = self.ranks[rank]
            total = progress.total if progress.total is not None else (
                row.steps if row.unit == progress.unit else None)
            if row.step != progress.done or row.steps != total:
                row.step, row.steps, row.unit = progress.done, total, progress.unit
                row.moved_at = at
        return True


@dataclass(frozen=True)
class JobCause:
    """The failure a job is blamed on: one rank's own error on one box."""

    instance: str
    ranks: tuple[int, ...]
    title: str
    message: str
    remediation: str
    rule_id: str = ""
    klass: str = ""


@dataclass(frozen=True)
class JobSymptom:
    """What another box showed because of the cause (a timeout, a closed peer, a hang)."""

    instance: str
    ranks: tuple[int, ...]
    text: str


@dataclass(frozen=True)
class MemberView:
    """One box of the job as the job view shows it."""

    instance: str
    ranks: tuple[int, ...]
    reach: str
    alive: bool | None
    cell: str
    """The job cell's state on this box (`running`, `failed`, `ok`, ...; `-` when unknown)."""
    log_age_s: float | None
    role: str
    """`cause`, `symptom` or `` (nothing wrong seen on this box)."""


@dataclass(frozen=True)
class JobView:
    """A job group judged as one job."""

    name: str
    launcher: str
    world_size: int
    state: JobState
    text: str
    """Short: `failed: rank 1 on b (ValueError)`, `stalled 2m in a collective`, `running 12/40`."""
    detail: str
    """The evidence and the one thing to do."""
    cause: JobCause | None
    symptoms: tuple[JobSymptom, ...]
    ranks: tuple[RankProgress, ...]
    members: tuple[MemberView, ...]
    quiet_s: float | None = None
    settled: bool = True
    """False while a failure is known only from symptoms and a member may still report its
    cause (its queue has not marked the job finished and its process lives, for up to
    `SETTLE_S`): the job's alert waits, so it names the cause."""

    @property
    def instances(self) -> tuple[str, ...]:
        """The member boxes, in the sweep's order."""
        return tuple(m.instance for m in self.members)


def is_symptom(event: FailureEvent) -> bool:
    """An event that only reports a peer's failure or a collective's timeout."""
    return (event.rank >= SYMPTOM_RANK or event.rule_id in SYMPTOM_RULES
            or PEER_LOSS.search(event.message) is not None
            or PEER_LOSS.search(event.title) is not None)


def _log_age(tracker: HostTracker, cell: str) -> float | None:
    snap = tracker.snapshot
    if snap is None or isinstance(snap.remote_time, NA):
        return None
    for stat in snap.queue.run_logs:
        if stat.path.rsplit("/", 1)[-1] == f"{cell}.log" and not isinstance(stat.mtime, NA):
            return max(0.0, snap.remote_time - stat.mtime)
    return None


def _cell_state(tracker: HostTracker, cell: str) -> CellState | None:
    for view in tracker.queue_view().cells:
        if view.name == cell:
            return view.state
    return None


def _failed_ranks(jt: JobTracker, instance: str) -> tuple[int, ...]:
    ranks = tuple(r for r in jt.local[instance] if (jt.ranks[r].exit_code or 0) != 0)
    return ranks or jt.local[instance]


def _busy_gpus(tracker: HostTracker) -> bool:
    snap = tracker.snapshot
    gpus = snap.gpu.gpus if snap is not None else ()
    return bool(gpus) and all(not isinstance(g.util_pct, NA) and g.util_pct >= BUSY_PCT
                              for g in gpus)


def _order(event: FailureEvent) -> tuple[int, int]:
    """Evidence order within one box: strongest tier, then the earliest line."""
    return event.rank, event.line_no if event.line_no is not None else 1 << 30


def judge_job(jt: JobTracker, trackers: Mapping[str, HostTracker], now: float) -> JobView:
    """The job as one job: its state, its cause across boxes and the symptoms of that cause."""
    job = jt.job
    cell = job.log_cell
    members = [(m.instance, trackers.get(m.instance)) for m in job.members]
    own: dict[str, FailureEvent] = {}
    side: dict[str, FailureEvent] = {}
    waiting: list[str] = []
    states: dict[str, CellState | None] = {}
    for name, tracker in members:
        if tracker is None:
            states[name] = None
            continue
        states[name] = _cell_state(tracker, cell)
        events = tracker.failures.for_cell(cell)
        # An exit code with no log line yet is provisional: the FINISHED mark can arrive a
        # record before the log's last lines. It waits for one more record from its box.
        for event in [e for e in events if e.line_no is None]:
            records = jt._logs[name].records
            if jt.exit_seen.setdefault((name, event.key), records) == records:
                events.remove(event)
                waiting.append(name)
        causes = [e for e in events if not is_symptom(e)]
        peer = [e for e in events if is_symptom(e)]
        if causes:
            own[name] = min(causes, key=_order)
        elif peer:
            side[name] = min(peer, key=_order)

    def when(name: str) -> tuple[bool, float, str]:
        """Log evidence before a bare exit code, then the earliest seen, then the box's clock."""
        event = own.get(name) or side.get(name)
        clocks = [jt.ranks[r].failed_clock for r in jt.local[name] if jt.ranks[r].failed_clock]
        return (event is None or event.line_no is None, event.first_at if event else now,
                min(clocks, default="~"))

    cause: JobCause | None = None
    if own:
        first = min(own, key=when)
        event = own[first]
        cause = JobCause(first, _failed_ranks(jt, first), event.title,
                         visible(event.message, limit=MAX_TEXT), event.remediation,
                         event.rule_id, event.klass)
    else:
        gone = [name for name, t in members if t is not None and t.alive is False
                and states[name] not in (CellState.OK, None) and name not in side
                and name not in waiting]
        if gone and (side or any(states[n] is CellState.FAILED for n in states)):
            first = gone[0]
            cause = JobCause(first, jt.local[first], "rank process gone without an error",
                             "its process ended and its log names no error (a SIGKILL, the host "
                             "OOM killer, a reboot)",
                             "Check that box first: dmesg | grep -iE 'killed process|out of "
                             "memory', uptime; the other ranks' errors are symptoms (D20).",
                             "U3", "host-oom")
    symptoms: list[JobSymptom] = []
    for name, tracker in members:
        if cause is not None and name == cause.instance:
            continue
        seen = side.get(name) or own.get(name)
        if seen is not None:
            symptoms.append(JobSymptom(name, jt.local[name],
                                       visible(f"{seen.title}: {seen.message}", limit=MAX_TEXT)))
        elif cause is not None and tracker is not None and tracker.alive:
            symptoms.append(JobSymptom(name, jt.local[name],
                                       "waiting in a collective for the failed rank (its "
                                       "watchdog has not fired yet)"))
    member_views = []
    roles = {s.instance: "symptom" for s in symptoms}
    if cause is not None:
        roles[cause.instance] = "cause"
    for name, tracker in members:
        reach = tracker.state.reachability.value if tracker is not None else "unknown"
        state = states.get(name)
        member_views.append(MemberView(
            name, jt.local[name], reach, tracker.alive if tracker is not None else None,
            state.value if state is not None else "-",
            _log_age(tracker, cell) if tracker is not None else None, roles.get(name, "")))
    ranks = tuple(jt.ranks[r] for r in sorted(jt.ranks))
    quiet = None if jt.last_move is None else max(0.0, now - jt.last_move)

    def made(state: JobState, text: str, detail: str, settled: bool = True) -> JobView:
        return JobView(job.name, job.launcher, job.world_size, state, text, detail, cause,
                       tuple(symptoms), ranks, tuple(member_views), quiet, settled)

    failed = cause is not None or bool(side) or any(s is CellState.FAILED for s in states.values())
    if failed:
        if cause is not None:
            where = ", ".join(map(str, cause.ranks))
            text = f"failed: rank {where} on {cause.instance}: {cause.title}"
            also = "; ".join(f"{s.instance}: {s.text}" for s in symptoms)
            detail = (f"Cause: rank {where} on {cause.instance}: {cause.message}. "
                      f"{cause.remediation} Symptoms, not failures of their own (D20): "
                      f"{also or 'none seen'}.")
            return made(JobState.FAILED, text, detail)
        pending = [n for n, t in members if t is not None and t.alive is not False
                   and states[n] not in (CellState.OK, CellState.FAILED)] + waiting
        since = min((e.first_at for e in side.values()), default=now)
        if pending and now - since < SETTLE_S:
            return made(JobState.FAILED, "failing: waiting for the cause",
                        f"A rank reports a lost peer or a timeout; {', '.join(pending)} may still "
                        f"report the error that caused it.", settled=False)
        return made(JobState.FAILED, "failed: only symptoms seen",
                    "Every failing rank reports a peer's loss or a timeout, and no box's log "
                    "names its own error: read each member's log from its first error; a rank "
                    "killed from outside leaves none (dmesg, U9).")
    unreachable = [n for n, t in members
                   if t is None or t.state.reachability is not Reachability.CONNECTED]
    if unreachable:
        return made(JobState.UNKNOWN, f"unknown: {', '.join(unreachable)} stale",
                       "A member cannot be reached: the job is not judged from silence; "
                              "the other boxes are still watched.")
    if states and all(s is CellState.OK for s in states.values()):
        return made(JobState.FINISHED, "finished on every box",
                       "Every member's queue marked the job FINISHED exit=0; verify "
                              "each box's results before any is torn down.")
    limit = parse_duration(job.stall_after)
    alive = all(t is not None and t.alive for _, t in members)
    records = min(log.records_since_move for log in jt._logs.values())
    started = jt.last_move if jt.last_move is not None else min(
        (log.first_at for log in jt._logs.values() if log.first_at is not None), default=None)
    quiet_for = None if started is None else now - started
    if alive and quiet_for is not None and quiet_for >= limit and records >= STALL_RECORDS:
        busy = [n for n, t in members if t is not None and _busy_gpus(t)]
        gpu = (f" Every GPU on {', '.join(busy)} is busy while nothing progresses: NCCL "
               "kernels spin in a collective (D19)." if busy else "")
        steps = sorted({r.step for r in ranks if r.step is not None})
        at = f" at step {steps[-1]:g}" if len(steps) == 1 else (
            f" (ranks at steps {', '.join(f'{s:g}' for s in steps[:6])})" if steps else "")
        return made(JobState.STALLED, f"stalled {format_duration(quiet_for)} in a collective",
            (f"No rank of {job.world_size} progressed for {format_duration(quiet_for)}"
                    f"{at} while every member's process lives ({records}+ fresh records from "
                    f"each box).{gpu} The collective will time out only at the watchdog "
                    f"(1800 s by default, MN3). Look before killing: py-spy dump --pid PID on "
                    f"each rank; a frozen or slow rank is the cause, the others wait on it. "
                    f"Set TORCH_DISTRIBUTED_DEBUG=DETAIL and NCCL_DEBUG=INFO next time."))
    moved = [r for r in ranks if r.step is not None]
    if not moved:
        return made(JobState.WAITING, "waiting for the ranks' first progress",
                       "No rank has printed progress yet (rendezvous, loading data).")
    low = min(moved, key=lambda r: r.step or 0.0)
    of = f"/{low.steps}" if low.steps else ""
    return made(JobState.RUNNING, f"running {low.unit} {low.step:g}{of}",
                   f"{len(moved)}/{job.world_size} ranks report progress; the slowest "
                          f"is rank {low.rank} on {low.instance}.")
