"""Pilot tests of the live app against the real demo fleet and a real OpenSSH sshd."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from cockpit.services.config.acks import AckStore
from cockpit.services.config.sweepfile import load_sweep
from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.fleet import FleetScreen
from cockpit.ui.modals import HostKeyScreen
from tests.sshd import Sshd
from tests.test_status_sshd import write_box, write_sweep
from tests.test_ui_app import texts


async def wait_until(pilot: object, check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await pilot.pause(0.1)  # type: ignore[attr-defined]


async def test_fleet_table_shows_three_live_rows(demo: Path, tmp_path: Path) -> None:
    app = CockpitApp(load_sweep(demo / "sweep.yaml"), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    started = time.monotonic()
    async with app.run_test(size=(140, 30)) as pilot:
        table = app.query_one("#fleet", DataTable)
        assert table.row_count == 3
        await wait_until(pilot, lambda: all(t.snapshot for t in app.trackers.values()), 15,
                         "a record from every demo box")
        await wait_until(pilot, lambda: all("%" in str(table.get_cell(n, "GPU"))
                                            for n in ("a1", "r1", "v1")), 5, "the next repaint")
        for name in ("a1", "r1", "v1"):
            assert str(table.get_cell(name, "state")) == "connected"
            util = str(table.get_cell(name, "GPU"))
            assert util.endswith(("x1", "x2")) and "%" in util
            assert str(table.get_cell(name, "inodes")).endswith("%")
            assert "/" in str(table.get_cell(name, "queue"))
        first = {name: t.snapshot.seq for name, t in app.trackers.items() if t.snapshot}
        await asyncio.sleep(2.5)
        await pilot.pause()
        assert all(app.trackers[n].snapshot.seq > first[n] for n in first), "numbers are live"  # type: ignore[union-attr]
        records = sum(t.snapshot.seq for t in app.trackers.values())  # type: ignore[union-attr]
        assert app.repaints <= time.monotonic() - started + 1, "at most one repaint a second"
        assert app.repaints < records, "a burst of records is one repaint"
        await pilot.press("q")


async def test_enter_opens_box_screen_with_four_filled_panels(demo: Path, tmp_path: Path) -> None:
    app = CockpitApp(load_sweep(demo / "sweep.yaml"), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_until(pilot, lambda: all(t.snapshot for t in app.trackers.values()), 15,
                         "a record from every demo box")
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, BoxScreen), 5, "the box screen")
        screen = app.screen
        assert isinstance(screen, BoxScreen) and screen.instance == "a1"
        await wait_until(pilot, lambda: screen.tables()["queue"].row_count == 4, 10, "queue rows")
        assert "A100" in texts([screen.query_one("#gpu-body", Static)])
        disk = texts([screen.query_one("#disk-body", Static)])
        assert "survives stop" in disk and "inodes" in disk and "OOM kills" in disk
        # A resume command only when the queue is known not to run (issue 14); the shared demo
        # queue may have been stopped by an earlier test.
        head = texts([screen.query_one("#queue-head", Static)])
        assert ("resume at" in head) == (app.trackers["a1"].alive is False), head
        detail = texts([screen.query_one("#queue-detail", Static)])
        assert "master log" in detail or "no mark in the master log" in detail, detail
        assert screen.query_one("#failure-table", DataTable).columns
        assert texts([screen.query_one("#failure-detail", Static)]).strip()
        assert len(screen.query("#sparks .spark")) == 4, "util and memory per GPU"
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert isinstance(app.screen, FleetScreen)


async def test_demo_failures_arrive_classified_in_the_box_screen(demo: Path, tmp_path: Path) -> None:
    app = CockpitApp(load_sweep(demo / "sweep.yaml"), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    async with app.run_test(size=(160, 44)) as pilot:
        tracker = app.trackers["a1"]
        await wait_until(pilot, lambda: any(e.rule_id == "M2" and e.exit_code == 1
                                            for e in tracker.failures.events), 90,
                         "det_baseline's CUDA OOM, classified and joined with its exit code")
        fleet = app.query_one("#fleet", DataTable)
        await wait_until(pilot, lambda: str(fleet.get_cell("a1", "alerts")) != "-", 5, "an alert")
        app.open_box("a1")
        await wait_until(pilot, lambda: isinstance(app.screen, BoxScreen), 5, "the box screen")
        screen = app.screen
        assert isinstance(screen, BoxScreen)
        await wait_until(pilot, lambda: bool(screen.query("#failure-table")), 5, "the panels")
        table = screen.tables()["failures"]
        await wait_until(pilot, lambda: table.row_count >= 1, 5, "a failure row")
        rows = {str(table.get_cell(k, "rule")): str(table.get_cell(k, "class")) for k in table.rows}
        assert rows.get("M2") == "real-bug", rows
        assert "det_baseline failed: CUDA out of memory" in texts([screen.query_one("#health", Static)])
        await pilot.press("q")


@pytest.mark.sshd
async def test_unreachable_host_goes_stale_then_recovers(sshd: Sshd, tmp_path: Path) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    app = CockpitApp(load_sweep(write_sweep(tmp_path, config, box)), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    async with app.run_test(size=(140, 30)) as pilot:
        table = app.query_one("#fleet", DataTable)
        await wait_until(pilot, lambda: str(table.get_cell("b1", "state")) == "connected", 20,
                         "connected")
        sshd.stop()
        # keepalive 1s x 3 (the sweep's ssh settings): stale within the keepalive window.
        await wait_until(pilot, lambda: str(table.get_cell("b1", "state")).startswith("stale since"),
                         15, "stale since T")
        sshd.start()
        app.reconnect("b1")  # skip the backoff wait, as the `r` key does
        await wait_until(pilot, lambda: str(table.get_cell("b1", "state")) == "connected", 30,
                         "recovered")
        seq = app.trackers["b1"].snapshot.seq  # type: ignore[union-attr]
        await wait_until(pilot, lambda: app.trackers["b1"].snapshot.seq > seq, 10,  # type: ignore[union-attr]
                         "fresh records after recovery")


@pytest.mark.sshd
async def test_unknown_host_key_approved_by_keyboard_then_connects(sshd: Sshd, tmp_path: Path) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path, trusted=False)
    app = CockpitApp(load_sweep(write_sweep(tmp_path, config, box)), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, HostKeyScreen), 20, "the key screen")
        screen = app.screen
        assert isinstance(screen, HostKeyScreen)
        fingerprint = app.trackers["b1"].state.host_key.fingerprint  # type: ignore[union-attr]
        # The screen is pushed before its body is composed: wait for it (on a loaded machine
        # the first query can see only the title).
        await wait_until(pilot, lambda: fingerprint in texts(screen.query(Static)), 10,
                         "the fingerprint on the key screen")
        await pilot.press("y")
        table = app.query_one("#fleet", DataTable)
        await wait_until(pilot, lambda: str(table.get_cell("b1", "state")) == "connected", 30,
                         "connected after approval")
