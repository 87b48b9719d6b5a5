"""Fault matrix: a host that answers slowly is stale while it is late, never torn down.

A real sshd on loopback whose sessions find a `df` that sleeps once, as long as the test says. A
record later than `record_timeout` shows the box as stale but keeps the connection and the
probe (reconnecting an overloaded host only adds a handshake to its load); only a probe
silent past `record_limit` is restarted, on the same connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from cockpit.models.events import HostStateChanged, SnapshotTaken
from cockpit.models.snapshot import Reachability
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import HostWatcher
from tests.sshd import SSHD, Sshd, require
from tests.waiting import until

pytestmark = pytest.mark.sshd

SLOW_DF = """#!/bin/sh
# df that, when the test has armed it, sleeps once for the seconds written in {arm}. The
# first df to take the file (mv is atomic) sleeps; every other call, before or after, is quick.
if mv {arm} {arm}.taken 2>/dev/null; then sleep "$(cat {arm}.taken)"; fi
exec {real} "$@"
"""


def arm(path: Path, seconds: float) -> None:
    """Make the next df call on the box sleep `seconds` (written whole, then renamed in)."""
    staged = path.with_suffix(".staged")
    staged.write_text(f"{seconds:g}")
    staged.rename(path)


@pytest.fixture
def slow_box(tmp_path: Path) -> Iterator[tuple[Sshd, Path]]:
    require(SSHD, "OpenSSH sshd")
    fake = tmp_path / "fakebin"
    fake.mkdir()
    delay = tmp_path / "df-delay"
    (fake / "df").write_text(SLOW_DF.format(arm=delay, real=shutil.which("df")))
    (fake / "df").chmod(0o755)
    server = Sshd(tmp_path / "sshd", env={"PATH": f"{fake}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"})
    server.start()
    try:
        yield server, delay
    finally:
        server.stop()


def watcher_for(server: Sshd, tmp_path: Path, **timeouts: float) -> tuple[HostWatcher, list[object]]:
    config = server.write_client_files("slow", tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"""sweep: slow
ssh: {{config: [{config}], keepalive_interval: 1s, connect_timeout: 5s}}
instances:
  - name: s1
    profile: generic-ssh
    host: slow
    durable_root: {data}
""")
    loaded = load_sweep(sweep)
    events: list[object] = []
    watcher = HostWatcher(loaded.sweep.instances[0], loaded.profiles["generic-ssh"], loaded.sweep.ssh,
                          loaded.directory, emit=events.append, **timeouts)
    return watcher, events


@contextlib.asynccontextmanager
async def watching(watcher: HostWatcher) -> AsyncIterator[None]:
    """The watcher's own loop (tick every 0.2 s) for the body; stopped and closed after."""
    task = asyncio.create_task(watcher.run(0.2))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await watcher.close()


def reaches(events: list[object]) -> list[Reachability]:
    return [e.state.reachability for e in events if isinstance(e, HostStateChanged)]


def snapshots(events: list[object]) -> int:
    return sum(isinstance(e, SnapshotTaken) for e in events)


async def test_a_late_record_makes_the_box_stale_without_a_reconnect(
        slow_box: tuple[Sshd, Path], tmp_path: Path) -> None:
    server, delay = slow_box
    watcher, events = watcher_for(server, tmp_path, record_timeout=1.0, record_limit=60.0)
    async with watching(watcher):
        await until("first record", lambda: snapshots(events) >= 2, 20)
        conn, probe = watcher.conn, watcher.probe
        arm(delay, 3)
        await until("stale while the record is late", lambda: Reachability.STALE in reaches(events), 20)
        stale = next(e for e in events if isinstance(e, HostStateChanged)
                     and e.state.reachability is Reachability.STALE)
        assert isinstance(stale, HostStateChanged)
        assert "connection is up" in stale.state.detail
        count = snapshots(events)
        await until("the late record arrives and the box is connected again",
                    lambda: snapshots(events) > count + 1
                    and reaches(events)[-1] is Reachability.CONNECTED, 20)
        assert watcher.conn is conn and watcher.probe is probe, "a slow host was reconnected"
        assert watcher.probe_restarts == 0
        assert Reachability.CONNECTING not in reaches(events)[1:]


async def test_a_probe_silent_past_the_limit_is_restarted_on_the_same_connection(
        slow_box: tuple[Sshd, Path], tmp_path: Path) -> None:
    server, delay = slow_box
    watcher, events = watcher_for(server, tmp_path, record_timeout=0.5, record_limit=4.0)
    async with watching(watcher):
        await until("first record", lambda: snapshots(events) >= 1, 20)
        conn = watcher.conn
        arm(delay, 120)
        await until("stale", lambda: Reachability.STALE in reaches(events), 10)
        await until("the probe is restarted", lambda: watcher.probe_restarts >= 1, 15)
        count = snapshots(events)
        await until("records again", lambda: snapshots(events) > count, 20)
        assert watcher.conn is conn, "the connection was replaced, not just the probe"
        assert reaches(events)[-1] is Reachability.CONNECTED
