"""A frozen link shows fast and honestly with the default settings (no keepalive overrides).

One box in a network namespace with its own sshd; the link goes dead (packets vanish). With
the defaults the box is shown stale within about twice the keepalive interval (its records
stopped, or the keepalive found the link dead, whichever comes first, and the state says which),
and the watcher reconnects once the link is back. The detection time is printed as a figure,
never asserted (shared machines are noisy); the deadlines only bound a broken run."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import pytest

from cockpit.models.events import HostStateChanged, SnapshotTaken
from cockpit.models.snapshot import Reachability
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import Fleet
from tests.netns import NetBox
from tests.waiting import until

pytestmark = pytest.mark.sshd


async def test_a_frozen_link_is_stale_within_a_few_seconds_with_defaults(tmp_path: Path) -> None:
    box = NetBox(tmp_path, 21)
    box.start()
    try:
        config = tmp_path / "ssh_config"
        config.write_text(box.config_block("nb21"))
        known = tmp_path / "known_hosts"
        known.write_text(box.sshd.known_hosts_line())
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(f"sweep: frozen\nssh: {{config: [{config}], known_hosts: [{known}]}}\n"
                         "instances:\n  - name: f1\n    profile: generic-ssh\n    host: nb21\n")
        loaded = load_sweep(sweep)
        settings = loaded.sweep.ssh
        assert (settings.keepalive_interval, settings.keepalive_count_max) == ("3s", 1)
        fleet = Fleet(loaded.sweep, loaded.profiles, loaded.directory)
        states: list[tuple[float, Reachability, str]] = []
        records: list[float] = []

        async def consume() -> None:
            async for event in fleet.events():
                if isinstance(event, HostStateChanged):
                    states.append((time.monotonic(), event.state.reachability, event.state.detail))
                elif isinstance(event, SnapshotTaken):
                    records.append(time.monotonic())

        fleet.start()
        reader = asyncio.create_task(consume())
        try:
            await until("two records before the cut", lambda: len(records) >= 2, 30)
            box.cut()
            cut_at = time.monotonic()
            await until("stale after the cut", lambda: any(
                t > cut_at and r is Reachability.STALE for t, r, _ in states), 60)
            first = next((t, d) for t, r, d in states if t > cut_at and r is Reachability.STALE)
            # It says why: records stopped, or the keepalive found the link dead.
            assert "no record" in first[1] or "keepalive" in first[1], states
            box.restore()
            restored = time.monotonic()
            await until("a record after the link came back",
                        lambda: any(t > restored for t in records), 60)
            back = min(t for t in records if t > restored) - restored
            print(f"frozen link, defaults: stale after {first[0] - cut_at:.1f}s ({first[1]}), "
                  f"first record {back:.1f}s after the link returned")
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            await fleet.stop()
    finally:
        box.stop()
