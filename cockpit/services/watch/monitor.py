"""The fleet's judgement loop without a screen: trackers, alerts, the store and the channels.

`Monitor` is what the TUI and `cockpit watch` share. It feeds every fleet event to its box's
`HostTracker` (isolated: one event that fails is counted and dropped, never the loop), and on
each `tick` it judges every box, fires each material alert once per episode (`AlertLatch`),
hands the fresh alerts to a `Recorder` (the durable store) and to `deliver` (the notification
channels). It never prints and never touches Textual: the TUI rings the bell and shows a toast
for the alerts `tick` returns; `cockpit watch` writes a log line for them.

Delivery runs concurrently (`spawn` decides how: a Textual worker in the app, an asyncio task
in the watcher); its per-channel results go back to the recorder, so a failing channel shows up
in the store and in the TUI.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from cockpit.models.alerts import (
    Alert,
    AlertLatch,
    fold_job_cells,
    job_alerts,
    material,
    money_alerts,
)
from cockpit.models.billing import PlatformTruth, SweepBill, billing_row, build_bill
from cockpit.models.events import FleetEvent, HostStateChanged
from cockpit.models.history import HistoryItem
from cockpit.models.hostview import HostTracker
from cockpit.models.jobs import JobTracker, JobView, judge_job
from cockpit.models.rules import Rulebook
from cockpit.models.text import visible
from cockpit.services.alerts.notify import ChannelResult
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.services.platforms.base import PlatformClient

MAX_FIRED = 1000
"""Alerts remembered in memory (the store keeps them all): a session that runs for weeks and a
box whose condition flaps must not grow this without end."""
MAX_ERROR_TEXT = 300
"""Characters kept of an event that failed to be absorbed (it may quote a box's text)."""


class Recorder(Protocol):
    """Where the monitor writes what happened (the durable store)."""

    def record_tick(self, now: float, trackers: Mapping[str, HostTracker],
                    fresh: Sequence[Alert], active: set[tuple[str, ...]] | None = None) -> None: ...

    def load_latch(self) -> set[tuple[str, ...]]: ...

    def record_delivery(self, alert: Alert, now: float,
                        results: Sequence[ChannelResult]) -> None: ...


Deliver = Callable[[Alert], Awaitable[Sequence[ChannelResult]]]
Spawn = Callable[[Awaitable[Any]], object]


class Monitor:
    """Trackers, alert latch, recorder and channels for one sweep."""

    def __init__(
        self,
        loaded: LoadedSweep,
        rulebook: Rulebook,
        *,
        clock: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
        deliver: Deliver | None = None,
        spawn: Spawn | None = None,
    ) -> None:
        self.loaded = loaded
        self.rulebook = rulebook
        self.clock = clock
        self.recorder = recorder
        self.deliver = deliver
        self.spawn = spawn
        self.trackers: dict[str, HostTracker] = {
            inst.name: HostTracker(inst, loaded.profiles[inst.profile], rulebook)
            for inst in loaded.sweep.instances
        }
        self.jobs: dict[str, JobTracker] = {job.name: JobTracker(job) for job in loaded.sweep.jobs}
        """Job groups (the sweep's `jobs:`), fed the same records as their members' trackers."""
        self.job_views: dict[str, JobView] = {}
        """Each job group as judged on the last tick."""
        self.latch = AlertLatch()
        self.fired: deque[tuple[float, Alert]] = deque(maxlen=MAX_FIRED)
        """(when, alert) of every alert fired this session, oldest first."""
        self.errors = 0
        """Events that could not be absorbed (counted and dropped)."""
        self.last_error = ""
        self.record_errors = 0
        """Ticks the recorder failed on (the store is full, locked, gone): counted, not fatal."""
        self.last_record_error = ""
        self.truths: dict[str, PlatformTruth] = {}
        """The latest poll of each platform's API (state, price, balance); see `poll_platforms`."""
        self.failing_channels: dict[str, str] = {}
        """Channel label -> the last error of a channel whose latest delivery failed."""

    # -- input ------------------------------------------------------------------------------
    def absorb(self, event: FleetEvent) -> str | None:
        """Feed one fleet event to its box; the instance it changed, or None if it failed.

        Isolated: an event that makes the model fail (or names an unknown instance) is counted
        in `errors` with its reason and dropped; every other box goes on."""
        try:
            if isinstance(event, HostStateChanged):
                name = event.state.instance
                self.trackers[name].absorb_state(event.state)
            else:
                name = event.snapshot.instance
                self.trackers[name].absorb(event.snapshot)
                for job in self.jobs.values():
                    if name in job.local:
                        job.absorb(event.snapshot)
            return name
        except Exception as exc:  # isolation: one event, never the fleet
            self.errors += 1
            self.last_error = visible(f"{type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT])
            return None

    def attach_recorder(self, recorder: Recorder) -> None:
        """Record from now on; episodes an earlier run already reported are not sent again."""
        self.recorder = recorder
        try:
            self.latch.active |= recorder.load_latch()
        except Exception as exc:  # a damaged latch row: report once more rather than stop
            self.record_errors += 1
            self.last_record_error = visible(f"{type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT])

    def reload(self, loaded: LoadedSweep) -> None:
        """A re-read sweep: boxes that stay keep their history, new ones start, gone ones go."""
        self.loaded = loaded
        old = self.trackers
        self.trackers = {}
        for inst in loaded.sweep.instances:
            kept = old.get(inst.name)
            profile = loaded.profiles[inst.profile]
            if kept is not None and kept.instance == inst and kept.profile == profile:
                self.trackers[inst.name] = kept
            else:
                self.trackers[inst.name] = HostTracker(inst, profile, self.rulebook)
        old_jobs = self.jobs
        self.jobs = {job.name: old_jobs[job.name] if job.name in old_jobs and
                     old_jobs[job.name].job == job else JobTracker(job)
                     for job in loaded.sweep.jobs}
        self.job_views = {k: v for k, v in self.job_views.items() if k in self.jobs}

    # -- judgement --------------------------------------------------------------------------
    def tick(self, now: float | None = None) -> list[Alert]:
        """Judge every box; the alerts that just became true (each once per episode).

        Records the tick (samples, state changes, events and the fresh alerts) and sends each
        fresh alert on. A box whose judgement fails is skipped this tick and counted."""
        now = self.clock() if now is None else now
        fresh: list[Alert] = []
        sweep = self.loaded.sweep
        for name, tracker in self.trackers.items():
            try:
                job = sweep.job_of(name)
                # A member's own failure of the job's cell is the job's cause or a symptom:
                # reported once, by the job's alert below.
                current = fold_job_cells(material(tracker, now), job.log_cell if job else None)
            except Exception as exc:  # isolation: one box's judgement, never the others
                self.errors += 1
                self.last_error = visible(f"{name}: {type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT])
                continue
            fresh.extend(self.latch.update(name, current))
        for job_name, job_tracker in self.jobs.items():
            try:
                view = self.job_views[job_name] = judge_job(job_tracker, self.trackers, now)
                fresh.extend(self.latch.update(f"job:{job_name}", job_alerts(view)))
            except Exception as exc:  # isolation: one job's judgement, never the boxes
                self.errors += 1
                self.last_error = visible(
                    f"job {job_name}: {type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT])
        try:
            fresh.extend(self._money(now))
        except Exception as exc:  # isolation: a surprise in the money model, never the boxes
            self.errors += 1
            self.last_error = visible(f"money: {type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT])
        self.fired.extend((now, alert) for alert in fresh)
        if self.recorder is not None:
            try:
                self.recorder.record_tick(now, self.trackers, fresh, self.latch.active)
            except Exception as exc:  # the store failing must not stop the watching
                self.record_errors += 1
                self.last_record_error = visible(f"{type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT])
        if self.deliver is not None and self.spawn is not None:
            for alert in fresh:
                self.spawn(self._send(alert))
        return fresh

    def bill(self, now: float | None = None) -> SweepBill:
        """The sweep's bill: the cockpit's rows reconciled with the latest platform truth."""
        now = self.clock() if now is None else now
        trackers = self.trackers.values()
        ids = {t.instance.name: (t.profile.platform, t.instance.instance_id) for t in trackers}
        return build_bill([billing_row(t, now) for t in trackers], ids, self.truths, now)

    def _money(self, now: float) -> list[Alert]:
        """Money clocks past their thresholds (balance runway, contract end, a stopped box
        still billing), once per episode per platform, like any other alert."""
        if not self.truths:
            return []
        bill = self.bill(now)
        fresh: list[Alert] = []
        for platform in self.truths:
            fresh.extend(self.latch.update(f"platform:{platform}",
                                           money_alerts(platform, bill.clocks)))
        return fresh

    async def poll_platforms(self, clients: Sequence[PlatformClient]) -> None:
        """Poll the platforms' APIs for ever (`POLL_INTERVAL_S`, longer when one asked with a
        429's Retry-After); each answer, or why there is none, lands in `truths` and is
        judged on the next tick. Read-only; a slow API delays only its own next poll."""
        from cockpit.services.platforms import next_poll_s, poll_all

        while True:
            self.truths = await poll_all(clients, self.truths, self.clock())
            await asyncio.sleep(next_poll_s(self.truths))

    def session_history(self, instance: str | None = None) -> list[HistoryItem]:
        """This session's alerts as history items (newest first), optionally for one box."""
        return [HistoryItem(at, a.instance, a.kind, a.text, cell=a.cell, detail=a.detail)
                for at, a in reversed(self.fired) if instance is None or a.instance == instance]

    async def _send(self, alert: Alert) -> Sequence[ChannelResult]:
        """Deliver one alert on every channel and record how it went; never raises."""
        assert self.deliver is not None
        try:
            results = list(await self.deliver(alert))
        except Exception as exc:  # a channel library's bug must not end the watcher
            results = [ChannelResult("channels", False, 0,
                                     visible(f"{type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT]))]
        for result in results:
            if result.ok is False:
                self.failing_channels[result.channel] = result.error
            elif result.ok:
                self.failing_channels.pop(result.channel, None)
        if self.recorder is not None:
            try:
                self.recorder.record_delivery(alert, self.clock(), results)
            except Exception as exc:  # isolation, as in `tick`
                self.record_errors += 1
                self.last_record_error = visible(f"{type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT])
        return results
