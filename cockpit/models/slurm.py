"""Slurm: one array job over the queue's cells, read back with `squeue` and `sacct`.

Array task i runs queue cell i (1-based, like `start_index`). `squeue -h -o '%i|%T|%r'`
shows pending and running tasks with the reason a task waits; `sacct -n -P
--format=JobID,State,ExitCode,Elapsed` shows every task that started, finished ones too.
Their states become the queue panel's cell states, and the terminal failure states name
the catalog rule that explains them (platform-facts §2.4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cockpit.models.queue import CellState, CellView, QueueLine, QueueView

_TASK = re.compile(r"^(?P<job>\d+)_(?P<task>\d+)$")
_RANGE = re.compile(r"^(?P<job>\d+)_\[(?P<spec>[^\]]+)\]$")
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


def _expand(spec: str) -> list[int]:
    """`1-3,5%2` -> [1, 2, 3, 5] (the throttle after % is dropped)."""
    out: list[int] = []
    for part in spec.split("%", 1)[0].split(","):
        if "-" in part:
            low, high = part.split("-", 1)
            out += list(range(int(low), int(high) + 1))
        elif part.isdigit():
            out.append(int(part))
    return out


def parse_squeue(text: str, job: int) -> dict[int, TaskState]:
    """`squeue -h -o '%i|%T|%r'` lines of one array job: pending ranges are expanded."""
    tasks: dict[int, TaskState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 2:
            continue
        jobid, state = parts[0], parts[1]
        reason = parts[2] if len(parts) > 2 else ""
        if (m := _TASK.match(jobid)) and int(m["job"]) == job:
            tasks[int(m["task"])] = TaskState(int(m["task"]), state, reason)
        elif (m := _RANGE.match(jobid)) and int(m["job"]) == job:
            for task in _expand(m["spec"]):
                tasks[task] = TaskState(task, state, reason)
    return tasks


def parse_sacct(text: str, job: int) -> dict[int, TaskState]:
    """`sacct -n -P --format=JobID,State,ExitCode,Elapsed` of one array job.

    Step lines (`123_4.batch`, `123_4.extern`) are skipped; the allocation line carries the
    task's state. `CANCELLED by 1000` is read as CANCELLED; `ExitCode 0:9` is a signal.
    """
    tasks: dict[int, TaskState] = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 3 or "." in parts[0]:
            continue
        match = _TASK.match(parts[0])
        if match is None or int(match["job"]) != job:
            continue
        state = parts[1].split(" ", 1)[0]
        code, _, sig = parts[2].partition(":")
        task = int(match["task"])
        tasks[task] = TaskState(task, state, "", int(code) if code.isdigit() else None,
                                int(sig) if sig.isdigit() and int(sig) else None,
                                parts[3] if len(parts) > 3 else "")
    return tasks


def merge(squeue: dict[int, TaskState], sacct: dict[int, TaskState]) -> dict[int, TaskState]:
    """sacct knows finished tasks; squeue knows the pending reason and is fresher for live ones."""
    merged = dict(sacct)
    merged.update(squeue)
    return merged


def parse_scontrol(text: str, job: int) -> dict[int, TaskState]:
    """`scontrol -o show job JOB` (one line per array task): the states of tasks Slurm still
    remembers (MinJobAge), for clusters without accounting (`sacct` then says it is disabled)."""
    tasks: dict[int, TaskState] = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if fields.get("ArrayJobId") != str(job) or not fields.get("ArrayTaskId", "").isdigit():
            continue
        task = int(fields["ArrayTaskId"])
        code, _, sig = fields.get("ExitCode", "").partition(":")
        tasks[task] = TaskState(task, fields.get("JobState", "UNKNOWN"), fields.get("Reason", ""),
                                int(code) if code.isdigit() else None,
                                int(sig) if sig.isdigit() and int(sig) else None,
                                fields.get("RunTime", ""))
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
