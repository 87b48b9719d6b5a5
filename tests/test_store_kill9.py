"""`kill -9` of a writer in the middle of its writes: the file stays intact, every tick it had
committed is there, at most the tick in flight is lost, and the lock frees itself."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from cockpit.services.store.db import Store, StoreReader
from cockpit.services.store.lock import find_writer

WRITER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from cockpit.services.store.db import Store

    store = Store.open(Path(sys.argv[1]), sweep="kill9", role="test")
    tick = 0
    while True:
        tick += 1
        at = 1_790_000_000.0 + tick
        with store.batch():
            for box in range(20):
                store.sample(f"b{box}", at, {"gpu0.util": float(tick % 100),
                                             "disk:/data": tick / 1000.0})
            store.cell_change("b0", f"cell{tick}", "pending", "running", at, evidence="x" * 300)
            store.event("b0", f"cell{tick}", "rule", "class", "title", "m" * 500, at)
            store.touch(at)
        # Said only after COMMIT returned: every tick printed must survive the kill.
        print(tick, flush=True)
""")

ENOUGH_TICKS = 300
DEADLINE_S = 40.0


def test_kill9_mid_write_loses_at_most_the_tick_in_flight(tmp_path: Path) -> None:
    db = tmp_path / "kill9.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db)], stdout=subprocess.PIPE,
                            text=True, env=env)
    assert proc.stdout is not None
    committed = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        while committed < ENOUGH_TICKS and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            committed = int(line)
        assert committed >= ENOUGH_TICKS, f"the writer committed only {committed} ticks"
        info = find_writer(db)
        assert info is not None and info.pid == proc.pid and info.role == "test"
        os.kill(proc.pid, signal.SIGKILL)  # while it goes on writing
        proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # Lines it printed before the kill that we had not read yet are committed too.
    for line in proc.stdout.read().split():
        committed = int(line)
    assert proc.returncode == -signal.SIGKILL

    # The kernel freed the lock with the process; the JSON it left names nobody alive.
    assert find_writer(db) is None
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    ticks = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    conn.close()
    assert committed <= ticks <= committed + 1  # at most the tick in flight is missing
    with StoreReader(db) as reader:
        assert len(reader.cell_changes(limit=1 << 30)) == ticks
        util = reader.samples("b19", "gpu0.util")
        assert len(util) == ticks  # every committed tick's samples, none half-written
        assert [c.cell for c in reader.cell_changes(limit=1)] == [f"cell{ticks}"]
    # A new writer opens it straight away and goes on.
    store = Store.open(db, sweep="kill9", role="test")
    with store.batch():
        store.event("b0", "after", "rule", "class", "title", "m", 0.0)
    store.close()
