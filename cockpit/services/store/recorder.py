"""`TrackerRecorder`: the monitor's `Recorder`, turning each tick's trackers into store rows.

The monitor calls `record_tick(now, trackers, fresh)` once a tick and `record_delivery(alert,
now, results)` when a channel answered; the watcher calls `record_snapshot(instance, at, seq,
record, base)` for each raw probe record (kept in memory, written at the next tick). Each
tick is one transaction:

- samples (`db.metric_*` names) from each box's newest snapshot, once per snapshot, plus
  reachability, queue counts and the price per hour every tick (unchanged values are not
  written again before the store's heartbeat);
- cell state changes, dated by the master log's own marks when it has them (a cell seen
  finished for the first time is dated by its FINISHED line, not by when we looked), and an
  epoch change of a running cell as a progress row;
- new classified failures (one row per failure kind and cell);
- judgement episodes (started when a judgement appears, ended when it goes);
- the alerts that just fired;
- every `AUDIT_POLL_S`, new lines of the teardown audit log about this sweep's boxes;
- every `COMPACT_EVERY_S`, one budgeted `compact` (retention).

What the store already holds when the recorder starts (cells' latest states, failures) is
read first, so a restarted watcher does not record the same change twice.
"""

from __future__ import annotations

import json
import os
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from cockpit.models.alerts import Alert
from cockpit.models.hostview import HostTracker
from cockpit.models.queue import CellState, CellView
from cockpit.models.snapshot import NA, Reachability
from cockpit.services.store.db import (
    CELLS_DONE,
    CELLS_FAILED,
    CELLS_TOTAL,
    PRICE_H,
    REACHABLE,
    Store,
    metric_disk,
    metric_gpu_mem,
    metric_gpu_util,
    metric_inodes,
)

AUDIT_POLL_S = 60.0
"""How often the audit log is read for new entries (teardowns are rare, minutes-slow)."""
COMPACT_EVERY_S = 60.0
"""How often retention runs (each run does bounded work; see `Store.compact`)."""
MAX_AUDIT_READ = 1 << 20
"""Bytes of the audit log read per poll (a long log is caught up over several polls)."""
MAX_ALERT_IDS = 1000
"""Alert key -> row id remembered for deliveries that answer later (then looked up in SQL)."""
MAX_PENDING_RECORDS = 1000
"""Boxes whose latest raw record waits for the next tick (one per box: newer replaces older)."""
MAX_KNOWN_EVENTS = 100_000
"""Failures remembered as already stored (each is a short tuple): far more than a sweep has."""


class ChannelOutcome(Protocol):
    """What `record_delivery` needs of a channel's result (the notify service's
    `ChannelResult`)."""

    @property
    def channel(self) -> str: ...
    @property
    def ok(self) -> bool | None: ...
    @property
    def attempts(self) -> int: ...
    @property
    def error(self) -> str: ...


@dataclass(frozen=True)
class _Pending:
    at: float
    seq: int
    data: bytes
    base: bool


