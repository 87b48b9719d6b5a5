"""The store's schema: an ordered list of migrations, applied by `PRAGMA user_version`.

`user_version` 0 is a file no cockpit has written yet (new, or empty). Migration *n* brings a
file from version n-1 to n; `migrate` applies the missing ones in order, each in its own
transaction together with the version bump (SQLite's DDL is transactional), so a migration
that fails leaves the file at the version before it, never half-changed. A file from a newer
cockpit (version above `SCHEMA_VERSION`) is refused rather than written with an older idea of
its tables.

To change the schema: append a migration; never edit one that has shipped.

Tables (v1):

- `meta (key, value)`: sweep name, who created the file, the latest tick.
- `series (id, instance, metric)`: one numeric series per box and metric name, interned so a
  sample row carries a small integer instead of two strings.
- `samples (series, at, value)` (no index on time alone: every read and the retention go
  series by series along the primary key, and an index on `at` would cost half as much
  again as the table): full resolution (a value is written when it changes, and at
  least every `HEARTBEAT_S`), kept `RAW_KEEP_S`.
- `buckets (series, minute, avg, max, n)`: one-minute aggregates of older samples, kept
  `BUCKET_KEEP_S`.
- `records (instance, kind, at, seq, data)`: the latest raw probe record of each box
  (`kind` 'latest'), and the latest one that carried the master log's marks ('base').
- `cell_changes`: a cell moved from one state to another, with the evidence.
- `events`: classified failures (rule, class, title, message excerpt).
- `judgements`: a health judgement's episode (stalled, idle burn, stale...), started and ended.
- `alerts` and `deliveries`: material alerts and how each channel took them.
- `audit`: a mirror of the teardown/exclusion audit log entries.

Tables (v2, the MCP server's: `cockpit/services/agent/requests.py`):

- `teardown_requests`: a teardown an agent asked for (who, why, the verification state
  then), `pending` until a person approves or refuses it on the TUI's teardown screen.
- `tool_calls`: every MCP tool call (tool, arguments without secrets, result summary).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence

Migration = Callable[[sqlite3.Connection], None]


class SchemaError(Exception):
    """The file's schema cannot be used by this cockpit (newer, or a migration failed)."""


V1 = """
CREATE TABLE meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE series (
    id INTEGER PRIMARY KEY,
    instance TEXT NOT NULL,
    metric TEXT NOT NULL,
    UNIQUE (instance, metric)
);
CREATE TABLE samples (
    series INTEGER NOT NULL,
    at REAL NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (series, at)
) WITHOUT ROWID;
CREATE TABLE buckets (
    series INTEGER NOT NULL,
    minute INTEGER NOT NULL,
    avg REAL NOT NULL,
    max REAL NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (series, minute)
) WITHOUT ROWID;
CREATE TABLE records (
    instance TEXT NOT NULL,
    kind TEXT NOT NULL,
    at REAL NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (instance, kind)
);
CREATE TABLE cell_changes (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    instance TEXT NOT NULL,
    cell TEXT NOT NULL,
    from_state TEXT NOT NULL,
    to_state TEXT NOT NULL,
    evidence TEXT NOT NULL,
    epoch INTEGER,
    epochs INTEGER,
    exit_code INTEGER
);
CREATE INDEX cell_changes_by_time ON cell_changes (at);
CREATE INDEX cell_changes_by_box ON cell_changes (instance, at);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    instance TEXT NOT NULL,
    cell TEXT NOT NULL,
    rule TEXT NOT NULL,
    class TEXT NOT NULL,
    title TEXT NOT NULL,
    message TEXT NOT NULL,
    exit_code INTEGER
);
CREATE INDEX events_by_time ON events (at);
CREATE INDEX events_by_box ON events (instance, at);
CREATE TABLE judgements (
    id INTEGER PRIMARY KEY,
    instance TEXT NOT NULL,
    cell TEXT NOT NULL,
    kind TEXT NOT NULL,
    subject TEXT NOT NULL,
    text TEXT NOT NULL,
    detail TEXT NOT NULL,
    alarm INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL
);
CREATE INDEX judgements_by_time ON judgements (started_at);
CREATE INDEX judgements_open ON judgements (ended_at) WHERE ended_at IS NULL;
CREATE TABLE alerts (
    id INTEGER PRIMARY KEY,
    fired_at REAL NOT NULL,
    key TEXT NOT NULL,
    instance TEXT NOT NULL,
    cell TEXT NOT NULL,
    kind TEXT NOT NULL,
    text TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX alerts_by_time ON alerts (fired_at);
CREATE INDEX alerts_by_box ON alerts (instance, fired_at);
CREATE INDEX alerts_by_key ON alerts (key);
CREATE TABLE deliveries (
    id INTEGER PRIMARY KEY,
    alert_id INTEGER NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    at REAL NOT NULL,
    channel TEXT NOT NULL,
    ok INTEGER,
    attempts INTEGER NOT NULL,
    error TEXT NOT NULL
);
CREATE INDEX deliveries_by_alert ON deliveries (alert_id);
CREATE INDEX deliveries_by_time ON deliveries (at);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    instance TEXT NOT NULL,
    event TEXT NOT NULL,
    entry TEXT NOT NULL
);
CREATE INDEX audit_by_time ON audit (at);
"""


def ddl(script: str) -> Migration:
    """A migration that runs the `;`-separated statements of `script` in order (inside the
    transaction `migrate` opened: `executescript` would commit it first)."""

    def run(conn: sqlite3.Connection) -> None:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)

    return run


V2 = """
CREATE TABLE teardown_requests (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    instance TEXT NOT NULL,
    action TEXT NOT NULL,
    reason TEXT NOT NULL,
    who TEXT NOT NULL,
    verification TEXT NOT NULL,
    state TEXT NOT NULL,
    decided_at REAL,
    decided_by TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX teardown_requests_by_state ON teardown_requests (state, at);
CREATE TABLE tool_calls (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    who TEXT NOT NULL,
    tool TEXT NOT NULL,
    arguments TEXT NOT NULL,
    ok INTEGER NOT NULL,
    summary TEXT NOT NULL
);
CREATE INDEX tool_calls_by_time ON tool_calls (at);
"""


MIGRATIONS: tuple[Migration, ...] = (ddl(V1), ddl(V2))
"""Migration i (0-based) brings a file from version i to i + 1."""
SCHEMA_VERSION = len(MIGRATIONS)


def version_of(conn: sqlite3.Connection) -> int:
    """The file's `user_version`."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Bring the file up to `len(migrations)`; the version it was at before.

    `conn` must be in autocommit mode (`isolation_level=None`): each step runs in its own
    `BEGIN IMMEDIATE` ... `COMMIT` with its `user_version` bump."""
    before = version_of(conn)
    if before > len(migrations):
        raise SchemaError(f"the store is at schema version {before}, newer than this cockpit "
                          f"knows ({len(migrations)}): upgrade the cockpit to open it")
    for index in range(before, len(migrations)):
        conn.execute("BEGIN IMMEDIATE")
        try:
            migrations[index](conn)
            # PRAGMA takes no parameters; `index` is an int we produced.
            conn.execute(f"PRAGMA user_version = {index + 1}")
            conn.execute("COMMIT")
        except Exception as exc:
            conn.execute("ROLLBACK")
            raise SchemaError(f"migration to schema version {index + 1} failed: {exc}") from exc
    return before
