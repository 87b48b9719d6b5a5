"""The durable store of one sweep: SQLite in WAL mode, one writer, any number of readers.

Writer (`Store`, one process at a time, guarded by `lock.WriterLock`)::

    store = Store.open(path, sweep="ablation-nov", role="watch")   # raises WriterBusy
    with store.batch():                      # one transaction per tick: cheap at 200 hosts
        store.sample("a1", now, {"gpu0.util": 97.0, "disk:/data": 91.2, "reachable": 1.0})
        store.put_record("a1", now, seq, record_bytes, base=False)
        store.cell_change("a1", "cfg3", "running", "failed", now, evidence="exit=1")
        store.event("a1", "cfg3", "cuda-oom", "resource", "CUDA out of memory", excerpt, now)
        jid = store.judgement_started("a1", "stalled", "stalled 25m", now, cell="cfg3")
        store.judgement_ended(jid, later)
        aid = store.alert(("failed", "a1", "cfg3", "170000"), "a1", "cell-failed", text, now)
        store.delivery(aid, "slack://…", True, 1, "", now)
        store.touch(now)
    store.compact(now)                        # retention; bounded work per call
    store.close()

Reader (`StoreReader`, `mode=ro`; never blocks the writer, never writes)::

    reader = StoreReader(path)
    reader.samples("a1", "gpu0.util", since=t0)        # raw + 1-minute buckets, oldest first
    reader.alerts(since=t0, instance="a1", limit=50)   # newest first, with deliveries
    reader.events(...), reader.cell_changes(...), reader.judgements(...), reader.audit(...)
    reader.latest_records()                            # instance -> newest raw probe record
    reader.history(instance=None)                      # HistoryItems for the events list

Metric names (`metric_*` helpers): `gpu<i>.util`, `gpu<i>.mem` (percent), `disk:<mount>`,
`inodes:<mount>` (percent), `cells.done`, `cells.failed`, `cells.total`, `reachable` (1/0),
`price_h` (the sweep's price per hour).

Retention (`compact`):

- samples at full resolution for `RAW_KEEP_S` (24 h); older ones are folded into one-minute
  buckets (time-weighted average and maximum) kept `BUCKET_KEEP_S` (30 days), then deleted;
- cell changes, classified events, judgements, alerts and deliveries are kept
  `HISTORY_KEEP_S` (90 days: a post-mortem of a month-long sweep, with room to write it up);
- the audit mirror is never pruned: it is a handful of rows per sweep and answers "who tore
  this down, on what evidence" for as long as the file exists (the authoritative log is
  `audit.jsonl`, append-only).

A sample is written only when its value changed (rounded to `SAMPLE_DIGITS`) or
`HEARTBEAT_S` passed since the last one written, so constant series (cells total, price,
reachability) cost a row a minute, not one per probe.

Durability: `synchronous=NORMAL` in WAL mode. A `kill -9` of the writer loses nothing that
was committed (the WAL is in the OS page cache before COMMIT returns) and at most the
transaction in flight (the current tick); a power cut or kernel crash may also lose the last
transactions since the latest checkpoint, but never corrupts the file. `FULL` would fsync
every tick — 200 hosts at 1 Hz does not need that.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.models.history import MAX_ITEMS, HistoryItem
from cockpit.services.store.lock import WriterLock
from cockpit.services.store.schema import SCHEMA_VERSION, SchemaError, migrate

RAW_KEEP_S = 24 * 3600.0
"""Full-resolution samples are kept a day: enough to see a night's stall to the second."""
BUCKET_KEEP_S = 30 * 86400.0
"""One-minute buckets are kept 30 days: a month-long sweep's whole trend."""
HISTORY_KEEP_S = 90 * 86400.0
"""Events, changes, judgements, alerts and deliveries: 90 days, for the post-mortem."""
BUCKET_S = 60
"""Width of one aggregate bucket, seconds."""
HEARTBEAT_S = 60.0
"""An unchanged value is written again after this long, so a gap (no data) is told apart from
a constant; also caps the weight of one point in a bucket's average."""
SAMPLE_DIGITS = 1
"""Decimal places a sample is rounded to: percentages to 0.1, which is what screens show."""
DEFAULT_GAP_S = 2.0
"""The weight of a bucket's last point when the next one is not known (the probe interval)."""
COMPACT_ROWS = 20_000
"""Rows one `compact` call may fold or delete before it returns (a few tens of ms), so calling
it from the watcher's tick never stalls watching; it goes on where it stopped next time."""
COMPACT_SPAN_S = 6 * 3600.0
"""At most this much of one series' backlog is folded per step (a store reopened after weeks)."""
BUSY_TIMEOUT_MS = 5000
"""How long a statement waits for a lock held by another connection (a checkpoint, a reader
starting) before failing; the watcher counts a failed tick and goes on."""

