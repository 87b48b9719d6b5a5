"""Slurm: one array job over the queue's cells, read back with `squeue` and `sacct`.

Array task i runs queue cell i (1-based, like `start_index`). `squeue -h -o '%i|%T|%r'`
shows pending and running tasks with the reason a task waits; `sacct -n -P
--format=JobID,State,ExitCode,Elapsed` shows every task that started, finished ones too.
Their states become the queue panel's cell states, and the terminal failure states name
the catalog rule that explains them (platform-facts §2.4).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cockpit.models.queue import CellState, CellView, QueueLine, QueueView

MAX_ARRAY_TASKS = 10_000
"""The highest array task read when the queue's length is not known. Tasks above the queue's
length (or this) name no cell, so they are never expanded: a 33-byte squeue line
`5_[0-3000000]` took 800 MB when every task became an object (`0-200000000` was OOM-killed).
Slurm's own MaxArraySize defaults to 1001, and 10k task states take about 4 MB."""
MAX_ID_DIGITS = 10
"""Digits of a job id, task id, exit code or signal: Slurm's are 32-bit (at most 10 digits).
A longer number is not Slurm's, and int() of thousands of digits raises (past 4300)."""
MAX_STEP_WORK = 1_000_000
"""Array indices visited for stepped ranges (`1-99:2`) in one listing. squeue prints ranges
without steps (`1-3,5`), so only hostile output reaches this; it bounds the time one listing
can take (well under a second) and stepped ranges past it are left unexpanded."""

_ID = rf"[0-9]{{1,{MAX_ID_DIGITS}}}"
_TASK = re.compile(rf"^(?P<job>{_ID})_(?P<task>{_ID})$")
_RANGE = re.compile(rf"^(?P<job>{_ID})_\[(?P<spec>[^\]]+)\]$")
_PART = re.compile(rf"^(?P<low>{_ID})(?:-(?P<high>{_ID})(?::(?P<step>{_ID}))?)?$")
_NUMBER = re.compile(_ID)
_SUBMITTED = re.compile(r"Submitted batch job (?P<job>\d+)")

STATE_RULES = {
    "TIMEOUT": "SLURM-TIMEOUT",
    "OUT_OF_MEMORY": "SLURM4",
    "PREEMPTED": "SLURM-PREEMPTED",
    "NODE_FAIL": "SLURM-NODE_FAIL",
    "CANCELLED": "SLURM-CANCELLED",
}
"""Terminal states and the rule (cockpit/data/rules.yaml) whose remediation applies."""
RUNNING = {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "STAGE_OUT", "RESIZING"}
PENDING = {"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"}


@dataclass(frozen=True)
class TaskState:
    """One array task (= one cell) as Slurm reports it."""

    task: int
    state: str
    reason: str = ""
    exit_code: int | None = None
    signal: int | None = None
    elapsed: str = ""

    @property
    def cell_state(self) -> CellState:
        """The queue panel's state."""
        if self.state in RUNNING:
            return CellState.RUNNING
        if self.state in PENDING:
            return CellState.PENDING
        if self.state == "COMPLETED" and (self.exit_code or 0) == 0:
            return CellState.OK
        return CellState.FAILED

    @property
    def rule_id(self) -> str:
        """The catalog rule for a terminal failure state (empty for others)."""
        return STATE_RULES.get(self.state, "")

    @property
    def text(self) -> str:
        """`PENDING (Resources)`, `FAILED exit=1`, `TIMEOUT`, `CANCELLED by signal 9`."""
        if self.state in PENDING and self.reason and self.reason != "None":
            return f"{self.state} ({self.reason})"
        if self.exit_code and self.state == "FAILED":
            return f"FAILED exit={self.exit_code}"
        if self.signal:
            return f"{self.state} signal {self.signal}"
        return self.state


def submitted_job(output: str) -> int:
    """The job id `sbatch` printed; ValueError when it printed none."""
    match = _SUBMITTED.search(output)
    if match is None:
        raise ValueError(f"sbatch printed no job id: {output.strip()[:200]!r}")
    return int(match["job"])


def small_int(text: str) -> int | None:
    """`text` as a Slurm number (ASCII digits, at most MAX_ID_DIGITS), else None."""
    return int(text) if _NUMBER.fullmatch(text) else None


def array_ranges(spec: str, last: int) -> list[range]:
    """`1-3,5,7-11:2%2` -> the ranges it names, clipped to tasks 0..`last` (the throttle after
    % is dropped). Ranges, not lists: a range is a few bytes however many tasks it spans."""
    out: list[range] = []
    for part in spec.split("%", 1)[0].split(","):
        match = _PART.match(part.strip())
        if match is None:
            continue
        low = int(match["low"])
        high = int(match["high"]) if match["high"] is not None else low
        step = int(match["step"]) if match["step"] else 1
        span = range(low, min(high, last) + 1, max(step, 1))
        if span:
            out.append(span)
    return out


