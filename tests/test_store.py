"""cockpit.services.store: one writer, read-only readers, retention, migrations, bounds, and
the recorder that turns real trackers into rows. Real SQLite files, real flocks."""

from __future__ import annotations

import itertools
import json
import sqlite3
from pathlib import Path

import pytest

from cockpit.models.alerts import Alert
from cockpit.models.hostview import HostTracker
from cockpit.models.profile import Profile
from cockpit.models.snapshot import HostState, Reachability
from cockpit.services.config.profiles import load_named
from cockpit.services.custody.audit import append_audit
from cockpit.services.store import schema
from cockpit.services.store.db import (
    BUCKET_KEEP_S,
    HISTORY_KEEP_S,
    MAX_NAME,
    MAX_RECORD_BYTES,
    MAX_TEXT,
    RAW_KEEP_S,
    Store,
    StoreReader,
    db_file_name,
    default_db_path,
)
from cockpit.services.store.lock import WriterBusy, find_writer, lock_path
from cockpit.services.store.recorder import TrackerRecorder
from tests.test_hostview import RULEBOOK, gpu, instance, mount, remote, snapshot, ts

T0 = 1_790_000_000.0
DAY = 86400.0


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "s.db"


# -- one writer -------------------------------------------------------------------------------
def test_one_writer_holds_the_lock_and_find_writer_asks_the_kernel(db: Path) -> None:
    assert find_writer(db) is None
    store = Store.open(db, sweep="s", role="watch")
    info = find_writer(db)
    assert info is not None and info.role == "watch" and info.pid is not None
    with pytest.raises(WriterBusy) as busy:
        Store.open(db, sweep="s", role="attach")
    assert "cockpit watch" in str(busy.value) and str(info.pid) in str(busy.value)
    store.close()
    assert find_writer(db) is None
    # A pid file left behind by a dead writer, with no lock held, is not a writer.
    lock_path(db).write_text(json.dumps({"pid": 1, "started_at": T0, "role": "watch",
                                         "host": "x"}))
    assert find_writer(db) is None
    again = Store.open(db, sweep="s", role="attach")
    assert find_writer(db) is not None and find_writer(db).role == "attach"  # type: ignore[union-attr]
    again.close()


def test_reader_is_read_only_and_never_blocks_the_writer(db: Path) -> None:
    store = Store.open(db, sweep="s")
    with store.batch():
        store.sample("a1", T0, {"gpu0.util": 50.0})
    reader = StoreReader(db)
    reader.conn.execute("BEGIN")
    assert reader.conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 1
    with store.batch():  # the reader's open transaction does not stop a commit (WAL)
        store.sample("a1", T0 + 2, {"gpu0.util": 60.0})
    assert reader.conn.execute("SELECT count(*) FROM samples").fetchone()[0] == 1  # snapshot
    reader.conn.execute("COMMIT")
    assert [p.value for p in reader.samples("a1", "gpu0.util")] == [50.0, 60.0]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.conn.execute("INSERT INTO meta VALUES ('x', 'y')")
    reader.close()
    store.close()


def test_a_failed_batch_rolls_back_everything_in_it(db: Path) -> None:
    store = Store.open(db, sweep="s")
    with pytest.raises(RuntimeError), store.batch():
        store.sample("a1", T0, {"gpu0.util": 50.0})
        store.event("a1", "c", "r", "k", "t", "m", T0)
        raise RuntimeError("boom")
    with store.batch():
        store.sample("a1", T0 + 1, {"gpu0.util": 50.0})  # the cache forgot the rolled-back row
    store.close()
    with StoreReader(db) as reader:
        assert [p.at for p in reader.samples("a1", "gpu0.util")] == [T0 + 1]
        assert reader.events() == []


def test_store_path_is_a_safe_file_name_under_the_data_dir(tmp_path: Path) -> None:
    assert db_file_name("ablation-nov") == "ablation-nov.db"
    odd = db_file_name("../etc/passwd x")
    assert "/" not in odd and not odd.startswith(".") and odd.endswith(".db")
    assert db_file_name("a/b") != db_file_name("a_b")
    assert default_db_path("ablation-nov") == tmp_path / "data" / "ablation-nov.db"


