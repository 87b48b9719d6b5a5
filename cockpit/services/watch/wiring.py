"""How `cockpit watch` (and the TUI) plug the monitor into the store and the channels.

Kept apart from `daemon` so the watcher can be driven in tests with other parts, and so the
subsystems it joins (store, alerts/notify) are imported only when a watcher really runs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.models.alerts import Alert
from cockpit.models.events import FleetEvent
from cockpit.models.history import HistoryItem
from cockpit.services.alerts.notify import ChannelResult
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.services.watch.monitor import Monitor, Recorder

EventSource = Callable[[], AsyncIterator[FleetEvent]]


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
    from cockpit.services.store.db import default_db_path

    return override if override is not None else default_db_path(loaded.sweep.sweep)


def open_store(loaded: LoadedSweep, db_path: Path | None, *,
               role: str = "watch") -> tuple[Recorder | None, Callable[[], None]]:
    """The sweep's store opened as its one writer (raises `WriterBusy` naming the holder)."""
    from cockpit.services.custody.audit import audit_path
    from cockpit.services.store.db import Store
    from cockpit.services.watch.recorder import WatchRecorder

    store = Store.open(store_path(loaded, db_path), sweep=loaded.sweep.sweep, role=role)
    recorder = WatchRecorder(store, audit_log=audit_path())
    return recorder, recorder.close


@dataclass
class Session:
    """How one TUI session uses the sweep's store: as its writer, or as a watcher's follower."""

    db: Path
    source: EventSource | None = None
    """Fleet events from a running watcher's feed (None: the TUI probes the boxes itself)."""
    recorder: Recorder | None = None
    """Set when this TUI is the store's writer (no watcher runs)."""
    note: str = ""
    """One line for the title: whom it follows, or why history is not kept."""
    closers: list[Callable[[], None]] = field(default_factory=list)

    def history(self, instance: str | None) -> list[HistoryItem]:
        """The store's events list rows (a fresh read-only connection each time: the writer
        may be another process, and a reader never blocks it)."""
        from cockpit.services.store.db import StoreReader

        if not self.db.exists():
            return []
        with StoreReader(self.db) as reader:
            return reader.history(instance)

    def failing_channels(self) -> dict[str, str]:
        """Channels whose latest delivery recorded in the store failed (by whichever writer)."""
        from cockpit.services.store.db import StoreReader

        if not self.db.exists():
            return {}
        with StoreReader(self.db) as reader:
            return reader.failing_channels()

    def close(self) -> None:
        """Release what the session opened (the writer lock, if held)."""
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):
                close()
        self.closers.clear()


def open_session(loaded: LoadedSweep, db_override: Path | None = None, *,
                 probe: bool = False) -> Session:
    """The store side of `cockpit attach`.

    A running watcher (found by the lock beside the store) is followed: its feed replaces the
    TUI's own probes, unless `probe`. With no watcher, the TUI becomes the store's writer
    (role `attach`), so its history outlives it. A store that cannot be opened costs history,
    never the session: the note says why."""
    from cockpit.services.store.lock import WriterBusy, find_writer
    from cockpit.services.watch.feed import feed_path, follow

    db = store_path(loaded, db_override)
    session = Session(db)
    writer = find_writer(db)
    if writer is not None:
        feed = feed_path(db)
        if probe:
            session.note = f"history from {writer.describe()}; probing the boxes too (--probe)"
        elif feed.exists():
            names = {inst.name for inst in loaded.sweep.instances}
            session.source = lambda: follow(feed, names)
            session.note = f"following {writer.describe()}: no probes of its own"
        else:
            session.note = f"{writer.describe()} keeps no feed; probing the boxes"
        return session
    try:
        recorder, close = open_store(loaded, db, role="attach")
    except WriterBusy as exc:  # a watcher started this very moment
        session.note = f"history is kept by another writer: {exc}"
        return session
    except Exception as exc:  # a damaged or unwritable store: watch anyway, say so
        session.note = f"history is not kept this session: {type(exc).__name__}: {exc}"
        return session
    session.recorder = recorder
    session.closers.append(close)
    return session