def _parse_time(text: object) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class TrackerRecorder:
    """Writes what the monitor's trackers know into a `Store` (implements `Recorder`)."""

    def __init__(self, store: Store, *, audit_log: Path | None = None) -> None:
        self.store = store
        self.audit_log = audit_log
        self._seen_snapshot: dict[str, float] = {}
        last = store.last_cell_states()
        self._cells: dict[tuple[str, str], tuple[str, int]] = {
            key: (state, epoch) for key, (state, epoch, _) in last.items()}
        self._cell_at: dict[tuple[str, str], float] = {key: at for key, (_, _, at) in last.items()}
        self._events: set[tuple[str, str, str]] = store.known_events(MAX_KNOWN_EVENTS)
        self._open: dict[str, dict[tuple[str, str, str], int]] = {}
        self._alert_ids: OrderedDict[tuple[str, ...], int] = OrderedDict()
        self._pending: dict[str, _Pending] = {}
        self._pending_base: dict[str, _Pending] = {}
        self._last_compact = 0.0
        self._last_audit = 0.0

    # -- Recorder -------------------------------------------------------------------------
    def record_snapshot(self, instance: str, at: float, seq: int, record: bytes,
                        base: bool = False) -> None:
        """Keep a box's raw probe record for the next tick (newer replaces older; a base
        record is also kept as the box's base)."""
        if not record:
            return
        for table, wanted in ((self._pending, True), (self._pending_base, base)):
            if wanted and (instance in table or len(table) < MAX_PENDING_RECORDS):
                table[instance] = _Pending(at, seq, record, table is self._pending_base)

    def record_tick(self, now: float, trackers: Mapping[str, HostTracker],
                    fresh: Sequence[Alert]) -> None:
        """One tick: everything new since the last one, in one transaction."""
        with self.store.batch():
            for table in (self._pending_base, self._pending):
                for name, pending in table.items():
                    self.store.put_record(name, pending.at, pending.seq, pending.data,
                                          base=pending.base)
                table.clear()
            for name, tracker in trackers.items():
                self._box(name, tracker, now)
            for alert in fresh:
                aid = self.store.alert(alert.key, alert.instance, alert.kind, alert.text, now,
                                       cell=alert.cell, detail=alert.detail)
                self._alert_ids[alert.key] = aid
                while len(self._alert_ids) > MAX_ALERT_IDS:
                    self._alert_ids.popitem(last=False)
            self.store.touch(now)
        if self.audit_log is not None and now - self._last_audit >= AUDIT_POLL_S:
            self._last_audit = now
            self.mirror_audit(self.audit_log, set(trackers))
        if now - self._last_compact >= COMPACT_EVERY_S:
            self._last_compact = now
            self.store.compact(now)

    def record_delivery(self, alert: Alert, now: float,
                        results: Sequence[ChannelOutcome]) -> None:
        """How each channel took `alert` (labels are already free of secrets)."""
        aid = self._alert_ids.get(alert.key) or self.store.alert_id(alert.key)
        if aid is None:
            return
        with self.store.batch():
            for result in results:
                self.store.delivery(aid, result.channel, result.ok, result.attempts,
                                    result.error, now)

    # -- per box --------------------------------------------------------------------------
    def _box(self, name: str, tracker: HostTracker, now: float) -> None:
        values: dict[str, float | None] = {}
        snap = tracker.snapshot
        if snap is not None and self._seen_snapshot.get(name) != snap.observed_at:
            self._seen_snapshot[name] = snap.observed_at
            snap_values: dict[str, float | None] = {}
            for gpu in snap.gpu.gpus:
                snap_values[metric_gpu_util(gpu.index)] = _num(gpu.util_pct)
                snap_values[metric_gpu_mem(gpu.index)] = _num(gpu.mem_pct)
            for mount in snap.mounts:
                snap_values[metric_disk(mount.path)] = _num(mount.bytes_pct)
                snap_values[metric_inodes(mount.path)] = _num(mount.inodes_pct)
            self.store.sample(name, snap.observed_at, snap_values)
        connected = tracker.state.reachability is Reachability.CONNECTED
        values[REACHABLE] = 1.0 if connected else 0.0
        view = tracker.queue_view()
        if view.cells:
            values[CELLS_DONE] = float(sum(c.state in (CellState.OK, CellState.EARLIER)
                                           for c in view.cells))
            values[CELLS_FAILED] = float(sum(c.state is CellState.FAILED for c in view.cells))
            values[CELLS_TOTAL] = float(len(view.cells))
        values[PRICE_H] = tracker.instance.price_per_hour
        self.store.sample(name, now, values)
        for cell in view.cells:
            self._cell(name, tracker, cell, now)
        for event in tracker.failures.events:
            rule = event.rule_id or event.key
            ident = (name, event.cell, rule)
            if ident in self._events:
                continue
            if len(self._events) < MAX_KNOWN_EVENTS:
                self._events.add(ident)
            self.store.event(name, event.cell, rule, event.klass, event.title, event.message,
                             event.first_at, exit_code=event.exit_code)
        self._judgements(name, tracker, now)

    def _cell(self, name: str, tracker: HostTracker, cell: CellView, now: float) -> None:
        state = cell.state.value
        progress = tracker.progress.get(cell.name)
        epoch = cell.epoch if progress is not None and progress.unit == "epoch" else 0
        before = self._cells.get((name, cell.name))
        if before is not None and before == (state, epoch):
            return
        self._cells[(name, cell.name)] = (state, epoch)
        if before is None and cell.state is CellState.PENDING:
            return  # a pending cell seen for the first time is no change worth a row
        at = now
        started = tracker.queue_log.started.get(cell.name)
        finished = tracker.queue_log.finished.get(cell.name)
        if cell.state in (CellState.OK, CellState.FAILED) and finished is not None:
            at = finished.at
        elif cell.state is CellState.RUNNING and started is not None and \
                (before is None or before[0] != state):
            at = started.at
        # The box's own stamps (a FINISHED line's time) can predate what this recorder already
        # stored for the cell (`interrupted` when it saw no queue process, then the FINISHED
        # line arrives): a cell's changes stay in the order they were learned, or the report
        # would take the older state for the newer.
        at = max(at, self._cell_at.get((name, cell.name), at))
        self._cell_at[(name, cell.name)] = at
        self.store.cell_change(name, cell.name, before[0] if before else "", state, at,
                               evidence=cell.evidence, epoch=epoch or None,
                               epochs=cell.epochs or None, exit_code=cell.exit_code)

    def _judgements(self, name: str, tracker: HostTracker, now: float) -> None:
        current = {(j.kind, j.cell or "", j.subject): j for j in tracker.judgements(now)}
        open_ = self._open.setdefault(name, {})
        for key in [k for k in open_ if k not in current]:
            self.store.judgement_ended(open_.pop(key), now)
        for key, judgement in current.items():
            if key not in open_:
                open_[key] = self.store.judgement_started(
                    name, judgement.kind, judgement.text, now, cell=judgement.cell or "",
                    subject=judgement.subject, detail=judgement.detail, alarm=judgement.alarm)

    # -- audit mirror ---------------------------------------------------------------------
    def mirror_audit(self, path: Path, instances: set[str]) -> int:
        """Copy new lines of the audit log about `instances` into the store; how many.

        Reads from the offset stored last time (from 0 again if the file shrank), at most
        `MAX_AUDIT_READ` bytes and only whole lines."""
        try:
            size = os.path.getsize(path)
        except OSError:
            return 0
        offset = self.store.meta_int("audit_offset")
        if offset > size:
            offset = 0
        if offset == size:
            return 0
        with open(path, "rb") as handle:
            handle.seek(offset)
            chunk = handle.read(MAX_AUDIT_READ)
        end = chunk.rfind(b"\n")
        if end < 0:
            return 0
        copied = 0
        with self.store.batch():
            for line in chunk[: end + 1].splitlines():
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(entry, dict) or entry.get("instance") not in instances:
                    continue
                at = _parse_time(entry.get("time"))
                if self.store.audit(entry, at if at is not None else time.time()):
                    copied += 1
            self.store.set_meta("audit_offset", str(offset + end + 1))
        return copied


def _num(value: float | NA) -> float | None:
    return None if isinstance(value, NA) else float(value)
