"""The queue contract users already run (platform-facts §6), turned into per-cell state.

Inputs are the queue file (`<cfg> <task> [epochs]` per line), the master log that
`run_queue.sh` writes (`[ts] [i/N] STARTING name (task, Eep)`, `[ts] [i/N] FINISHED name
(exit=RC)`, `=== QUEUE DONE on host -- ... ===`) and each cell's own `<name>.log` (its last
`Epoch k/N` line). Logs arrive as byte chunks; the trackers here split them into lines
incrementally so a long run is never re-read.

A log is history, not the present: a cell that STARTED and never FINISHED is *running* only
while the queue has a live process; otherwise it was interrupted (platform-facts §5.5).
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass, field
from enum import Enum
from pathlib import PurePosixPath

from cockpit.models.parse import MAX_DIGITS
from cockpit.models.snapshot import NA

DEFAULT_EPOCHS = 20
MAX_PARTIAL = 65536
"""A line longer than this (a progress bar without newlines) is cut, not buffered forever."""
MAX_CELLS = 10_000
"""Cells the master log may name before the oldest are forgotten. A real queue has tens to
hundreds; a log that names a new cell on every line must not grow this box's state forever."""

_TS = r"\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]"
HEADER_RE = re.compile(r"=== Queue (?P<file>.*): (?P<total>\d+) ablations?, starting from "
                       r"(?P<start>\d+) on (?P<host>\S*) ===")
START_RE = re.compile(_TS + r" \[(?P<i>\d+)/(?P<n>\d+)\] STARTING (?P<name>\S+)"
                      r"(?: \((?P<task>[^,()]*), (?P<epochs>\d+)ep\))?")
FINISH_RE = re.compile(_TS + r" \[(?P<i>\d+)/(?P<n>\d+)\] FINISHED (?P<name>\S+) "
                       r"\(exit=(?P<rc>-?\d+)\)")
DONE_RE = re.compile(_TS + r" === QUEUE DONE on (?P<host>\S+) -- (?P<rest>.*?) ===")
SYNCED_RE = re.compile(r"\bsynced (?P<name>\S+) to durable storage\b")
"""The runbook's (and our) run_one.sh after a verified copy to the durable root: evidence shown
beside a cell's state, never a verdict alone (the exit code is the verdict)."""


@dataclass(frozen=True)
class QueueLine:
    """One cell line of a queue file."""

    index: int  # 1-based, counting cells only (what run_queue.sh's start_index means)
    cfg: str
    task: str
    epochs: int
    lineno: int

    @property
    def name(self) -> str:
        """The cell name: basename of the config without `.yaml` (the isolation key)."""
        base = PurePosixPath(self.cfg).name
        return base[: -len(".yaml")] if base.endswith(".yaml") else base


def bounded_int(text: str | None) -> int | None:
    """A field of ASCII digits (an optional leading minus) as an int, or None when it is
    missing, not a number, or longer than `MAX_DIGITS` (int() raises past 4300 digits)."""
    if not text:
        return None
    digits = text[1:] if text.startswith("-") else text
    if not 0 < len(digits) <= MAX_DIGITS or not digits.isascii() or not digits.isdigit():
        return None
    return int(text)


def parse_queue_file(text: str) -> tuple[QueueLine, ...]:
    """Cells of a queue file; `#` comments and blank lines are skipped like run_queue.sh does.

    An epochs field that is not a bounded number (`MAX_DIGITS`) counts as absent."""
    cells: list[QueueLine] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        epochs = DEFAULT_EPOCHS
        if len(parts) > 2 and re.fullmatch(r"[0-9]+", parts[2]):
            epochs = bounded_int(parts[2]) or DEFAULT_EPOCHS
        cells.append(QueueLine(len(cells) + 1, parts[0], parts[1] if len(parts) > 1 else "",
                               epochs, lineno))
    return tuple(cells)


