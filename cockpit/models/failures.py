"""The failure log: classified events with a repeat count, plus the first few signature rules.

Lines of a cell's own log (`<name>.log`, never the tee'd master log, which repeats earlier
cells' crashes: platform-facts §5.3) and the queue's FINISHED lines become events. An
event that recurs (the same class for the same cell) bumps a count instead of adding a row.
The classifier issue extends `RULES`; the log and the panel do not change with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Rule:
    """A log-line signature: catalog id, class, and what to do about it."""

    id: str
    klass: str
    pattern: re.Pattern[str]
    remediation: str


RULES: tuple[Rule, ...] = (
    Rule("U10", "cuda-oom", re.compile(r"CUDA out of memory|torch\.OutOfMemoryError"),
         "VRAM, not host RAM: check memory.free for a second job, shrink the batch or set "
         "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True. A real bug: don't retry blindly."),
    Rule("U7", "disk-full", re.compile(r"No space left on device|iostream error"),
         "Check df -h AND df -i on the data mount; stop new writers, prune proven scratch, "
         "keep best.pth. Retry once the cause is fixed."),
    Rule("O13", "nan-loss", re.compile(r"loss(?: is)?\s*[:=]?\s*(?:nan|inf)\b", re.IGNORECASE),
         "Numerics: fp16 overflow, log/div on bad inputs, LR spike. Same step every time means "
         "a corrupt sample. Don't retry blindly."),
    Rule("U9", "host-oom", re.compile(
        r"^Killed$|killed by signal: Killed|Out of memory: Killed|line \d+:\s+\d+ Killed\b"),
         "Host RAM (cgroup memory.max), not VRAM: size num_workers against memory.max."),
    Rule("S1", "sync-failed", re.compile(r"DURABLE SYNC (?:FAILED|BLOCKED)"),
         "The durable copy is missing or partial; the data-disk copy is the source of truth. "
         "Do not tear down. Check df -i on the durable mount, then re-sync."),
)

EXIT_REMEDIATION = {
    137: ("host-oom", "Exit 137 without a traceback is a cgroup RAM OOM kill; check memory.max."),
    2: ("sync-failed", "run_one.sh exits 2 when the durable sync failed: the copy is not safe."),
}


def classify_line(line: str) -> Rule | None:
    """The first rule whose signature matches `line`."""
    return next((rule for rule in RULES if rule.pattern.search(line)), None)


@dataclass
class FailureEvent:
    """One class of failure in one cell, with how often and when it was seen."""

    klass: str
    cell: str
    first_at: float
    last_at: float
    message: str
    remediation: str
    rule_id: str = ""
    count: int = 1


@dataclass
class FailureLog:
    """Events in first-seen order, de-duplicated by (class, cell)."""

    events: list[FailureEvent] = field(default_factory=list)
    _index: dict[tuple[str, str], FailureEvent] = field(default_factory=dict)
    version: int = 0
    """Bumped on every change so a view can skip redrawing an unchanged log."""

    def add(self, klass: str, cell: str, at: float, message: str, remediation: str,
            rule_id: str = "") -> FailureEvent:
        """Record an event, or count a repeat of one already recorded."""
        self.version += 1
        key = (klass, cell)
        event = self._index.get(key)
        if event is not None:
            event.count += 1
            event.last_at = max(event.last_at, at)
            event.message = message
            return event
        event = FailureEvent(klass, cell, at, at, message, remediation, rule_id)
        self.events.append(event)
        self._index[key] = event
        return event

    def scan(self, cell: str, lines: list[str], at: float) -> None:
        """Classify lines of one cell's own log."""
        for line in lines:
            rule = classify_line(line)
            if rule is not None:
                self.add(rule.klass, cell, at, line.strip()[:200], rule.remediation, rule.id)

    def cell_finished(self, cell: str, exit_code: int, at: float) -> None:
        """A FINISHED line with a non-zero exit code is an event even without a signature."""
        if exit_code == 0:
            return
        klass, remediation = EXIT_REMEDIATION.get(
            exit_code, ("cell-failed", f"Read {cell}.log (the per-run log, not the master log)."))
        self.add(klass, cell, at, f"{cell} exited {exit_code}", remediation)

    def matching(self, needle: str) -> list[FailureEvent]:
        """Events whose class, cell or message contains `needle` (case-insensitive)."""
        low = needle.lower()
        return [e for e in self.events
                if not low or low in e.klass.lower() or low in e.cell.lower()
                or low in e.message.lower()]
