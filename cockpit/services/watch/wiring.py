"""How `cockpit watch` (and the TUI) plug the monitor into the store and the channels.

Kept apart from `daemon` so the watcher can be driven in tests with other parts, and so the
subsystems it joins (store, alerts/notify) are imported only when a watcher really runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from cockpit.models.alerts import Alert
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.services.watch.monitor import ChannelResult, Recorder


def deliver_for(loaded: LoadedSweep) -> Callable[[Alert], Awaitable[Sequence[ChannelResult]]] | None:
    """The sweep's channels as one `deliver(alert)`; None when none is configured."""
    from cockpit.services.alerts import notify

    settings = loaded.sweep.alerts
    sweep = loaded.sweep.sweep
    if not (settings.webhook or settings.desktop):
        return None

    async def deliver(alert: Alert) -> Sequence[ChannelResult]:
        sent = await notify.deliver(alert, sweep, webhook_url=settings.webhook,
                                    desktop_enabled=settings.desktop)
        results: list[ChannelResult] = []
        if sent.desktop is not None:
            results.append(ChannelResult("desktop", sent.desktop, 1))
        if sent.webhook is not None:
            results.append(ChannelResult("webhook", sent.webhook, sent.attempts, sent.error))
        return results

    return deliver


def open_store(loaded: LoadedSweep, db_path: Path | None) -> tuple[Recorder | None, Callable[[], None]]:
    """The sweep's store opened as its one writer (no store yet: nothing is recorded)."""
    return None, lambda: None