def log_timestamp(text: str, utc_offset: float | NA) -> float:
    """A `YYYY-MM-DD HH:MM:SS` log stamp (remote local time) as epoch seconds.

    Uses the remote's UTC offset when the probe reported it, else this machine's zone.
    """
    parsed = time.strptime(text, "%Y-%m-%d %H:%M:%S")
    if isinstance(utc_offset, NA):
        return time.mktime(parsed)
    return calendar.timegm(parsed) - utc_offset


def mark_time(text: str, utc_offset: float | NA) -> float | None:
    """`log_timestamp`, or None for a stamp that is no real time (month 13, day 32, year 0)."""
    try:
        return log_timestamp(text, utc_offset)
    except (ValueError, OverflowError):
        return None


class LineSplitter:
    """Bytes-chunks in, complete lines out; keeps the unfinished tail for the next chunk."""

    def __init__(self) -> None:
        self._partial = ""

    def feed(self, text: str, reset: bool = False) -> list[str]:
        """Complete lines in `text` (after what was left over). `reset` drops the leftover."""
        if reset:
            self._partial = ""
        # Normalise after joining: a CRLF may be split between two chunks.
        text = (self._partial + text).replace("\r\n", "\n")
        lines = text.split("\n")
        self._partial = lines.pop()[-MAX_PARTIAL:]
        # tqdm-style progress rewrites one line with \r: keep only its last state.
        return [line.rsplit("\r", 1)[-1] for line in lines]


@dataclass(frozen=True)
class Started:
    """A STARTING line."""

    index: int
    total: int
    at: float
    task: str
    epochs: int | None


@dataclass(frozen=True)
class Finished:
    """A FINISHED line (printed for failures too: read the exit code)."""

    index: int
    at: float
    exit_code: int


