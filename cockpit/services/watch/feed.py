"""The watcher's record feed: how a TUI follows `cockpit watch` without probing the boxes.

While a watcher runs, `cockpit attach` must not open a second set of SSH connections and
probes to the same boxes. The watcher therefore keeps, per box, the probe records it received
since the latest *base* — a record that carries the master log's marks (first contact, or
asked for again every `REBASE_S`) — in a small SQLite file beside the store
(`<store>.feed`). A follower replays each box from its latest base, then reads new records as
they arrive, parsing them with the same `parse_record` as a probe's: the same code path, the
same bounds, the same isolation. Everything older than the base is in the store's history
(events list, trends), not in the feed.

The feed is a cache, not history: deleting it loses nothing a report needs. Kept apart from the
store so the store's schema and retention stay about history alone.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

from cockpit.models.events import FleetEvent, HostStateChanged, SnapshotTaken
from cockpit.models.parse import parse_record
from cockpit.models.snapshot import HostState, Reachability
from cockpit.models.text import visible

REBASE_S = 120.0
"""How often the watcher asks each box for its marks again (one `tail -c` of the master log):
a follower replays at most this long a stretch of records (~60 at the 2 s default), and the
feed holds about that much per box. At 600 s, 200 boxes kept ~250 MB on disk."""
WAL_LIMIT_BYTES = 16 * 1024 * 1024
"""The write-ahead log is truncated back to this after each checkpoint (SQLite otherwise
keeps it at its largest size, which a burst of big records sets)."""
MAX_FEED_BYTES = 16 * 1024 * 1024
"""Record bytes kept per box between bases. A box whose records are huge (a log that floods
its 256 KiB per-tick budget) would otherwise grow the feed by ~75 MB between two bases; past
this, the oldest records after the base are dropped and a follower says history is partial."""
POLL_S = 1.0
"""How often a follower looks for new records (the watcher writes at the probe's pace)."""
MAX_DETAIL = 300
"""Characters of a state's detail kept (it may quote a box's error text)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    instance TEXT NOT NULL,
    at REAL NOT NULL,
    base INTEGER NOT NULL,
    record BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_box ON records (instance, id);
CREATE TABLE IF NOT EXISTS states (
    instance TEXT PRIMARY KEY,
    reachability TEXT NOT NULL,
    since REAL NOT NULL,
    detail TEXT NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS trimmed (
    instance TEXT PRIMARY KEY,
    at REAL NOT NULL
);
"""


def feed_path(store_path: Path) -> Path:
    """Where the feed of the store at `store_path` lives."""
    return store_path.with_name(store_path.name + ".feed")


class FeedWriter:
    """The watcher's side: keep records since each box's latest base, and box states."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        # NORMAL: a power cut may lose the last records, never corrupt the file (WAL).
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=2000")
        self.conn.execute(f"PRAGMA journal_size_limit={WAL_LIMIT_BYTES}")
        self.conn.executescript(SCHEMA)
        self._sizes: dict[str, int] = {}

    def add(self, event: SnapshotTaken) -> None:
        """Keep one record; a base drops this box's records from before it."""
        if not event.record:
            return
        name = event.snapshot.instance
        at = event.snapshot.observed_at
        with self.conn:
            self.conn.execute("BEGIN IMMEDIATE")
            if event.base:
                self.conn.execute("DELETE FROM records WHERE instance = ?", (name,))
                self.conn.execute("DELETE FROM trimmed WHERE instance = ?", (name,))
                self._sizes[name] = 0
            elif name not in self._sizes:
                return  # no base yet for this box: a follower could not start from it
            self.conn.execute("INSERT INTO records (instance, at, base, record) VALUES (?, ?, ?, ?)",
                              (name, at, int(event.base), event.record))
            self._sizes[name] = self._sizes.get(name, 0) + len(event.record)
            if self._sizes[name] > MAX_FEED_BYTES:
                self._trim(name, at)

    def _trim(self, name: str, at: float) -> None:
        """Drop the oldest non-base records of a box until it fits (counted as a gap)."""
        rows = self.conn.execute(
            "SELECT id, length(record) FROM records WHERE instance = ? AND base = 0 ORDER BY id",
            (name,)).fetchall()
        size = self._sizes[name]
        drop: list[int] = []
        for row_id, length in rows:
            if size <= MAX_FEED_BYTES // 2:
                break
            drop.append(row_id)
            size -= int(length)
        self.conn.executemany("DELETE FROM records WHERE id = ?", [(i,) for i in drop])
        self.conn.execute("INSERT OR REPLACE INTO trimmed (instance, at) VALUES (?, ?)", (name, at))
        self._sizes[name] = size

    def state(self, state: HostState) -> None:
        """A box's connection state, for followers (host keys stay with the watcher)."""
        with self.conn:
            self.conn.execute(
                "INSERT OR REPLACE INTO states (instance, reachability, since, detail, at) "
                "VALUES (?, ?, ?, ?, ?)",
                (state.instance, state.reachability.value, state.since,
                 visible(state.detail)[:MAX_DETAIL], time.time()))

    def close(self) -> None:
        """Close the connection (a follower keeps reading what is there)."""
        self.conn.close()


@dataclass(frozen=True)
class FeedRecord:
    """One stored record."""

    id: int
    instance: str
    at: float
    base: bool
    record: bytes


class FeedReader:
    """The follower's side: records from each box's latest base on, then new ones."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True,
                               isolation_level=None)

    def since(self, last_id: int, instances: set[str]) -> list[FeedRecord]:
        """Records after `last_id` of the given boxes, oldest first (at most a few hundred per
        box: what the watcher kept since its latest base)."""
        with closing(self._connect()) as conn:
            rows = conn.execute(
                "SELECT id, instance, at, base, record FROM records WHERE id > ? ORDER BY id",
                (last_id,)).fetchall()
        return [FeedRecord(int(i), str(n), float(a), bool(b), bytes(r)) for i, n, a, b, r in rows
                if n in instances]

    def states(self) -> dict[str, HostState]:
        """The latest connection state the watcher saw for each box."""
        with closing(self._connect()) as conn:
            rows = conn.execute("SELECT instance, reachability, since, detail FROM states").fetchall()
        out: dict[str, HostState] = {}
        for name, reach, since, detail in rows:
            try:
                reachability = Reachability(reach)
            except ValueError:
                continue
            out[str(name)] = HostState(str(name), reachability, float(since), str(detail))
        return out

    def trimmed(self) -> dict[str, float]:
        """Boxes whose records between base and now were partly dropped (and when)."""
        with closing(self._connect()) as conn:
            return {str(n): float(a) for n, a in conn.execute("SELECT instance, at FROM trimmed")}


async def follow(path: Path, instances: set[str], *, poll_s: float = POLL_S) -> AsyncIterator[FleetEvent]:
    """Fleet events replayed from a watcher's feed, then followed, for the TUI's trackers.

    A record is parsed exactly as a probe's would be; the watcher's state for each box is
    passed on when it changes. Reads run in a thread: SQLite calls block, asyncssh is never
    touched there."""
    reader = FeedReader(path)
    last_id = 0
    states: dict[str, HostState] = {}
    started: set[str] = set()
    while True:
        try:
            records = await asyncio.to_thread(reader.since, last_id, instances)
            current = await asyncio.to_thread(reader.states)
        except sqlite3.Error:
            await asyncio.sleep(poll_s)  # the watcher is creating or vacuuming it: try again
            continue
        for name, state in current.items():
            if name in instances and states.get(name) != state:
                states[name] = state
                yield HostStateChanged(state)
        for item in records:
            last_id = max(last_id, item.id)
            snap = parse_record(item.record, instance=item.instance, observed_at=item.at)
            if item.instance in started and snap.queue.queue_marks is not None:
                # A later base: this follower's model has the marks already (see fleet.py).
                snap = dataclasses.replace(
                    snap, queue=dataclasses.replace(snap.queue, queue_marks=None))
            started.add(item.instance)
            yield SnapshotTaken(snap, item.record, base=item.base)
        await asyncio.sleep(poll_s)
