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
from cockpit.models.jobs import JobState, JobView
from cockpit.models.queue import CellState
from cockpit.models.snapshot import Reachability
from cockpit.models.text import visible

if TYPE_CHECKING:
    from cockpit.models.billing import MoneyClock
    from cockpit.models.hostview import HostTracker

MESSAGE_LIMIT = 600
"""Characters of one notification message. A phone's lock screen shows a few lines; chat
apps take more, but SMS-sized channels would split a long one into many parts, and the full
evidence stays in the TUI and `cockpit report`."""
MESSAGE_LINE_LIMIT = 280
"""Characters of one line of a message (box and cell, what happened, what to do): a cell
name or a cause comes from a box's log and may be any length."""

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

    @property
    def cell(self) -> str:
        """The cell this alert is about ("" for a box-wide one): a failed cell's key names it."""
        return self.key[2] if self.kind == "cell-failed" and len(self.key) > 2 else ""

    def payload(self, sweep: str) -> dict[str, str]:
        """The JSON body a webhook receives."""
        return {"sweep": sweep, "instance": self.instance, "kind": self.kind, "text": self.text,
                "detail": self.detail}

    def message(self, sweep: str) -> str:
        """The short plain-text notification (chat apps, e-mail, ntfy): the sweep and box, the
        cell when there is one, what happened, and what to do.

        Three lines of at most `MESSAGE_LINE_LIMIT` characters, `MESSAGE_LIMIT` in all. The
        cell name, the cause and the advice quote a box's logs: each is passed through
        `visible` (controls and newlines shown, never obeyed) and sent as text, never markup.
        """
        cell = self.key[2] if self.kind == "cell-failed" and len(self.key) > 2 else ""
        where = f"{self.instance}, cell {cell}" if cell else self.instance
        what = self.text.removeprefix(f"{self.instance}: ")
        lines = [f"cockpit {sweep}: {where}", what]
        if self.detail:
            lines.append(f"Next: {self.detail}")
        shown = [visible(line, limit=MESSAGE_LINE_LIMIT) for line in lines]
        return visible("\n".join(shown), one_line=False, limit=MESSAGE_LIMIT)


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
        elif judgement.kind == "gpu-failed":  # nvidia-smi / NVML failed, or a GPU is lost
            out.append(Alert(("gpu", name, judgement.subject), name, "gpu-failed",
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


MONEY_ALERT_KINDS = ("balance-runway", "contract-end", "stopped-billing")
"""Alerts read from platform truth (`cockpit.models.billing`): a balance that runs out within
RUNWAY_ALERT_HOURS (24 h, then 4 h), a vast.ai contract that ends within CONTRACT_ALERT_HOURS,
and a stopped instance whose storage still bills."""


def money_alerts(platform: str, clocks: Iterable[MoneyClock]) -> list[Alert]:
    """The material money clocks of one platform's account, as alerts.

    Keyed under `platform:<name>` (never a box's name), so the latch is updated per platform
    with `AlertLatch.update(f"platform:{platform}", ...)` and a box's own tick never clears
    them; the threshold is in the key, so crossing 4 h after 24 h fires once more."""
    owner = f"platform:{platform}"
    out: list[Alert] = []
    for clock in clocks:
        if clock.platform != platform:
            continue
        if clock.kind == "runway" and clock.threshold_h is not None:
            out.append(Alert(("money", owner, "runway", f"{clock.threshold_h:g}"), clock.instance,
                             "balance-runway", clock.text,
                             "Top up the balance, or pull what matters before the platform acts."))
        elif clock.kind == "contract-end" and clock.threshold_h is not None:
            out.append(Alert(("money", owner, clock.instance, "contract", f"{clock.threshold_h:g}"),
                             clock.instance, "contract-end", clock.text,
                             "Pull and verify before the end date, or extend the contract."))
        elif clock.kind == "stopped-billing":
            out.append(Alert(("money", owner, clock.instance, "stopped"), clock.instance,
                             "stopped-billing", clock.text,
                             "Destroy it once its data is verified elsewhere, or start it again."))
    return out


JOB_ALERT_KINDS = ("job-failed", "job-stalled")
"""Alerts about a job group as one job (`cockpit.models.jobs`): one for the job's failure,
naming the cause and its box, and one when it is stalled in a collective."""


def job_alerts(view: JobView) -> list[Alert]:
    """The material conditions of one job group, keyed under `job:<name>` (update the latch
    with `AlertLatch.update(f"job:{name}", ...)`). The alert's box is the cause's box."""
    owner = f"job:{view.name}"
    if view.state is JobState.FAILED and view.settled:
        # One alert per failure episode: the key does not hold the cause, which settles first.
        cause = view.cause
        where = cause.instance if cause is not None else view.instances[0]
        return [Alert(("job", owner, "failed"), where,
                      "job-failed", f"{where}: job {view.name} {view.text}", view.detail)]
    if view.state is JobState.STALLED:
        return [Alert(("job", owner, "stalled"), view.instances[0], "job-stalled",
                      f"{view.instances[0]}: job {view.name} {view.text}", view.detail)]
    return []


def fold_job_cells(alerts: Iterable[Alert], job_cell: str | None) -> list[Alert]:
    """A member box's alerts without its own cell-failed alert for the job's cell: that
    failure is the job's cause or one of its symptoms, reported once by `job_alerts`."""
    return [a for a in alerts
            if job_cell is None or not (a.kind == "cell-failed" and len(a.key) > 2
                                        and a.key[2] == job_cell)]


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
