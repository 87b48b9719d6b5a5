"""The monitor's recorder over the durable store: what each tick changed, as store rows.

Once per tick, in one transaction (`Store.batch`), for every box:

- **samples** when a new probe record arrived since the last tick: GPU util and memory per
  GPU, disk and inode use per mount, cells done / failed / total, reachability, price per
  hour (the store writes a value only when it changed, or once a minute);
- **cell changes**: each cell whose state differs from the last one seen (the first sight of
  a cell in this process is recorded from `unknown`);
- **events**: each classified failure the first time it is seen (a repeat only bumps the
  tracker's count; the store keeps the first);
- **judgements**: started when one appears, ended when it is gone;
- **alerts** that just fired, and later each channel's delivery result;
- the alert latch (which episodes were already sent), so `watch --once` under cron does not
  repeat them on every run.

Retention (`Store.compact`, bounded work per call) runs every `COMPACT_EVERY_S`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.models.alerts import Alert
from cockpit.models.hostview import HostTracker
from cockpit.models.queue import CellState
from cockpit.models.snapshot import NA, Reachability
from cockpit.services.alerts.notify import ChannelResult
from cockpit.services.store.db import (
    Store,
    metric_disk,
    metric_gpu_mem,
    metric_gpu_util,
    metric_inodes,
)
from cockpit.services.watch.monitor import alert_cell

COMPACT_EVERY_S = 300.0
"""How often retention runs (bounded rows per call, so it never stalls a tick)."""
LATCH_KEY = "alert_latch"
"""The meta row holding the latch's open episodes (JSON list of keys)."""
MAX_LATCH_KEYS = 5000
"""Open episodes kept across runs: 200 boxes with a few open alerts each, with room."""
MAX_LATCH_BYTES = 1024 * 1024
"""Bytes of the stored latch read back (a damaged row must not exhaust memory)."""
AUDIT_POLL_S = 5.0
"""How often the audit log is read for new lines to mirror (teardowns are rare and slow)."""
MAX_AUDIT_READ = 1024 * 1024
"""Bytes of the audit log read per poll: a huge backlog is mirrored over several ticks."""
AUDIT_OFFSET_KEY = "audit_offset"


def _num(value: float | int | NA) -> float | None:
    return None if isinstance(value, NA) else float(value)


def box_values(tracker: HostTracker) -> dict[str, float | None]:
    """One box's numbers for the store's samples (None: unknown, stored as a gap)."""
    values: dict[str, float | None] = {}
    snap = tracker.snapshot
    if snap is not None:
        for gpu in snap.gpu.gpus:
            values[metric_gpu_util(gpu.index)] = _num(gpu.util_pct)
            values[metric_gpu_mem(gpu.index)] = _num(gpu.mem_pct)
        for mount in snap.mounts:
            values[metric_disk(mount.path)] = _num(mount.bytes_pct)
            values[metric_inodes(mount.path)] = _num(mount.inodes_pct)
    view = tracker.queue_view()
    if view.cells:
        values["cells.total"] = float(len(view.cells))
        values["cells.done"] = float(sum(c.state is CellState.OK for c in view.cells))
        values["cells.failed"] = float(sum(c.state is CellState.FAILED for c in view.cells))
    values["reachable"] = 1.0 if tracker.state.reachability is Reachability.CONNECTED else 0.0
    price = tracker.instance.price_per_hour
    values["price_h"] = float(price) if price is not None else None
    return values


@dataclass
class _Box:
    """What was last recorded for one box."""

    record_at: float | None = None
    cells: dict[str, str] = field(default_factory=dict)
    events: set[tuple[str, str]] = field(default_factory=set)
    judgements: dict[tuple[str, str, str], int] = field(default_factory=dict)


