"""Material events worth interrupting someone for, each delivered once per episode.

An alert is a condition that is true now (a cell failed, the box has been stale for five
minutes, a mount is at 90%, the GPUs idle while billing, the whole queue finished so the
results can be verified). `AlertLatch` remembers which conditions are already known: a
condition fires when it first becomes true and not again on every tick; once it clears, a
new episode fires again. Pure: the UI rings the bell and shows a toast, the notify service
sends desktop notifications and webhooks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cockpit.models.durations import format_duration
from cockpit.models.queue import CellState
from cockpit.models.snapshot import Reachability

if TYPE_CHECKING:
    from cockpit.models.hostview import HostTracker

STALE_ALERT_S = 300.0
"""A box unreachable this long is worth an alert (shorter drops are routine)."""


@dataclass(frozen=True)
class Alert:
    """One material event."""

    key: tuple[str, ...]
    """Identifies the episode: the same key on the next tick is the same event."""
    instance: str
    kind: str
    text: str
    detail: str = ""

    def payload(self, sweep: str) -> dict[str, str]:
        """The JSON body a webhook receives."""
        return {"sweep": sweep, "instance": self.instance, "kind": self.kind, "text": self.text,
                "detail": self.detail}


def material(tracker: HostTracker, now: float) -> list[Alert]:
    """The material conditions of one box right now."""
    name = tracker.instance.name
    state = tracker.state
    out: list[Alert] = []
    if state.reachability in (Reachability.STALE, Reachability.UNREACHABLE) and \
            now - state.since >= STALE_ALERT_S:
        out.append(Alert(("stale", name, f"{state.since:.0f}"), name, "stale",
                         f"{name}: unreachable for {format_duration(now - state.since)}",
                         "The link is down; the run and its billing are unknown, not dead."))
    for judgement in tracker.judgements(now):
        if judgement.kind == "failed" and judgement.cell:
            finished = tracker.queue_log.finished.get(judgement.cell)
            when = f"{finished.at:.0f}" if finished else ""
            out.append(Alert(("failed", name, judgement.cell, when), name, "cell-failed",
                             f"{name}: {judgement.text}", judgement.detail))
        elif judgement.kind == "disk-pressure":
            out.append(Alert(("disk", name, judgement.subject), name, "disk-pressure",
                             f"{name}: {judgement.text}", judgement.detail))
        elif judgement.kind == "idle-burn":
            out.append(Alert(("idle", name, f"{tracker.idle_since or 0:.0f}"), name, "idle-burn",
                             f"{name}: {judgement.text}", judgement.detail))
    view = tracker.queue_view()
    if view.cells and all(c.state in (CellState.OK, CellState.FAILED) for c in view.cells) and \
            tracker.alive is False:
        ok = sum(c.state is CellState.OK for c in view.cells)
        out.append(Alert(("done", name, str(len(view.cells))), name, "queue-done",
                         f"{name}: all {len(view.cells)} cells finished ({ok} ok): verify now",
                         "Every cell has finished; pull and verify before anything is torn down."))
    return out


@dataclass
class AlertLatch:
    """Fires each alert once per episode."""

    active: set[tuple[str, ...]] = field(default_factory=set)

    def update(self, instance: str, alerts: Iterable[Alert]) -> list[Alert]:
        """This box's current alerts in; the ones that just became true out."""
        current = list(alerts)
        keys = {a.key for a in current}
        fresh = [a for a in current if a.key not in self.active]
        # Forget this box's episodes that ended, so a new one fires again.
        self.active = {k for k in self.active if k[1] != instance} | keys
        return fresh