# -- samples and retention --------------------------------------------------------------------
def test_unchanged_values_are_written_once_a_heartbeat(db: Path) -> None:
    store = Store.open(db, sweep="s")
    with store.batch():
        for i in range(0, 300, 2):
            store.sample("a1", T0 + i, {"cells.total": 5.0, "gpu0.util": float(i % 7),
                                        "price_h": None, "bad": float("nan")})
    store.close()
    with StoreReader(db) as reader:
        total = reader.samples("a1", "cells.total")
        assert [p.at - T0 for p in total] == [0, 60, 120, 180, 240]
        assert len(reader.samples("a1", "gpu0.util")) > 100
        assert reader.samples("a1", "price_h") == [] and reader.samples("a1", "bad") == []


def test_compaction_folds_old_samples_into_minutes_and_drops_expired_rows(db: Path) -> None:
    store = Store.open(db, sweep="s")
    now = T0 + 40 * DAY
    with store.batch():
        # 35 days ago: past the buckets' retention once folded.
        store.sample("a1", now - 35 * DAY, {"gpu0.util": 10.0})
        # 2 days ago, one minute: 100 held for 50 s then 0 for 10 s (time-weighted: ~83).
        minute = (now - 2 * DAY) // 60 * 60
        store.sample("a1", minute, {"gpu0.util": 100.0})
        for t in range(50, 130, 2):  # written every probe, stored at change and heartbeat
            store.sample("a1", minute + t, {"gpu0.util": 0.0})
        for i in range(0, 3600, 2):  # the last hour, full resolution
            store.sample("a1", now - 3600 + i, {"gpu0.util": float(i % 100)})
        store.event("a1", "c", "old", "k", "t", "m", now - HISTORY_KEEP_S - 1)
        store.event("a1", "c", "new", "k", "t", "m", now - 1)
        old = store.alert(("x",), "a1", "stale", "old alert", now - HISTORY_KEEP_S - 5)
        store.delivery(old, "webhook", True, 1, "", now - HISTORY_KEEP_S - 4)
        store.audit({"event": "teardown", "instance": "a1"}, now - 200 * DAY)
    result = store.compact(now)
    assert not result.more and result.folded > 0
    store.close()
    with StoreReader(db) as reader:
        points = reader.samples("a1", "gpu0.util")
        assert all(p.at >= now - BUCKET_KEEP_S for p in points)  # the 35-day-old one is gone
        bucket = next(p for p in points if p.at == minute)
        assert bucket.span == 60 and bucket.peak == 100.0 and 80 <= bucket.value <= 86
        raw = [p for p in points if p.span == 0]
        assert raw and min(p.at for p in raw) >= now - RAW_KEEP_S
        assert len(raw) == 1800
        assert [e.rule for e in reader.events()] == ["new"]
        assert reader.alerts() == []
        assert reader.conn.execute("SELECT count(*) FROM deliveries").fetchone()[0] == 0
        assert [a.event for a in reader.audit()] == ["teardown"]  # the audit mirror stays


def test_compaction_is_incremental_and_ends_where_one_big_call_would(tmp_path: Path) -> None:
    def fill(path: Path) -> Store:
        store = Store.open(path, sweep="s")
        with store.batch():
            for box in ("a1", "a2", "a3"):
                for i in range(0, int(DAY + 7200), 30):
                    store.sample(box, T0 + i, {"gpu0.util": float(i % 97), "disk:/d": i / 1e4})
        return store

    now = T0 + DAY + 7200
    small, big = fill(tmp_path / "small.db"), fill(tmp_path / "big.db")
    calls = 0
    while True:
        calls += 1
        result = small.compact(now, budget=100)
        assert result.rows <= 100 + 240  # one step may finish its series' chunk
        if not result.more:
            break
        assert calls < 500
    assert calls > 3
    big.compact(now)
    query = "SELECT series, minute, avg, max, n FROM buckets ORDER BY 1, 2"
    assert small.conn.execute(query).fetchall() == big.conn.execute(query).fetchall()
    assert small.conn.execute("SELECT count(*) FROM samples").fetchone() == \
        big.conn.execute("SELECT count(*) FROM samples").fetchone()
    small.close()
    big.close()