class _Unset:
    """Array indices 0..last not yet given a state, found in near-constant time.

    Lines are read newest-last, so they are applied last-first and the first state an index
    gets is kept: every index is set once, and an index already set is skipped without being
    visited again (a union-find "next unset index" pointer), so a listing that repeats one
    huge range a million times costs a million look-ups, not a million times its length.
    """

    def __init__(self, last: int) -> None:
        self.last = last
        self._next: dict[int, int] = {}  # set index -> a later candidate; only set ones kept
        self.step_work = 0

    def _find(self, index: int) -> int:
        root = index
        while root in self._next:
            root = self._next[root]
        while index != root:  # path compression: later look-ups jump straight to root
            self._next[index], index = root, self._next[index]
        return root

    def take(self, span: range) -> Iterator[int]:
        """The indices of `span` not set yet, marking them set."""
        if not span or span.start > self.last:
            return
        if span.step == 1:
            index = self._find(span.start)
            while index < span.stop:
                self._next[index] = index + 1
                yield index
                index = self._find(index + 1)
            return
        for index in span:
            self.step_work += 1
            if self.step_work > MAX_STEP_WORK:
                return
            if self._find(index) == index:
                self._next[index] = index + 1
                yield index


def _lines_newest_first(text: str) -> Iterable[str]:
    return reversed(text.splitlines())


def parse_squeue(text: str, job: int, cells: int | None = None) -> dict[int, TaskState]:
    """`squeue -h -o '%i|%T|%r'` lines of one array job: pending ranges are expanded.

    Only tasks 0..`cells` (the queue's length; MAX_ARRAY_TASKS when unknown) are kept: a
    higher task names no cell. When a task is listed twice, the later line wins.
    """
    last = min(cells, MAX_ARRAY_TASKS) if cells is not None else MAX_ARRAY_TASKS
    unset = _Unset(last)
    tasks: dict[int, TaskState] = {}
    for line in _lines_newest_first(text):
        parts = line.strip().split("|")
        if len(parts) < 2:
            continue
        jobid, state = parts[0], parts[1]
        reason = parts[2] if len(parts) > 2 else ""
        if (m := _TASK.match(jobid)) and int(m["job"]) == job:
            spans = [range(int(m["task"]), int(m["task"]) + 1)]
        elif (m := _RANGE.match(jobid)) and int(m["job"]) == job:
            spans = array_ranges(m["spec"], last)
        else:
            continue
        for span in spans:
            for task in unset.take(span):
                tasks[task] = TaskState(task, state, reason)
        if len(tasks) > last:
            break  # every task 0..last has its newest state: older lines change nothing
    return dict(sorted(tasks.items()))


def parse_sacct(text: str, job: int, cells: int | None = None) -> dict[int, TaskState]:
    """`sacct -n -P --format=JobID,State,ExitCode,Elapsed` of one array job (tasks 0..`cells`,
    as in parse_squeue).

    Step lines (`123_4.batch`, `123_4.extern`) are skipped; the allocation line carries the
    task's state. `CANCELLED by 1000` is read as CANCELLED; `ExitCode 0:9` is a signal.
    """
    last = min(cells, MAX_ARRAY_TASKS) if cells is not None else MAX_ARRAY_TASKS
    tasks: dict[int, TaskState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or "." in parts[0]:
            continue
        match = _TASK.match(parts[0])
        if match is None or int(match["job"]) != job or int(match["task"]) > last:
            continue
        state = parts[1].split(" ", 1)[0]
        code, _, sig = parts[2].partition(":")
        task = int(match["task"])
        tasks[task] = TaskState(task, state, "", small_int(code), small_int(sig) or None,
                                parts[3] if len(parts) > 3 else "")
    return tasks


def merge(squeue: dict[int, TaskState], sacct: dict[int, TaskState]) -> dict[int, TaskState]:
    """sacct knows finished tasks; squeue knows the pending reason and is fresher for live ones."""
    merged = dict(sacct)
    merged.update(squeue)
    return merged


def parse_scontrol(text: str, job: int, cells: int | None = None) -> dict[int, TaskState]:
    """`scontrol -o show job JOB` (one line per array task): the states of tasks Slurm still
    remembers (MinJobAge), for clusters without accounting (`sacct` then says it is disabled).
    Tasks 0..`cells` only, as in parse_squeue."""
    last = min(cells, MAX_ARRAY_TASKS) if cells is not None else MAX_ARRAY_TASKS
    tasks: dict[int, TaskState] = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        task = small_int(fields.get("ArrayTaskId", ""))
        if fields.get("ArrayJobId") != str(job) or task is None or task > last:
            continue
        code, _, sig = fields.get("ExitCode", "").partition(":")
        tasks[task] = TaskState(task, fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                                small_int(code), small_int(sig) or None, fields.get("RunTime", ""))
    return tasks


def slurm_view(lines: tuple[QueueLine, ...], tasks: dict[int, TaskState]) -> QueueView:
    """The queue panel for a Slurm instance: cell i is array task i."""
    cells = []
    for line in lines:
        task = tasks.get(line.index)
        state = task.cell_state if task is not None else CellState.PENDING
        code = task.exit_code if task is not None and state is CellState.FAILED else None
        note = ""
        if task is not None and state is CellState.FAILED:
            note = task.text if task.state != "FAILED" else ""
        elif task is not None and state is CellState.PENDING and task.reason not in ("", "None"):
            note = f"({task.reason})"
        cells.append(CellView(line.index, line.name, line.task, line.epochs, state, code, note=note))
    running = next((c for c in cells if c.state is CellState.RUNNING), None)
    start = next((c.index for c in cells if c.state is not CellState.OK), None)
    done = bool(cells) and all(c.state in (CellState.OK, CellState.FAILED) for c in cells)
    return QueueView(tuple(cells), start, running, done, None)
