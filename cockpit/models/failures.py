"""The failure log: classified events per cell, collapsed with a repeat count.

Findings come from each cell's own log (`<name>.log`) through a `LogClassifier`; the tee'd
master log is never scanned for crashes, because it repeats earlier cells' output
(platform-facts §5.3). The master log's FINISHED lines add what only they know: the exit
code. A non-zero exit with no finding in the cell's log is still an event — named by the
rule that explains the code (137: host OOM, 2: durable sync failed) or left unclassified —
and it gives way to the real cause when that arrives from the log a tick later.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cockpit.models.classify import Finding
from cockpit.models.rules import TIERS, Rule, Rulebook

UNCLASSIFIED = "unclassified"
TEXT_RANK = TIERS.index("text")
"""An event without a rule (a bare exit code) ranks as text: any signal or driver line wins."""


@dataclass
class FailureEvent:
    """One kind of failure in one cell, with how often and when it was seen."""

    key: str
    """What collapses repeats: the rule id (plus the exception type for generic ones)."""
    cell: str
    klass: str
    title: str
    first_at: float
    last_at: float
    message: str
    remediation: str
    rule_id: str = ""
    retry: bool | None = None
    line_no: int | None = None
    frame: str = ""
    count: int = 1
    exit_code: int | None = None
    rank: int = TEXT_RANK
    """The rule's evidence tier as a number (`Rule.rank`): lower is stronger evidence."""

    @property
    def severe(self) -> bool:
        """A class that means the run is lost or the box unsafe."""
        return self.klass in ("real-bug", "host-oom", "hardware", "disk-full")


def _exit_event(cell: str, code: int, at: float, rule: Rule | None) -> FailureEvent:
    if rule is None:
        return FailureEvent(f"exit:{code}", cell, UNCLASSIFIED, f"exit {code}", at, at,
                            f"{cell} exited {code}",
                            f"Read {cell}.log (the per-run log, not the master log).",
                            exit_code=code)
    return FailureEvent(rule.id, cell, rule.klass, rule.spec.title, at, at,
                        f"{cell} exited {code}", rule.remediation, rule.id, rule.spec.retry,
                        exit_code=code, rank=rule.rank)


@dataclass
class FailureLog:
    """Events in first-seen order, collapsed by (event key, cell)."""

    events: list[FailureEvent] = field(default_factory=list)
    _index: dict[tuple[str, str], FailureEvent] = field(default_factory=dict)
    version: int = 0
    """Bumped on every change so a view can skip redrawing an unchanged log."""

    def _insert(self, event: FailureEvent) -> FailureEvent:
        self.events.append(event)
        self._index[(event.key, event.cell)] = event
        return event

    def _drop(self, event: FailureEvent) -> None:
        self.events.remove(event)
        del self._index[(event.key, event.cell)]

    def add(self, cell: str, finding: Finding, at: float) -> FailureEvent:
        """Record a finding from `cell`'s log, or count a repeat of one already recorded."""
        self.version += 1
        event = self._index.get((finding.key, cell))
        if event is not None and event.line_no is not None:
            event.count += 1
            event.last_at = max(event.last_at, at)
            event.message, event.line_no = finding.excerpt, finding.line_no
            event.frame = finding.frame or event.frame
            return event
        exit_code = None
        for stale in [e for e in self.events if e.cell == cell and e.line_no is None]:
            # An exit-code event that arrived before the log explained it gives way.
            exit_code = stale.exit_code
            self._drop(stale)
        rule = finding.rule
        return self._insert(FailureEvent(
            finding.key, cell, rule.klass, rule.spec.title, at, at, finding.excerpt,
            rule.remediation, rule.id, rule.spec.retry, finding.line_no, finding.frame,
            exit_code=exit_code, rank=rule.rank))

    def add_rule(self, cell: str, rule: Rule, at: float, message: str) -> FailureEvent:
        """An event named by a rule without a log line (a scheduler state such as TIMEOUT)."""
        self.version += 1
        event = self._index.get((rule.id, cell))
        if event is not None:
            return event
        return self._insert(FailureEvent(rule.id, cell, rule.klass, rule.spec.title, at, at,
                                         message, rule.remediation, rule.id, rule.spec.retry,
                                         rank=rule.rank))

    def cell_finished(self, cell: str, exit_code: int, at: float, rulebook: Rulebook,
                      runner_known: bool = False) -> None:
        """A FINISHED line: a non-zero exit is an event unless the log already explained it.
        `runner_known`: the exit came from the cockpit's own runner, whose codes mean what its
        rules say (see `Rulebook.for_exit`)."""
        if exit_code == 0:
            return
        self.version += 1
        explained = [e for e in self.events if e.cell == cell]
        if explained:
            for event in explained:
                event.exit_code = exit_code
            return
        self._insert(_exit_event(cell, exit_code, at, rulebook.for_exit(exit_code, runner_known)))

    def for_cell(self, cell: str) -> list[FailureEvent]:
        """The cell's events, most specific rule first (what a failed cell is blamed on)."""
        return [e for e in self.events if e.cell == cell]

    def cause(self, cell: str) -> FailureEvent | None:
        """What a failed cell is blamed on, in evidence order (issue 17): the strongest tier
        (scheduler state, signal, driver line, text, symptom), then the earliest line. An
        NCCL watchdog timeout gives way to the peer's error; an exit code alone ranks as text."""
        events = self.for_cell(cell)
        return min(events, key=lambda e: (e.rank, e.line_no if e.line_no is not None
                                          else float("inf"), e.first_at), default=None)

    def matching(self, needle: str) -> list[FailureEvent]:
        """Events whose rule, class, cell or message contains `needle` (case-insensitive)."""
        low = needle.lower()
        return [e for e in self.events
                if not low or any(low in part.lower() for part in
                                  (e.klass, e.cell, e.message, e.rule_id, e.title))]