MAX_NAME = 200
"""Characters of a box, cell, metric, rule, class, kind or channel name: they come from the
sweep and from a box's logs (cell names), and a name is never a paragraph."""
MAX_TITLE = 200
"""Characters of a rule's title or a judgement's short text."""
MAX_TEXT = 600
"""Characters of an alert's text or a failure's message excerpt (as a notification holds)."""
MAX_DETAIL = 1000
"""Characters of evidence and advice (a judgement's or an alert's detail)."""
MAX_EVIDENCE = 400
"""Characters of a cell change's evidence (`master log: FINISHED exit=1; own log: ...`)."""
MAX_ERROR = 300
"""Characters of a channel's delivery error (an HTTP body may follow the status)."""
MAX_RECORD_BYTES = 512 * 1024
"""Bytes of one stored raw probe record. A record carries at most the probe's per-tick log
budget plus small sections; one past this is not stored (a cut record would not parse)."""
MAX_AUDIT_BYTES = 16 * 1024
"""Bytes of one mirrored audit entry as JSON (a teardown's output tail is already cut)."""
MAX_SWEEP_FILE_NAME = 80
"""Characters of the sweep name used in the DB's file name (a hash keeps them unique)."""


def cut(text: str | None, limit: int) -> str:
    """`text` bounded to `limit` characters (NUL removed: it ends strings in some readers)."""
    if not text:
        return ""
    text = text.replace("\x00", "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def metric_gpu_util(index: int) -> str:
    """GPU `index`'s utilisation, percent."""
    return f"gpu{index}.util"


def metric_gpu_mem(index: int) -> str:
    """GPU `index`'s memory in use, percent."""
    return f"gpu{index}.mem"


def metric_disk(mount: str) -> str:
    """Bytes in use on the mount holding `mount`, percent."""
    return f"disk:{mount}"


def metric_inodes(mount: str) -> str:
    """Inodes in use on the mount holding `mount`, percent."""
    return f"inodes:{mount}"


CELLS_DONE, CELLS_FAILED, CELLS_TOTAL = "cells.done", "cells.failed", "cells.total"
REACHABLE, PRICE_H = "reachable", "price_h"


def db_file_name(sweep: str) -> str:
    """A safe file name for a sweep's store: `[A-Za-z0-9._-]` kept, others `_`, plus a short
    hash of the real name when anything was changed (so `a/b` and `a_b` stay apart)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", sweep)[:MAX_SWEEP_FILE_NAME].lstrip(".") or "sweep"
    if safe != sweep:
        safe += "-" + hashlib.sha256(sweep.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return safe + ".db"


def default_db_path(sweep: str) -> Path:
    """`$XDG_DATA_HOME/cockpit/<sweep>.db` (`COCKPIT_DATA_DIR` overrides the folder)."""
    from cockpit.services.config.paths import data_dir

    return data_dir() / db_file_name(sweep)


def _connect_rw(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    # NORMAL in WAL: kill -9 loses no committed tick; a power cut may lose the latest ticks
    # (not yet checkpointed to disk) but never corrupts the file. See the module docstring.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


class Store:
    """The one writer of a sweep's store (see the module docstring for the API)."""

    def __init__(self, conn: sqlite3.Connection, path: Path, lock: WriterLock | None) -> None:
        self.conn = conn
        self.path = path
        self._lock = lock
        self._depth = 0
        self._series: dict[tuple[str, str], int] = {}
        self._last: dict[int, tuple[float, float]] = {}
        """series -> (value, at) of the last sample written this session."""
        self._compact_cursor = 0
        self.skipped_records = 0
        """Raw records not stored because they were over `MAX_RECORD_BYTES`."""

    @classmethod
    def open(cls, path: Path, *, sweep: str, role: str = "watch") -> Store:
        """Take the writer lock (raises `WriterBusy`), create or migrate the file, and close
        judgements a previous writer left open (at its last tick: after it, nothing is known)."""
        lock = WriterLock(path, role)
        try:
            try:
                conn = _connect_rw(path)
                migrate(conn)
            except sqlite3.DatabaseError as exc:  # "file is not a database", a torn header
                raise SchemaError(f"{path} is not a cockpit store ({exc}); move it aside") from exc
            store = cls(conn, path, lock)
            with store.batch():
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('sweep', ?)", (cut(sweep, MAX_NAME),))
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('created_at', ?)", (repr(time.time()),))
                row = conn.execute("SELECT value FROM meta WHERE key = 'last_tick'").fetchone()
                if row is not None:
                    conn.execute("UPDATE judgements SET ended_at = MAX(started_at, ?) "
                                 "WHERE ended_at IS NULL", (float(row[0]),))
                else:
                    conn.execute("UPDATE judgements SET ended_at = started_at WHERE ended_at IS NULL")
        except BaseException:
            lock.release()
            raise
        return store

    # -- transactions ---------------------------------------------------------------------
    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around everything written inside (nested calls join the outer one).
        An exception rolls the whole batch back and is raised again."""
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
            return
        self.conn.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self._depth = 0
            self.conn.execute("ROLLBACK")
            self._last.clear()  # rows this batch claimed to write are gone,
            self._series.clear()  # and so are series it created
            raise
        self._depth = 0
        self.conn.execute("COMMIT")

    def close(self) -> None:
        """Commit nothing pending (batches already did), checkpoint, close, release the lock."""
        try:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("PRAGMA optimize")
            self.conn.close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    # -- writes ---------------------------------------------------------------------------
    def set_meta(self, key: str, value: str) -> None:
        """One meta value (bounded)."""
        self.conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE "
                          "SET value = excluded.value", (cut(key, MAX_NAME), cut(value, MAX_DETAIL)))

    def touch(self, now: float) -> None:
        """The writer was alive and judging at `now` (the report's "watched until")."""
        self.set_meta("last_tick", repr(float(now)))

    def meta_int(self, key: str, default: int = 0) -> int:
        """A meta value as an integer (`default` when absent or not a number)."""
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        try:
            return int(row[0]) if row else default
        except ValueError:
            return default

    def last_cell_states(self) -> dict[tuple[str, str], tuple[str, int, float]]:
        """(instance, cell) -> (latest state, epoch, time) as stored: where a restarted recorder
        goes on from (it never stores a change of that cell before that time)."""
        rows = self.conn.execute(
            "SELECT instance, cell, to_state, COALESCE(epoch, 0), at FROM cell_changes WHERE id IN "
            "(SELECT MAX(id) FROM cell_changes GROUP BY instance, cell)")
        return {(str(i), str(c)): (str(s), int(e), float(a)) for i, c, s, e, a in rows}

    def known_events(self, limit: int) -> set[tuple[str, str, str]]:
        """(instance, cell, rule) of the newest `limit` stored failures."""
        rows = self.conn.execute("SELECT instance, cell, rule FROM events ORDER BY id DESC "
                                 "LIMIT ?", (limit,))
        return {(str(i), str(c), str(r)) for i, c, r in rows}

    def series_id(self, instance: str, metric: str) -> int:
        """The interned id of one box's metric series (created on first use)."""
        key = (cut(instance, MAX_NAME), cut(metric, MAX_NAME))
        found = self._series.get(key)
        if found is not None:
            return found
        self.conn.execute("INSERT OR IGNORE INTO series (instance, metric) VALUES (?, ?)", key)
        row = self.conn.execute("SELECT id FROM series WHERE instance = ? AND metric = ?",
                                key).fetchone()
        self._series[key] = int(row[0])
        return int(row[0])

    def sample(self, instance: str, at: float, values: Mapping[str, float | None]) -> int:
        """One box's numbers at `at`; None and non-finite values are gaps. Writes a value only
        when it changed or `HEARTBEAT_S` passed; returns how many rows were written."""
        rows: list[tuple[int, float, float]] = []
        for metric, value in values.items():
            if value is None or not math.isfinite(value):
                continue
            value = round(float(value), SAMPLE_DIGITS)
            sid = self.series_id(instance, metric)
            last = self._last.get(sid)
            if last is not None and last[0] == value and at - last[1] < HEARTBEAT_S \
                    and at >= last[1]:
                continue
            rows.append((sid, float(at), value))
            self._last[sid] = (value, float(at))
        if rows:
            self.conn.executemany("INSERT OR REPLACE INTO samples VALUES (?, ?, ?)", rows)
        return len(rows)

    def put_record(self, instance: str, at: float, seq: int, data: bytes, *,
                   base: bool = False) -> bool:
        """Keep `data` as the box's latest raw probe record (and as its latest base record
        when it carries the master log's marks). False when over `MAX_RECORD_BYTES`."""
        if len(data) > MAX_RECORD_BYTES:
            self.skipped_records += 1
            return False
        kinds = ("latest", "base") if base else ("latest",)
        self.conn.executemany(
            "INSERT OR REPLACE INTO records (instance, kind, at, seq, data) VALUES (?, ?, ?, ?, ?)",
            [(cut(instance, MAX_NAME), kind, float(at), int(seq), data) for kind in kinds])
        return True

    def cell_change(self, instance: str, cell: str, from_state: str, to_state: str, at: float,
                    *, evidence: str = "", epoch: int | None = None, epochs: int | None = None,
                    exit_code: int | None = None) -> int:
        """A cell moved between states (`pending`, `running`, `finished ok`, `failed`, ...)."""
        cur = self.conn.execute(
            "INSERT INTO cell_changes (at, instance, cell, from_state, to_state, evidence, epoch,"
            " epochs, exit_code) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (float(at), cut(instance, MAX_NAME), cut(cell, MAX_NAME), cut(from_state, MAX_NAME),
             cut(to_state, MAX_NAME), cut(evidence, MAX_EVIDENCE), epoch, epochs, exit_code))
        return int(cur.lastrowid or 0)

    def event(self, instance: str, cell: str, rule: str, klass: str, title: str, message: str,
              at: float, *, exit_code: int | None = None) -> int:
        """A classified failure seen in a cell's log (or named by its exit code)."""
        cur = self.conn.execute(
            "INSERT INTO events (at, instance, cell, rule, class, title, message, exit_code) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (float(at), cut(instance, MAX_NAME), cut(cell, MAX_NAME), cut(rule, MAX_NAME),
             cut(klass, MAX_NAME), cut(title, MAX_TITLE), cut(message, MAX_TEXT), exit_code))
        return int(cur.lastrowid or 0)

    def judgement_started(self, instance: str, kind: str, text: str, at: float, *,
                          cell: str = "", subject: str = "", detail: str = "",
                          alarm: bool = True) -> int:
        """A judgement (stalled, idle-burn, stale, disk-pressure, ...) became true; its id."""
        cur = self.conn.execute(
            "INSERT INTO judgements (instance, cell, kind, subject, text, detail, alarm,"
            " started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (cut(instance, MAX_NAME), cut(cell, MAX_NAME), cut(kind, MAX_NAME),
             cut(subject, MAX_NAME), cut(text, MAX_TITLE), cut(detail, MAX_DETAIL),
             int(alarm), float(at)))
        return int(cur.lastrowid or 0)

    def judgement_ended(self, judgement_id: int, at: float) -> None:
        """The judgement stopped being true at `at`."""
        self.conn.execute("UPDATE judgements SET ended_at = ? WHERE id = ? AND ended_at IS NULL",
                          (float(at), judgement_id))

    def alert(self, key: Sequence[str], instance: str, kind: str, text: str, at: float, *,
              cell: str = "", detail: str = "") -> int:
        """A material alert fired (once per episode); its id, for `delivery`."""
        cur = self.conn.execute(
            "INSERT INTO alerts (fired_at, key, instance, cell, kind, text, detail) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (float(at), cut(alert_key(key), MAX_DETAIL), cut(instance, MAX_NAME),
             cut(cell, MAX_NAME), cut(kind, MAX_NAME), cut(text, MAX_TEXT),
             cut(detail, MAX_DETAIL)))
        return int(cur.lastrowid or 0)

    def alert_id(self, key: Sequence[str]) -> int | None:
        """The newest alert fired with `key` (to attach a delivery that finished later)."""
        row = self.conn.execute("SELECT id FROM alerts WHERE key = ? ORDER BY id DESC LIMIT 1",
                                (cut(alert_key(key), MAX_DETAIL),)).fetchone()
        return int(row[0]) if row else None

    def delivery(self, alert_id: int, channel: str, ok: bool | None, attempts: int, error: str,
                 at: float) -> None:
        """How one channel took one alert. `channel` must already be free of secrets (the
        notify service's label); `ok` None means skipped (rate-limited)."""
        self.conn.execute(
            "INSERT INTO deliveries (alert_id, at, channel, ok, attempts, error) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (alert_id, float(at), cut(channel, MAX_NAME), None if ok is None else int(ok),
             int(attempts), cut(error, MAX_ERROR)))

    def audit(self, entry: Mapping[str, Any], at: float | None = None) -> bool:
        """Mirror one audit-log entry (the shape `custody.audit.append_audit` writes). False
        when the entry is over `MAX_AUDIT_BYTES` as JSON (the jsonl log still has it)."""
        text = json.dumps(dict(entry), ensure_ascii=False, sort_keys=True, default=str)
        if len(text.encode()) > MAX_AUDIT_BYTES:
            return False
        when = time.time() if at is None else at
        self.conn.execute("INSERT INTO audit (at, instance, event, entry) VALUES (?, ?, ?, ?)",
                          (float(when), cut(str(entry.get("instance") or ""), MAX_NAME),
                           cut(str(entry.get("event") or ""), MAX_NAME), text))
        return True

    # -- retention ------------------------------------------------------------------------
    def compact(self, now: float, *, budget: int = COMPACT_ROWS) -> CompactResult:
        """Apply the retention policy, doing at most about `budget` rows of work.

        Series are visited round-robin from where the last call stopped; each step folds up
        to `COMPACT_SPAN_S` of one series' samples older than `RAW_KEEP_S` into one-minute
        buckets and deletes them. The pass is one transaction, so a reader sees a point either
        raw or bucketed, never both, never neither. Then old buckets and history rows go."""
        raw_cut = math.floor((now - RAW_KEEP_S) / BUCKET_S) * BUCKET_S
        bucket_cut = math.floor((now - BUCKET_KEEP_S) / BUCKET_S) * BUCKET_S
        result = CompactResult()
        ids = [int(r[0]) for r in self.conn.execute("SELECT id FROM series ORDER BY id")]
        if ids:
            start = next((i for i, sid in enumerate(ids) if sid >= self._compact_cursor), 0)
            order = ids[start:] + ids[:start]
            # One transaction for the whole pass (a commit per series cost more than the
            # folding at 2600 series); each fold is still atomic, as part of it.
            with self.batch():
                self._compact_cursor = 0
                for sid in order:
                    if result.rows >= budget:
                        self._compact_cursor = sid
                        result.more = True
                        break
                    done = False
                    while not done and result.rows < budget:
                        folded, done = self._fold(sid, raw_cut)
                        result.folded += folded
                    # after folding: a folded sample older than the buckets' keep expires now
                    cur = self.conn.execute(
                        "DELETE FROM buckets WHERE series = ? AND minute < ?", (sid, bucket_cut))
                    result.buckets_dropped += cur.rowcount
                    if not done:
                        self._compact_cursor = sid
                        result.more = True
                        break
        keep = now - HISTORY_KEEP_S
        for table, column in (("cell_changes", "at"), ("events", "at"), ("alerts", "fired_at"),
                              ("judgements", "started_at"), ("deliveries", "at")):
            left = max(0, budget - result.rows)
            if left == 0:
                result.more = True
                break
            with self.batch():
                # deliveries of pruned alerts go with them (ON DELETE CASCADE)
                cur = self.conn.execute(
                    f"DELETE FROM {table} WHERE rowid IN (SELECT rowid FROM {table} "
                    f"WHERE {column} < ? {'AND ended_at IS NOT NULL' if table == 'judgements' else ''}"
                    f" ORDER BY {column} LIMIT ?)", (keep, left))
                result.history_dropped += cur.rowcount
                if cur.rowcount >= left:
                    result.more = True
        return result

    def _fold(self, sid: int, raw_cut: float) -> tuple[int, bool]:
        """Fold one series' samples before `raw_cut` (at most `COMPACT_SPAN_S` of them):
        (rows folded, whether nothing before `raw_cut` is left)."""
        row = self.conn.execute("SELECT MIN(at) FROM samples WHERE series = ?", (sid,)).fetchone()
        if row is None or row[0] is None or row[0] >= raw_cut:
            return 0, True
        lo = math.floor(row[0] / BUCKET_S) * BUCKET_S
        hi = min(raw_cut, lo + COMPACT_SPAN_S)
        # Each point weighs the time until the next one (a value written once and held for
        # 50 s counts 50 s, not one point), at most `HEARTBEAT_S` (longer is a gap: no data)
        # and not past its own minute. The window reaches one heartbeat past `hi` so the
        # chunk's last points see their successor.
        self.conn.execute(
            """
            INSERT INTO buckets (series, minute, avg, max, n)
            SELECT series, minute, SUM(value * w) / SUM(w), MAX(value), COUNT(*) FROM (
                SELECT series, at, minute, value,
                       MAX(MIN(COALESCE(next_at - at, :gap), :cap, minute + :b - at), 0.001)
                       AS w
                FROM (
                    SELECT series, at, CAST(at / :b AS INTEGER) * :b AS minute, value,
                           LEAD(at) OVER (ORDER BY at) AS next_at
                    FROM samples WHERE series = :s AND at >= :lo AND at < :hi + :cap
                )
            ) WHERE at < :hi GROUP BY series, minute
            ON CONFLICT (series, minute) DO UPDATE SET
                avg = (avg * n + excluded.avg * excluded.n) / (n + excluded.n),
                max = MAX(max, excluded.max),
                n = n + excluded.n
            """,
            {"b": BUCKET_S, "gap": DEFAULT_GAP_S, "cap": HEARTBEAT_S, "s": sid, "lo": lo,
             "hi": hi})
        cur = self.conn.execute("DELETE FROM samples WHERE series = ? AND at >= ? AND at < ?",
                                (sid, lo, hi))
        return int(cur.rowcount), hi >= raw_cut


