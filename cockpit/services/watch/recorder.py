"""The monitor's recorder: the store's `TrackerRecorder`, plus the alert latch across runs.

`TrackerRecorder` (services/store/recorder.py) turns each tick's trackers into store rows. The
watcher also needs to remember which alert episodes were already sent, so that `watch --once`
under cron (a new process every few minutes) and a restarted watcher do not send them again:
the latch's open keys are kept in the store's meta table after each tick.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from cockpit.models.alerts import Alert
from cockpit.models.hostview import HostTracker
from cockpit.services.store.db import Store
from cockpit.services.store.recorder import TrackerRecorder

LATCH_KEY = "alert_latch"
"""The meta row holding the latch's open episodes (a JSON list of keys)."""
MAX_LATCH_KEYS = 5000
"""Open episodes kept across runs: 200 boxes with a few open alerts each, with room."""
MAX_LATCH_BYTES = 1024 * 1024
"""Bytes of the stored latch read back (a damaged row must not exhaust memory)."""


class WatchRecorder(TrackerRecorder):
    """`TrackerRecorder` that also keeps the alert latch in the store."""

    def __init__(self, store: Store, *, audit_log: Path | None = None) -> None:
        super().__init__(store, audit_log=audit_log)
        self._saved: list[list[str]] | None = None

    def load_latch(self) -> set[tuple[str, ...]]:
        """The episodes already reported by an earlier run (empty when none was stored)."""
        row = self.store.conn.execute("SELECT value FROM meta WHERE key = ?", (LATCH_KEY,)).fetchone()
        if row is None or len(str(row[0])) > MAX_LATCH_BYTES:
            return set()
        try:
            keys = json.loads(str(row[0]))
        except ValueError:
            return set()
        if not isinstance(keys, list):
            return set()
        return {tuple(str(part) for part in key) for key in keys[:MAX_LATCH_KEYS]
                if isinstance(key, list)}

    def record_tick(self, now: float, trackers: Mapping[str, HostTracker],
                    fresh: Sequence[Alert], active: set[tuple[str, ...]] | None = None) -> None:
        """The store's tick, then the latch when it changed (its own small transaction)."""
        super().record_tick(now, trackers, fresh)
        if active is None:
            return
        keys = sorted(list(key) for key in active)[:MAX_LATCH_KEYS]
        if keys == self._saved:
            return
        with self.store.batch():
            # Not `Store.set_meta`: that cuts values to a paragraph; a latch is a list.
            self.store.conn.execute(
                "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (LATCH_KEY, json.dumps(keys)))
        self._saved = keys

    def close(self) -> None:
        """Close the store (releases the writer lock)."""
        self.store.close()
