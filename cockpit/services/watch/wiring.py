"""How `cockpit watch` (and the TUI) plug the monitor into the store and the channels.

Kept apart from `daemon` so the watcher can be driven in tests with other parts, and so the
subsystems it joins (store, alerts/notify) are imported only when a watcher really runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from cockpit.models.alerts import Alert
from cockpit.services.alerts.notify import ChannelResult
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.services.watch.monitor import Monitor, Recorder


def deliver_for(loaded: LoadedSweep) -> Callable[[Alert], Awaitable[Sequence[ChannelResult]]] | None:
    """The sweep's channels (desktop, webhook, apprise URLs) as one `deliver(alert)`, with
    their rate limits; None when none is configured."""
    from cockpit.services.alerts.notify import Notifier

    settings = loaded.sweep.alerts
    if not (settings.webhook or settings.desktop or settings.notify):
        return None
    return Notifier(settings, loaded.sweep.sweep).deliver


def serve_metrics(host: str, port: int, monitor: Monitor) -> Callable[[], None]:
    """The OpenMetrics endpoint over the monitor's trackers (re-read each publish, so a SIGHUP
    that changes the boxes changes the metrics); the returned handle stops it when called."""
    from cockpit.services.metrics.endpoint import serve

    return serve(host, port, lambda: list(monitor.trackers.values()))


def metrics_url(watch: Any) -> str:
    """The scrape URL of a running watcher's endpoint ("" when it serves none)."""
    return str(getattr(watch.metrics_handle, "url", ""))


def store_path(loaded: LoadedSweep, override: Path | None = None) -> Path:
    """The sweep's store: `--db`, else `$XDG_DATA_HOME/cockpit/<sweep>.db`."""
    if override is not None:
        return override
    import re

    from cockpit.services.config.paths import data_dir

    safe = re.sub(r"[^A-Za-z0-9._-]", "_", loaded.sweep.sweep)[:100].lstrip(".") or "sweep"
    return data_dir() / f"{safe}.db"


def open_store(loaded: LoadedSweep, db_path: Path | None) -> tuple[Recorder | None, Callable[[], None]]:
    """The sweep's store opened as its one writer (no store yet: nothing is recorded)."""
    return None, lambda: None