def test_samples_cover_the_boundary_between_buckets_and_raw(db: Path) -> None:
    store = Store.open(db, sweep="s")
    now = T0 + 2 * DAY
    with store.batch():
        for i in range(0, int(2 * DAY), 10):
            store.sample("a1", T0 + i, {"gpu0.util": 42.0 + (i // 10) % 2})
    store.compact(now)
    store.close()
    with StoreReader(db) as reader:
        points = reader.samples("a1", "gpu0.util", since=now - RAW_KEEP_S - 3600)
        gaps = [b.at - a.at for a, b in itertools.pairwise(points)]
        assert points[0].span == 60 and points[-1].span == 0
        assert max(gaps) <= 60
        assert points[0].at >= now - RAW_KEEP_S - 3600


# -- schema -----------------------------------------------------------------------------------
def test_migrations_upgrade_in_order_and_refuse_a_newer_file(db: Path) -> None:
    conn = sqlite3.connect(db, isolation_level=None)
    assert schema.version_of(conn) == 0
    assert schema.migrate(conn) == 0 and schema.version_of(conn) == schema.SCHEMA_VERSION
    conn.execute("INSERT INTO meta VALUES ('k', 'v')")

    def v2(c: sqlite3.Connection) -> None:
        c.execute("ALTER TABLE meta ADD COLUMN note TEXT NOT NULL DEFAULT 'added by v2'")

    def broken(c: sqlite3.Connection) -> None:
        c.execute("CREATE TABLE half_done (x)")
        raise ValueError("migration bug")

    shipped = len(schema.MIGRATIONS)  # the test's own migration comes after the shipped ones
    assert schema.migrate(conn, [*schema.MIGRATIONS, v2]) == shipped
    assert schema.version_of(conn) == shipped + 1
    assert conn.execute("SELECT key, value, note FROM meta").fetchall() == [("k", "v", "added by v2")]
    with pytest.raises(schema.SchemaError, match=f"version {shipped + 2}"):
        schema.migrate(conn, [*schema.MIGRATIONS, v2, broken])
    assert schema.version_of(conn) == shipped + 1  # rolled back with its version bump
    assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half_done'").fetchone() is None
    conn.close()
    # A file newer than this cockpit: the writer refuses it (and releases its lock), so does
    # a reader.
    with pytest.raises(schema.SchemaError, match="newer"):
        Store.open(db, sweep="s")
    assert find_writer(db) is None
    with pytest.raises(schema.SchemaError, match="upgrade the cockpit"):
        StoreReader(db)


def test_a_v0_file_is_created_by_the_writer_and_refused_by_a_reader(db: Path) -> None:
    sqlite3.connect(db).close()  # an empty file: user_version 0
    with pytest.raises(schema.SchemaError, match="no writer"):
        StoreReader(db)
    Store.open(db, sweep="s").close()
    with StoreReader(db) as reader:
        assert reader.schema_version() == schema.SCHEMA_VERSION
        assert reader.meta()["sweep"] == "s"
    with pytest.raises(FileNotFoundError):
        StoreReader(db.with_name("absent.db"))
    assert not db.with_name("absent.db").exists()


def test_a_file_that_is_no_database_is_refused_by_name_and_left_alone(db: Path) -> None:
    db.write_bytes(b"certainly not SQLite " * 500)
    with pytest.raises(schema.SchemaError, match="not a cockpit store"):
        Store.open(db, sweep="s")
    assert find_writer(db) is None  # the lock was given back
    with pytest.raises(schema.SchemaError, match="not a cockpit store"):
        StoreReader(db)
    assert db.read_bytes().startswith(b"certainly not SQLite")


# -- bounds -----------------------------------------------------------------------------------
def test_every_text_is_bounded_and_huge_records_are_not_stored(db: Path) -> None:
    store = Store.open(db, sweep="s")
    flood = "\x1b[31m" + "x" * 100_000 + "\x00"
    with store.batch():
        store.event("a1", flood, "r", "k", flood, flood, T0)
        aid = store.alert((flood,), "a1", "cell-failed", flood, T0, cell=flood, detail=flood)
        store.delivery(aid, flood, False, 1, flood, T0)
        store.cell_change("a1", flood, "", "running", T0, evidence=flood)
        assert store.put_record("a1", T0, 1, b"r" * MAX_RECORD_BYTES)
        assert not store.put_record("a1", T0 + 1, 2, b"r" * (MAX_RECORD_BYTES + 1))
        store.put_record("a2", T0, 3, b"base", base=True)
    store.close()
    with StoreReader(db) as reader:
        event = reader.events()[0]
        assert len(event.cell) <= MAX_NAME and len(event.message) <= MAX_TEXT
        assert "\x00" not in event.message
        alert = reader.alerts()[0]
        assert len(alert.text) <= MAX_TEXT and len(alert.deliveries[0].error) <= 300
        assert len(reader.cell_changes()[0].evidence) <= 400
        records = reader.latest_records()
        assert records["a1"].seq == 1 and len(records["a1"].data) == MAX_RECORD_BYTES
        assert records["a2"].base_at == T0 and reader.base_record("a2") is not None


def test_history_and_failing_channels(db: Path) -> None:
    store = Store.open(db, sweep="s")
    with store.batch():
        a = store.alert(("failed", "a1", "c1", "1"), "a1", "cell-failed", "a1: c1 failed", T0,
                        cell="c1", detail="read c1.log")
        store.delivery(a, "slack://…", False, 3, "HTTP 500", T0 + 1)
        store.delivery(a, "webhook", True, 1, "", T0 + 1)
        store.event("a2", "c9", "cuda-oom", "resource", "CUDA out of memory", "tried 2 GiB",
                    T0 + 5)
    store.close()
    with StoreReader(db) as reader:
        items = reader.history()
        assert [(i.instance, i.kind) for i in items] == [("a2", "failure"), ("a1", "cell-failed")]
        assert items[1].delivery == "slack://… failed: HTTP 500; webhook ok"
        assert items[1].cell == "c1" and items[1].source == "store"
        assert [i.instance for i in reader.history("a1")] == ["a1"]
        assert reader.failing_channels() == {"slack://…": "HTTP 500"}
        assert reader.alerts()[0].key == ("failed", "a1", "c1", "1")


# -- the recorder over real trackers ----------------------------------------------------------
@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_named("autodl")


class Sent:
    def __init__(self, channel: str, ok: bool | None, attempts: int = 1, error: str = "") -> None:
        self.channel, self.ok, self.attempts, self.error = channel, ok, attempts, error


def test_recorder_writes_cells_failures_samples_judgements_and_alerts(
        db: Path, profile: Profile, tmp_path: Path) -> None:
    tracker = HostTracker(instance(clocks_started={}, price_per_hour=2.0), profile, RULEBOOK)
    store = Store.open(db, sweep="s")
    recorder = TrackerRecorder(store, audit_log=tmp_path / "audit.jsonl")
    queue = "a.yaml t 2\nb.yaml t 2\n"
    marks = f"{ts('00:00:00')} [1/2] STARTING a (t, 2ep)\n"
    tracker.absorb(snapshot(observed_at=T0, queue_text=queue, marks=marks,
                            gpus=(gpu(97.0),), mounts=(mount(used=90, avail=10),)))
    recorder.record_snapshot("a1", T0, 1, b"raw record 1")
    recorder.record_tick(T0, {"a1": tracker}, [])
    marks2 = (f"{ts('00:30:00')} [1/2] FINISHED a (exit=0)\n"
              f"{ts('00:30:00')} [2/2] STARTING b (t, 2ep)\n"
              f"{ts('00:40:00')} [2/2] FINISHED b (exit=1)\n")
    tracker.absorb(snapshot(observed_at=T0 + 10, marks=marks2, pids=(), gpus=(gpu(0.0),),
                            mounts=(mount(used=90, avail=10),)))
    alert = Alert(("failed", "a1", "b", "x"), "a1", "cell-failed", "a1: b failed", "read b.log")
    recorder.record_tick(T0 + 10, {"a1": tracker}, [alert])
    recorder.record_delivery(alert, T0 + 11, [Sent("ntfy://…", False, 2, "timeout")])
    tracker.absorb_state(HostState("a1", Reachability.STALE, T0 + 20))
    recorder.record_tick(T0 + 20, {"a1": tracker}, [])
    store.close()

    with StoreReader(db) as reader:
        changes = reader.cell_changes(newest_first=False)
        assert [(c.cell, c.from_state, c.to_state) for c in changes] == [
            ("a", "", "running"), ("a", "running", "finished ok"),
            ("b", "pending", "failed")]
        assert changes[0].at == remote("00:00:00")  # dated by the STARTING mark
        assert changes[2].at == remote("00:40:00") and changes[2].exit_code == 1
        assert [e.cell for e in reader.events()] == ["b"]
        assert [p.value for p in reader.samples("a1", "gpu0.util")] == [97.0, 0.0]
        assert [p.value for p in reader.samples("a1", "disk:/root/autodl-tmp")] == [90.0]
        assert [p.value for p in reader.samples("a1", "reachable")] == [1.0, 0.0]
        assert [p.value for p in reader.samples("a1", "cells.failed")][-1] == 1.0
        assert reader.samples("a1", "price_h")[0].value == 2.0
        stale = [j for j in reader.judgements() if j.kind == "stale"]
        assert len(stale) == 1 and stale[0].started_at == T0 + 20 and stale[0].ended_at is None
        assert any(j.ended_at == T0 + 20 for j in reader.judgements())  # episodes that ended
        [stored] = reader.alerts()
        assert stored.cell == "b" and stored.deliveries[0].describe() == "ntfy://… failed: timeout"
        assert reader.latest_records()["a1"].data == b"raw record 1"

    # A restarted writer closes the open episode at the last tick and does not record the
    # same changes and failures again.
    store = Store.open(db, sweep="s")
    again = TrackerRecorder(store)
    again.record_tick(T0 + 30, {"a1": tracker}, [])
    store.close()
    with StoreReader(db) as reader:
        assert len(reader.cell_changes()) == 3 and len(reader.events()) == 1
        stale = sorted((j for j in reader.judgements() if j.kind == "stale"),
                       key=lambda j: j.started_at)
        assert stale[0].ended_at == T0 + 20 and stale[1].started_at == T0 + 30


def test_recorder_mirrors_the_audit_log_for_its_boxes_only(db: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    append_audit({"event": "teardown", "instance": "a1", "action": "destroy", "typed": "a1"}, log)
    append_audit({"event": "teardown", "instance": "other-sweep-box"}, log)
    store = Store.open(db, sweep="s")
    recorder = TrackerRecorder(store)
    assert recorder.mirror_audit(log, {"a1"}) == 1
    assert recorder.mirror_audit(log, {"a1"}) == 0
    append_audit({"event": "exclude", "instance": "a1", "cell": "c3"}, log)
    with log.open("ab") as handle:
        handle.write(b'{"event": "half a line", "instance": "a1"')  # being written
    assert recorder.mirror_audit(log, {"a1"}) == 1
    store.close()
    with StoreReader(db) as reader:
        rows = reader.audit()
        assert [r.event for r in rows] == ["exclude", "teardown"]
        assert rows[1].entry["action"] == "destroy"



def test_a_cell_learned_interrupted_then_failed_keeps_that_order(db: Path, profile: Profile) -> None:
    # Seen started with no queue process (interrupted), then its FINISHED line arrives, stamped
    # by the box before that observation: the report must end on what was learned last.
    tracker = HostTracker(instance(clocks_started={}, price_per_hour=2.0), profile, RULEBOOK)
    store = Store.open(db, sweep="s")
    recorder = TrackerRecorder(store)
    marks = f"{ts('00:00:00')} [1/1] STARTING a (t, 2ep)\n"
    late = remote("01:00:00")  # the observations come after both of the box's stamps
    tracker.absorb(snapshot(observed_at=late, queue_text="a.yaml t 2\n", marks=marks, pids=()))
    recorder.record_tick(late, {"a1": tracker}, [])
    marks += f"{ts('00:05:00')} [1/1] FINISHED a (exit=1)\n"
    tracker.absorb(snapshot(observed_at=late + 10, queue_text="a.yaml t 2\n", marks=marks, pids=()))
    recorder.record_tick(late + 10, {"a1": tracker}, [])
    store.close()
    with StoreReader(db) as reader:
        changes = reader.cell_changes(newest_first=False)
    assert [c.to_state for c in changes] == ["interrupted", "failed"]
    assert changes[1].at >= changes[0].at and changes[1].exit_code == 1
