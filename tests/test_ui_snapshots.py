"""Snapshot tests of the main screens: fixed size, fixed clock, replayed records.

Plain `def` functions (pytest-textual-snapshot runs its own event loop). Regenerate with
`pytest tests/test_ui_snapshots.py --snapshot-update` after an intended UI change, and look
at the report before committing the new SVGs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tests.test_ui_app import make_app, settle

SIZE = (120, 40)


@pytest.fixture(autouse=True)
def _utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Clock times in the failure log are local time: pin the zone."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_fleet_overview(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app = make_app(tmp_path)

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_box_screen(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app = make_app(tmp_path, theme="cockpit-light")

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(app, pilot)
        await pilot.press("enter")
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_danger_banner(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app = make_app(tmp_path, banners=True, theme="cockpit-contrast")

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_host_key_screen(snap_compare: Callable[..., bool], tmp_path: Path) -> None:
    app = make_app(tmp_path, key_problem=True)

    async def run_before(pilot: Pilot[Any]) -> None:
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