class StoreRecorder:
    """Writes the monitor's ticks into a `Store` (the one writer of the sweep's store)."""

    def __init__(self, store: Store, audit_log: Path | None = None) -> None:
        self.store = store
        self.boxes: dict[str, _Box] = {}
        self._compacted_at: float | None = None
        self.audit_log = audit_log
        """The append-only audit log mirrored into the store (None: not mirrored)."""
        self._audit_polled: float | None = None

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

    def _save_latch(self, active: set[tuple[str, ...]]) -> None:
        keys = sorted(list(key) for key in active)[:MAX_LATCH_KEYS]
        # Not `Store.set_meta`: that cuts values to a paragraph; a latch is a list.
        self.store.conn.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (LATCH_KEY, json.dumps(keys)))

    def record_tick(self, now: float, trackers: Mapping[str, HostTracker],
                    fresh: Sequence[Alert], active: set[tuple[str, ...]] | None = None) -> None:
        """Everything this tick changed, in one transaction."""
        store = self.store
        with store.batch():
            for name, tracker in trackers.items():
                self._box(name, tracker, now)
            for alert in fresh:
                store.alert(alert.key, alert.instance, alert.kind, alert.text, now,
                            cell=alert_cell(alert), detail=alert.detail)
            if active is not None:
                self._save_latch(active)
            if self._audit_polled is None or now - self._audit_polled >= AUDIT_POLL_S:
                self._audit_polled = now
                self._mirror_audit(set(trackers))
            store.touch(now)
        if self._compacted_at is None or now - self._compacted_at >= COMPACT_EVERY_S:
            self._compacted_at = now
            store.compact(now)

    def _mirror_audit(self, instances: set[str]) -> None:
        """Copy new audit lines about this sweep's boxes into the store.

        The audit log is shared by every sweep of this user (`custody/audit.py`); whichever
        process writes this sweep's store (the watcher, or a TUI when none runs) mirrors the
        lines that name one of its instances, from where it stopped (kept in the store)."""
        path = self.audit_log
        if path is None or not path.exists():
            return
        conn = self.store.conn
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (AUDIT_OFFSET_KEY,)).fetchone()
        try:
            offset = int(str(row[0])) if row is not None else 0
        except ValueError:
            offset = 0
        size = path.stat().st_size
        if offset > size:
            offset = 0  # the log was replaced: mirror it from its start
        if offset == size:
            return
        with path.open("rb") as handle:
            handle.seek(offset)
            chunk = handle.read(MAX_AUDIT_READ)
        end = chunk.rfind(b"\n") + 1
        if end == 0:
            return  # a line still being written (or one longer than a read): next poll
        for line in chunk[:end].splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and entry.get("instance") in instances:
                self.store.audit(entry)
        conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                     "SET value = excluded.value", (AUDIT_OFFSET_KEY, str(offset + end)))

    def _box(self, name: str, tracker: HostTracker, now: float) -> None:
        store = self.store
        box = self.boxes.setdefault(name, _Box())
        snap = tracker.snapshot
        if snap is not None and snap.observed_at != box.record_at:
            box.record_at = snap.observed_at
            store.sample(name, snap.observed_at, box_values(tracker))
        elif snap is None or tracker.state.reachability is not Reachability.CONNECTED:
            store.sample(name, now, {"reachable": 0.0})
        for cell in tracker.queue_view().cells:
            state = cell.state.value
            before = box.cells.get(cell.name)
            if before != state:
                box.cells[cell.name] = state
                store.cell_change(name, cell.name, before or "unknown", state, now,
                                  evidence=cell.evidence, epoch=cell.epoch or None,
                                  epochs=cell.epochs or None, exit_code=cell.exit_code)
        for event in tracker.failures.events:
            key = (event.key, event.cell)
            if key in box.events:
                continue
            box.events.add(key)
            store.event(name, event.cell, event.rule_id, event.klass, event.title, event.message,
                        event.first_at, exit_code=event.exit_code)
        current: dict[tuple[str, str, str], tuple[str, str, bool, str]] = {}
        for judgement in tracker.judgements(now):
            jkey = (judgement.kind, judgement.cell or "", judgement.subject)
            current[jkey] = (judgement.text, judgement.detail, judgement.alarm, judgement.subject)
        for jkey, jid in list(box.judgements.items()):
            if jkey not in current:
                store.judgement_ended(jid, now)
                del box.judgements[jkey]
        for jkey, (text, detail, alarm, subject) in current.items():
            if jkey not in box.judgements:
                box.judgements[jkey] = store.judgement_started(
                    name, jkey[0], text, now, cell=jkey[1], subject=subject, detail=detail,
                    alarm=alarm)

    def record_delivery(self, alert: Alert, now: float, results: Sequence[ChannelResult]) -> None:
        """Each channel's result for one alert, attached to the alert's row."""
        store = self.store
        with store.batch():
            alert_id = store.alert_id(alert.key)
            if alert_id is None:
                return
            for result in results:
                store.delivery(alert_id, result.channel, result.ok, result.attempts, result.error,
                               now)

    def close(self) -> None:
        """Close the store (releases the writer lock)."""
        self.store.close()