@dataclass
class CompactResult:
    """What one `compact` call did."""

    folded: int = 0
    """Raw samples folded into buckets (and deleted)."""
    buckets_dropped: int = 0
    history_dropped: int = 0
    more: bool = False
    """The budget ran out: call again (next tick) to go on."""

    @property
    def rows(self) -> int:
        """Rows touched in all."""
        return self.folded + self.buckets_dropped + self.history_dropped


def alert_key(key: Sequence[str]) -> str:
    """An alert's key tuple as one stored string (JSON: unambiguous whatever the parts hold)."""
    return json.dumps(list(key), ensure_ascii=False)


# -- reading --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One point of a series: a raw sample, or a one-minute bucket (`span` 60)."""

    at: float
    value: float
    """The sample, or the bucket's time-weighted average."""
    peak: float
    """The sample again, or the bucket's maximum."""
    span: float = 0.0


@dataclass(frozen=True)
class SeriesInfo:
    """One stored series and its time range."""

    instance: str
    metric: str


@dataclass(frozen=True)
class RecordRow:
    """A box's newest raw probe record."""

    instance: str
    at: float
    seq: int
    data: bytes
    base_at: float | None = None
    """When the latest base record (with the master log's marks) was taken, if one is kept."""


@dataclass(frozen=True)
class CellChange:
    """A stored cell state change."""

    at: float
    instance: str
    cell: str
    from_state: str
    to_state: str
    evidence: str
    epoch: int | None
    epochs: int | None
    exit_code: int | None


