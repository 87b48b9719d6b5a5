"""Pilot tests of the fleet table against the real demo fleet."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable

from cockpit.services.sweepfile import load_sweep
from cockpit.ui.app import CockpitApp


async def test_fleet_table_shows_three_live_rows(demo: Path) -> None:
    app = CockpitApp(load_sweep(demo / "sweep.yaml"))
    async with app.run_test(size=(140, 30)) as pilot:
        table = app.query_one("#fleet", DataTable)
        assert table.row_count == 3
        for _ in range(100):
            await pilot.pause(0.1)
            if len(app.snapshots) == 3:
                break
        assert set(app.snapshots) == {"a1", "r1", "v1"}
        for name in ("a1", "r1", "v1"):
            assert table.get_cell(name, "state") == "connected"
            util = str(table.get_cell(name, "GPU util"))
            assert util.endswith(("x1", "x2")) and "%" in util
            assert str(table.get_cell(name, "inodes")).endswith("%")
        first = {name: snap.seq for name, snap in app.snapshots.items()}
        await asyncio.sleep(2.5)
        await pilot.pause()
        assert all(app.snapshots[name].seq > first[name] for name in first), "numbers are live"
        await pilot.press("q")