@dataclass
class QueueLog:
    """What the master log has said so far, updated line by line."""

    started: dict[str, Started] = field(default_factory=dict)
    finished: dict[str, Finished] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    last_started: str | None = None
    done_line: str | None = None
    """The last QUEUE DONE line, if nothing started after it."""
    header_start: int | None = None
    total: int | None = None
    resumed_from: int | None = None
    """`starting from N` of the log's first header when no mark came before it: the log was
    started (a `| tee` truncates it) by a resume from N, so cells before N were handled by an
    earlier run of this queue whose marks are lost. A later header in an appended log does
    not set it: the earlier marks are then still in the log."""
    _seen: dict[tuple[str, Finished], None] = field(default_factory=dict)
    """FINISHED marks already reported, oldest first (bounded by `MAX_CELLS`)."""
    _known: set[str] = field(default_factory=set)
    """The names in `order`, for a constant-time membership test."""
    synced: dict[str, None] = field(default_factory=dict)
    """Cells whose run_one.sh said `synced NAME to durable storage` (bounded by `MAX_CELLS`)."""
    _headed: bool = False
    """Whether a header line was seen (only the first can be a truncating resume's)."""

    def feed(self, lines: list[str], utc_offset: float | NA) -> list[tuple[str, Finished]]:
        """Absorb lines; returns the cells that finished in them (for the failure log).

        A mark whose numbers are too long (`MAX_DIGITS`) or whose stamp is no real time is
        not a mark: it is skipped, like any other line."""
        newly: list[tuple[str, Finished]] = []
        for line in lines:
            if (m := START_RE.search(line)) is not None:
                index, total = bounded_int(m["i"]), bounded_int(m["n"])
                at = mark_time(m["ts"], utc_offset)
                if index is None or total is None or at is None:
                    continue
                name = m["name"]
                self.started[name] = Started(index, total, at, (m["task"] or "").strip(),
                                             bounded_int(m["epochs"]))
                self.finished.pop(name, None)
                self.synced.pop(name, None)  # this run has not synced yet
                self._remember(name)
                self.last_started, self.done_line, self.total = name, None, total
            elif (m := FINISH_RE.search(line)) is not None:
                index, rc = bounded_int(m["i"]), bounded_int(m["rc"])
                at = mark_time(m["ts"], utc_offset)
                if index is None or rc is None or at is None:
                    continue
                fin = Finished(index, at, rc)
                self.finished[m["name"]] = fin
                while len(self.finished) > MAX_CELLS:  # FINISHED marks of cells never STARTED
                    del self.finished[next(iter(self.finished))]
                if (m["name"], fin) not in self._seen:  # the marks and the log tail overlap
                    self._seen[(m["name"], fin)] = None
                    newly.append((m["name"], fin))
                    while len(self._seen) > MAX_CELLS:
                        del self._seen[next(iter(self._seen))]
            elif (m := SYNCED_RE.search(line)) is not None:
                self.synced.pop(m["name"], None)
                self.synced[m["name"]] = None
                while len(self.synced) > MAX_CELLS:
                    del self.synced[next(iter(self.synced))]
            elif (m := DONE_RE.search(line)) is not None:
                self.done_line = line[m.start():].strip()[:MAX_PARTIAL]
            elif (m := HEADER_RE.search(line)) is not None:
                start, total = bounded_int(m["start"]), bounded_int(m["total"])
                if start is not None and total is not None:
                    if not self._headed and not self.order and not self.finished:
                        self.resumed_from = start if start > 1 else None
                    self._headed = True
                    self.header_start, self.total, self.done_line = start, total, None
        return newly

    def _remember(self, name: str) -> None:
        """Keep `name` in `order` (linear time); past `MAX_CELLS` names forget the oldest."""
        if name in self._known:
            return
        self._known.add(name)
        self.order.append(name)
        if len(self.order) > MAX_CELLS:
            drop = self.order[: len(self.order) - MAX_CELLS + MAX_CELLS // 10]
            del self.order[: len(drop)]
            for old in drop:
                self._known.discard(old)
                self.started.pop(old, None)
                self.finished.pop(old, None)
            if self.last_started not in self._known:
                self.last_started = None


@dataclass
class RunProgress:
    """How far a cell's own log says it is (read by `cockpit.models.progress.advance`).

    `epoch`/`epochs` are what the queue panel shows as k/N and what its ETA is paced on:
    epochs when the log names them, else (`unit` "step") the steps of a run that prints only
    a step counter with a total. `epochs` 0: the log printed no total."""

    epoch: int = 0
    epochs: int = 0
    completed: bool = False
    unit: str = "epoch"
    """"epoch", or "step" when `epoch`/`epochs` hold a step counter (no epoch was printed)."""
    fraction: float | None = None
    """How far into the current epoch (0..1) a bar, a batch counter or a fractional epoch
    (`'epoch': 1.5`) says the run is; None when nothing said."""
    step: int = 0
    steps: int = 0
    """The newest whole-run step counter and its total (0: none printed)."""
    epoch_seen: bool = False
    """Whether any line named an epoch (then steps never stand in for epochs)."""

    @property
    def done_epochs(self) -> float:
        """Epochs (or, for `unit` "step", steps) done, with the fraction of the current one."""
        return self.epoch + (self.fraction or 0.0)

    def eta_s(self, elapsed_s: float, total: int | None = None) -> float | None:
        """Seconds left at the pace observed so far: elapsed / done x what is left, against
        `total` (the queue file's epochs when the log printed none). None without progress."""
        total = self.epochs or total
        done = self.done_epochs
        if not total or done <= 0 or elapsed_s < 0:
            return None
        return elapsed_s / done * max(0.0, total - done)


class CellState(Enum):
    """Where one cell stands."""

    PENDING = "pending"
    RUNNING = "running"
    OK = "finished ok"
    FAILED = "failed"
    INTERRUPTED = "interrupted"  # started, never finished, and no queue process now
    EARLIER = "finished earlier"
    """Before the `starting from N` of a master log a resume truncated: an earlier run of this
    queue handled it, but its FINISHED mark (and exit code) is lost. Never OK, never re-run
    by `resume`; `rerun` re-runs it on request."""


@dataclass(frozen=True)
class CellView:
    """One row of the queue panel."""

    index: int
    name: str
    task: str
    epochs: int
    state: CellState
    exit_code: int | None = None
    epoch: int = 0
    elapsed_s: float | None = None
    eta_s: float | None = None
    note: str = ""
    """What a scheduler said (`TIMEOUT`, `PENDING (Resources)`), shown instead of the exit code."""
    evidence: str = ""
    """What the state rests on (`master log: FINISHED exit=0`, `master log truncated by a
    resume from 3; own log: Training completed`), shown beside it."""

    @property
    def proven(self) -> bool:
        """Whether a resume must never run this cell again: FINISHED exit=0 in the master
        log, or handled by an earlier run before a truncating resume's `starting from N`."""
        return self.state in (CellState.OK, CellState.EARLIER)

    @property
    def state_text(self) -> str:
        """`failed exit=1`, `running`, `failed TIMEOUT`, ..."""
        if self.state is CellState.FAILED:
            return f"failed {self.note}" if self.note else f"failed exit={self.exit_code}"
        if self.note:
            return f"{self.state.value} {self.note}"
        return str(self.state.value)


@dataclass(frozen=True)
class QueueView:
    """The whole queue at one moment."""

    cells: tuple[CellView, ...]
    start_index: int | None
    """1-based index of the first cell that has not finished: `run_queue.sh QUEUE <start_index>`."""
    running: CellView | None
    done: bool
    eta_s: float | None

    @property
    def finished(self) -> int:
        """Cells that finished, ok or failed (or earlier, before a truncating resume)."""
        return sum(c.state in (CellState.OK, CellState.FAILED, CellState.EARLIER)
                   for c in self.cells)

    @property
    def resume_from(self) -> int | None:
        """Where `run_queue.sh QUEUE N` can start without running a proven cell again: the
        cell after the last proven one, when that cell exists and nothing runs; else None."""
        if self.running is not None or not self.cells:
            return None
        last = max((c.index for c in self.cells if c.proven), default=0)
        return next((c.index for c in self.cells if c.index > last), None)

    @property
    def unproven_before_resume(self) -> tuple[CellView, ...]:
        """Cells without proof of success that a resume cannot reach (a proven cell follows
        them): only `cockpit rerun --cells` runs them again."""
        start = self.resume_from
        return tuple(c for c in self.cells if not c.proven and c.state is not CellState.RUNNING
                     and (start is None or c.index < start))

    @property
    def failed(self) -> tuple[CellView, ...]:
        """Cells that finished with a non-zero exit code."""
        return tuple(c for c in self.cells if c.state is CellState.FAILED)

    @property
    def summary(self) -> str:
        """`3/4 aug_strong`, `4/4 done`, `1/3 stopped`, or `-` when no cell is known."""
        if not self.cells:
            return "-"
        head = f"{self.finished}/{len(self.cells)}"
        if self.running is not None:
            return f"{head} {self.running.name}"
        if self.done:
            return f"{head} done"
        if self.start_index is not None and self.finished and self.finished < len(self.cells):
            return f"{head} stopped"
        return head


def _cell_rows(lines: tuple[QueueLine, ...], log: QueueLog) -> list[tuple[int, str, str, int]]:
    rows = [(ln.index, ln.name, ln.task, ln.epochs) for ln in lines]
    known = {ln.name for ln in lines}
    for name in log.order:  # cells the log ran that the queue file no longer lists
        if name not in known:
            st = log.started[name]
            rows.append((st.index, name, st.task, st.epochs or DEFAULT_EPOCHS))
    return rows


def _own_log(prog: RunProgress | None) -> str:
    """The cell's own log as evidence: `; own log: Training completed`, `; own log: no
    completion line`, or nothing when its log was not read. Shown, never a verdict alone."""
    if prog is None:
        return ""
    return "; own log: Training completed" if prog.completed else "; own log: no completion line"


def build_view(
    lines: tuple[QueueLine, ...],
    log: QueueLog,
    progress: dict[str, RunProgress],
    *,
    alive: bool | None,
    now: float,
) -> QueueView:
    """Cell states from the queue file, the master log and per-run progress.

    `alive`: whether the queue has a live process (None when it could not be checked, in
    which case a started, unfinished cell is still shown as running).
    """
    # Seconds per epoch of finished cells, for the ETA of cells not started yet (whose size is
    # their queue-file epochs). A cell whose log counted only steps says nothing about that.
    rates: list[float] = []
    for name, done in log.finished.items():
        st, prog = log.started.get(name), progress.get(name)
        if (st is not None and prog is not None and prog.unit == "epoch" and prog.epoch > 0
                and done.at >= st.at):
            rates.append((done.at - st.at) / prog.epoch)
    views: list[CellView] = []
    for index, name, task, epochs in _cell_rows(lines, log):
        st, fin, prog = log.started.get(name), log.finished.get(name), progress.get(name)
        epoch = prog.epoch if prog else 0
        total_epochs = (prog.epochs if prog and prog.epochs else None) or (
            st.epochs if st and st.epochs else epochs)
        own = _own_log(prog) + ("; synced to durable storage" if name in log.synced else "")
        if fin is not None:
            state = CellState.OK if fin.exit_code == 0 else CellState.FAILED
            elapsed = fin.at - st.at if st is not None else None
            views.append(CellView(index, name, task, total_epochs, state, fin.exit_code, epoch,
                                  elapsed, evidence=f"master log: FINISHED exit={fin.exit_code}"
                                  + own))
        elif st is None and log.resumed_from is not None and index < log.resumed_from:
            views.append(CellView(
                index, name, task, total_epochs, CellState.EARLIER, None, epoch,
                evidence=f"master log truncated by a resume from {log.resumed_from}; exit "
                         f"code lost" + own))
        elif st is not None:
            running = alive is not False and name == log.last_started
            elapsed = max(0.0, now - st.at)
            eta = None
            if running and epoch > 0:
                # Paced on the whole epoch the log printed: whether `Epoch 3` means three done
                # (Keras, 1-based) or the fourth under way (Lightning, 0-based) cannot be told
                # from the text, so a fraction is not added to it here.
                eta = elapsed / epoch * max(0, total_epochs - epoch)
                if prog is not None and prog.unit == "epoch":
                    rates.append(elapsed / epoch)
            if running:
                why = ("master log: STARTING, no FINISHED; queue process alive" if alive else
                       "master log: STARTING, no FINISHED; processes not checked")
            else:
                why = "master log: STARTING, no FINISHED; no queue process"
            views.append(CellView(index, name, task, total_epochs,
                                  CellState.RUNNING if running else CellState.INTERRUPTED,
                                  None, epoch, elapsed, eta, evidence=why + own))
        else:
            views.append(CellView(index, name, task, total_epochs, CellState.PENDING,
                                  evidence="no mark in the master log" + own))
    views.sort(key=lambda c: c.index)
    rate = sum(rates) / len(rates) if rates else None
    running_cell = next((c for c in views if c.state is CellState.RUNNING), None)
    eta_total: float | None = None
    if rate is not None and (running_cell is not None or alive):
        pending = sum(c.epochs for c in views if c.state is CellState.PENDING)
        running_eta = (running_cell.eta_s or 0.0) if running_cell is not None else 0.0
        eta_total = running_eta + pending * rate
    start = next((c.index for c in views
                  if c.state in (CellState.PENDING, CellState.RUNNING, CellState.INTERRUPTED)), None)
    queue_done = log.done_line is not None and not alive
    return QueueView(tuple(views), start, running_cell, queue_done, eta_total)