@dataclass(frozen=True)
class EventRow:
    """A stored classified failure."""

    at: float
    instance: str
    cell: str
    rule: str
    klass: str
    title: str
    message: str
    exit_code: int | None


@dataclass(frozen=True)
class JudgementRow:
    """A stored judgement episode (`ended_at` None: still true at the writer's last tick)."""

    instance: str
    cell: str
    kind: str
    subject: str
    text: str
    detail: str
    alarm: bool
    started_at: float
    ended_at: float | None


@dataclass(frozen=True)
class DeliveryRow:
    """How one channel took one alert."""

    at: float
    channel: str
    ok: bool | None
    attempts: int
    error: str

    def describe(self) -> str:
        """`slack://… ok`, `webhook failed: HTTP 500`, `ntfy://… skipped`."""
        if self.ok is None:
            return f"{self.channel} skipped"
        return f"{self.channel} ok" if self.ok else f"{self.channel} failed: {self.error}".rstrip(": ")


@dataclass(frozen=True)
class AlertRow:
    """A stored alert with its deliveries (oldest first)."""

    id: int
    fired_at: float
    key: tuple[str, ...]
    instance: str
    cell: str
    kind: str
    text: str
    detail: str
    deliveries: tuple[DeliveryRow, ...] = ()


@dataclass(frozen=True)
class AuditRow:
    """A mirrored audit entry."""

    at: float
    instance: str
    event: str
    entry: dict[str, Any]


def _key_tuple(text: str) -> tuple[str, ...]:
    try:
        parts = json.loads(text)
    except ValueError:
        return (text,)
    return tuple(str(p) for p in parts) if isinstance(parts, list) else (text,)


class StoreReader:
    """Read-only access (`mode=ro`): never takes the writer lock, never blocks the writer.

    Opening a file that does not exist raises `FileNotFoundError` (nothing is created)."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise FileNotFoundError(f"no store at {path}")
        self.path = path
        uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        self.conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        try:
            version = self.schema_version()
        except sqlite3.DatabaseError as exc:  # not a database at all
            self.conn.close()
            raise SchemaError(f"{path} is not a cockpit store: {exc}") from exc
        if version != SCHEMA_VERSION:
            self.conn.close()
            why = ("no writer has created its tables yet" if version == 0 else
                   f"it is at schema version {version}, this cockpit reads {SCHEMA_VERSION}"
                   + (" (upgrade the cockpit)" if version > SCHEMA_VERSION else
                      " (a watcher or attach of this cockpit upgrades it when it opens it)"))
            raise SchemaError(f"cannot read the store {path}: {why}")

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> StoreReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def schema_version(self) -> int:
        """The file's schema version (0: nothing written yet)."""
        return int(self.conn.execute("PRAGMA user_version").fetchone()[0])

    def meta(self) -> dict[str, str]:
        """Every meta value."""
        return {str(k): str(v) for k, v in self.conn.execute("SELECT key, value FROM meta")}

    def instances(self) -> list[str]:
        """Every box the store knows, sorted."""
        rows = self.conn.execute(
            "SELECT instance FROM series UNION SELECT instance FROM cell_changes "
            "UNION SELECT instance FROM alerts UNION SELECT instance FROM events "
            "UNION SELECT instance FROM judgements ORDER BY 1")
        return [str(r[0]) for r in rows]

    def series(self, instance: str | None = None) -> list[SeriesInfo]:
        """The stored series, of one box or all."""
        sql = "SELECT instance, metric FROM series"
        rows = (self.conn.execute(sql + " WHERE instance = ? ORDER BY metric", (instance,))
                if instance is not None else self.conn.execute(sql + " ORDER BY instance, metric"))
        return [SeriesInfo(str(i), str(m)) for i, m in rows]

    def samples(self, instance: str, metric: str, since: float | None = None,
                until: float | None = None) -> list[Point]:
        """One series over [since, until], oldest first: one-minute buckets where the raw
        samples were folded, raw samples after. A bucket is included when its minute starts
        in the range."""
        row = self.conn.execute("SELECT id FROM series WHERE instance = ? AND metric = ?",
                                (instance, metric)).fetchone()
        if row is None:
            return []
        sid = int(row[0])
        lo = -math.inf if since is None else since
        hi = math.inf if until is None else until
        # One read transaction, so a compaction between the two queries cannot hide a point.
        self.conn.execute("BEGIN")
        try:
            buckets = [Point(float(m), float(a), float(x), float(BUCKET_S)) for m, a, x in
                       self.conn.execute("SELECT minute, avg, max FROM buckets WHERE series = ? "
                                         "AND minute >= ? AND minute <= ? ORDER BY minute",
                                         (sid, _sql_bound(lo), _sql_bound(hi)))]
            raw = [Point(float(t), float(v), float(v)) for t, v in
                   self.conn.execute("SELECT at, value FROM samples WHERE series = ? AND at >= ? "
                                     "AND at <= ? ORDER BY at",
                                     (sid, _sql_bound(lo), _sql_bound(hi)))]
        finally:
            self.conn.execute("COMMIT")
        return sorted([*buckets, *raw], key=lambda p: p.at)

    def seen(self, instance: str, *, since: float | None = None) -> list[float]:
        """The first and last time any sample of `instance` was stored (at or after `since`);
        [] when none. Two index seeks per series and table, never a scan."""
        lo = -1e18 if since is None else since
        times: list[float] = []
        ids = [int(r[0]) for r in self.conn.execute("SELECT id FROM series WHERE instance = ?",
                                                    (instance,))]
        for sid in ids:
            for table, column in (("samples", "at"), ("buckets", "minute")):
                for agg in ("MIN", "MAX"):
                    row = self.conn.execute(f"SELECT {agg}({column}) FROM {table} WHERE "
                                            f"series = ? AND {column} >= ?", (sid, lo)).fetchone()
                    if row[0] is not None:
                        times.append(float(row[0]))
        return [min(times), max(times)] if times else []

    def latest_records(self) -> dict[str, RecordRow]:
        """Each box's newest raw probe record."""
        out: dict[str, RecordRow] = {}
        bases = {str(i): float(a) for i, a in self.conn.execute(
            "SELECT instance, at FROM records WHERE kind = 'base'")}
        for inst, at, seq, data in self.conn.execute(
                "SELECT instance, at, seq, data FROM records WHERE kind = 'latest'"):
            out[str(inst)] = RecordRow(str(inst), float(at), int(seq), bytes(data),
                                       bases.get(str(inst)))
        return out

    def base_record(self, instance: str) -> RecordRow | None:
        """A box's latest record that carried the master log's marks."""
        row = self.conn.execute("SELECT at, seq, data FROM records WHERE instance = ? AND "
                                "kind = 'base'", (instance,)).fetchone()
        return RecordRow(instance, float(row[0]), int(row[1]), bytes(row[2])) if row else None

    @staticmethod
    def _where(column: str, since: float | None, until: float | None,
               instance: str | None) -> tuple[str, list[Any]]:
        clauses: list[str] = []
        args: list[Any] = []
        if since is not None:
            clauses.append(f"{column} >= ?")
            args.append(since)
        if until is not None:
            clauses.append(f"{column} <= ?")
            args.append(until)
        if instance is not None:
            clauses.append("instance = ?")
            args.append(instance)
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), args

    def cell_changes(self, *, since: float | None = None, until: float | None = None,
                     instance: str | None = None, limit: int = MAX_ITEMS,
                     newest_first: bool = True) -> list[CellChange]:
        """Cell state changes (newest first unless asked otherwise)."""
        where, args = self._where("at", since, until, instance)
        order = "DESC" if newest_first else "ASC"
        rows = self.conn.execute(
            "SELECT at, instance, cell, from_state, to_state, evidence, epoch, epochs, exit_code "
            f"FROM cell_changes{where} ORDER BY at {order}, id {order} LIMIT ?", [*args, limit])
        return [CellChange(*r) for r in rows]

    def events(self, *, since: float | None = None, until: float | None = None,
               instance: str | None = None, limit: int = MAX_ITEMS) -> list[EventRow]:
        """Classified failures, newest first."""
        where, args = self._where("at", since, until, instance)
        rows = self.conn.execute(
            "SELECT at, instance, cell, rule, class, title, message, exit_code "
            f"FROM events{where} ORDER BY at DESC, id DESC LIMIT ?", [*args, limit])
        return [EventRow(*r) for r in rows]

    def judgements(self, *, since: float | None = None, instance: str | None = None,
                   limit: int = MAX_ITEMS) -> list[JudgementRow]:
        """Judgement episodes still true at `since` or started after it, newest first."""
        clauses: list[str] = []
        args: list[Any] = []
        if since is not None:
            clauses.append("(ended_at IS NULL OR ended_at >= ?)")
            args.append(since)
        if instance is not None:
            clauses.append("instance = ?")
            args.append(instance)
        where = " WHERE " + " AND ".join(clauses) if clauses else ""
        rows = self.conn.execute(
            "SELECT instance, cell, kind, subject, text, detail, alarm, started_at, ended_at "
            f"FROM judgements{where} ORDER BY started_at DESC, id DESC LIMIT ?", [*args, limit])
        return [JudgementRow(r[0], r[1], r[2], r[3], r[4], r[5], bool(r[6]), r[7], r[8])
                for r in rows]

    def alerts(self, *, since: float | None = None, until: float | None = None,
               instance: str | None = None, limit: int = MAX_ITEMS) -> list[AlertRow]:
        """Alerts, newest first, each with its deliveries."""
        where, args = self._where("fired_at", since, until, instance)
        rows = list(self.conn.execute(
            "SELECT id, fired_at, key, instance, cell, kind, text, detail "
            f"FROM alerts{where} ORDER BY fired_at DESC, id DESC LIMIT ?", [*args, limit]))
        if not rows:
            return []
        ids = [int(r[0]) for r in rows]
        sent: dict[int, list[DeliveryRow]] = {}
        for chunk_start in range(0, len(ids), 500):  # SQLite's bound-variable limit
            chunk = ids[chunk_start:chunk_start + 500]
            marks = ",".join("?" * len(chunk))
            for aid, at, channel, ok, attempts, error in self.conn.execute(
                    "SELECT alert_id, at, channel, ok, attempts, error FROM deliveries "
                    f"WHERE alert_id IN ({marks}) ORDER BY at, id", chunk):
                sent.setdefault(int(aid), []).append(
                    DeliveryRow(float(at), str(channel), None if ok is None else bool(ok),
                                int(attempts), str(error)))
        return [AlertRow(int(r[0]), float(r[1]), _key_tuple(str(r[2])), str(r[3]), str(r[4]),
                         str(r[5]), str(r[6]), str(r[7]), tuple(sent.get(int(r[0]), ())))
                for r in rows]

    def failing_channels(self) -> dict[str, str]:
        """Channel -> error, for channels whose latest delivery failed."""
        out: dict[str, str] = {}
        for channel, ok, error in self.conn.execute(
                "SELECT channel, ok, error FROM deliveries WHERE id IN "
                "(SELECT MAX(id) FROM deliveries WHERE ok IS NOT NULL GROUP BY channel)"):
            if ok == 0:
                out[str(channel)] = str(error)
        return out

    def audit(self, *, since: float | None = None, instance: str | None = None,
              limit: int = MAX_ITEMS) -> list[AuditRow]:
        """Mirrored audit entries, newest first."""
        where, args = self._where("at", since, None, instance)
        rows = self.conn.execute(
            f"SELECT at, instance, event, entry FROM audit{where} ORDER BY at DESC, id DESC "
            "LIMIT ?", [*args, limit])
        out = []
        for at, inst, event, entry in rows:
            try:
                doc = json.loads(entry)
            except ValueError:
                doc = {}
            out.append(AuditRow(float(at), str(inst), str(event),
                                doc if isinstance(doc, dict) else {}))
        return out

    def history(self, instance: str | None = None, *, since: float | None = None,
                limit: int = MAX_ITEMS) -> list[HistoryItem]:
        """Alerts (with how they were sent) and classified failures as the events list shows
        them, newest first."""
        items = [HistoryItem(a.fired_at, a.instance, a.kind, a.text, cell=a.cell,
                             detail=a.detail,
                             delivery="; ".join(d.describe() for d in a.deliveries),
                             source="store")
                 for a in self.alerts(since=since, instance=instance, limit=limit)]
        items += [HistoryItem(e.at, e.instance, "failure", f"{e.title}: {e.message}",
                              cell=e.cell, detail=f"rule {e.rule} ({e.klass})", source="store")
                  for e in self.events(since=since, instance=instance, limit=limit)]
        items.sort(key=lambda i: i.at, reverse=True)
        return items[:limit]


def _sql_bound(value: float) -> float:
    """An open range end as a finite bound (SQLite compares fine with inf, but keep it plain)."""
    return max(min(value, 1e18), -1e18)
