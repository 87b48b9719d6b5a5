"""An agent's teardown request in the TUI: a toast, the requests list (`A`), the teardown
screen showing it, `d` refusing one, and approval only through the gate — a mistyped name leaves it pending,
the typed instance name (after a fresh N/N) approves it and runs the demo's stand-in."""

from __future__ import annotations

import asyncio
from pathlib import Path

from textual.widgets import DataTable, Static

from cockpit.models.gate import GateState
from cockpit.services.agent.requests import RequestBook, RequestState
from cockpit.services.config.acks import AckStore
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.watch.wiring import Session
from cockpit.ui.app import CockpitApp
from cockpit.ui.custody import ConfirmByTyping, TeardownScreen, VerifyScreen
from cockpit.ui.requests import RequestsScreen
from tests.test_mcp_server import mcp_session, ok, wait_v1
from tests.test_ui_app import texts
from tests.test_ui_fleet import wait_until


async def test_a_request_shows_and_is_approved_only_by_typing_the_name(demo: Path, tmp_path: Path) -> None:
    await asyncio.to_thread(wait_v1, demo)
    db = tmp_path / "store.db"
    async with mcp_session(demo / "sweep.yaml", "--db", str(db), name="pilot-agent") as session:
        made = await ok(session, "request_teardown", instance="v1", action="destroy",
                        reason="3/3 verified, idle")
        other = await ok(session, "request_teardown", instance="v1", action="stop",
                         reason="pause it")
    rid, stop_id = made["request"]["id"], other["request"]["id"]
    calls = demo / "teardown-calls.log"
    before = calls.read_text() if calls.exists() else ""

    app = CockpitApp(load_sweep(demo / "sweep.yaml"), banners=False,
                     acks=AckStore(tmp_path / "acks.json"), session=Session(db))
    async with app.run_test(size=(160, 44), notifications=True) as pilot:
        await wait_until(pilot, lambda: any("pilot-agent" in str(n.message)
                                            for n in app._notifications), 10, "the toast")
        await wait_until(pilot, lambda: app.trackers["v1"].snapshot is not None, 20, "v1 connected")
        await pilot.press("A")
        await wait_until(pilot, lambda: isinstance(app.screen, RequestsScreen), 5, "the list")
        table = app.screen.query_one("#requests-table", DataTable)
        await wait_until(pilot, lambda: table.row_count == 2, 5, "the request rows")
        assert str(table.get_cell(str(rid), "state")) == "pending"
        assert str(table.get_cell(str(rid), "who")) == "pilot-agent 0.1"
        await pilot.press("escape")

        app.open_verify("v1")
        await wait_until(pilot, lambda: isinstance(app.screen, VerifyScreen), 5, "verify")
        await pilot.press("p")
        custody = app.custody_of("v1")
        await wait_until(pilot, lambda: custody.report is not None and not custody.busy, 60, "verify")
        assert custody.gate.state is GateState.VERIFIED, custody.report
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TeardownScreen), 5, "teardown")
        teardown = app.screen
        await pilot.pause(0.6)
        head = texts([teardown.query_one("#teardown-head", Static)])
        assert f"request #{rid} v1 destroy by pilot-agent 0.1: 3/3 verified, idle" in head

        await pilot.press("d")  # the cursor is on stop (the reversible one first): refused
        await pilot.pause(0.3)
        with RequestBook(db) as book:
            refused = book.get(stop_id)
        assert refused is not None and refused.state is RequestState.REFUSED

        await pilot.press("down", "enter")  # destroy
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmByTyping), 5, "the dialog")
        await pilot.press(*"v2", "enter")  # mistyped: not approved, the request stays pending
        await pilot.pause(0.3)
        with RequestBook(db) as book:
            pending = book.get(rid)
        assert pending is not None and pending.state is RequestState.PENDING
        assert custody.gate.state is GateState.VERIFIED
        assert (calls.read_text() if calls.exists() else "") == before

        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmByTyping), 5, "the dialog")
        await pilot.press(*"v1", "enter")
        await wait_until(pilot, lambda: custody.gate.state is GateState.DONE, 30, "the teardown")
        with RequestBook(db) as book:
            approved = book.get(rid)
        assert approved is not None and approved.state is RequestState.APPROVED
        assert "name typed" in approved.decided_by
        assert "vastai destroy instance demo-v1-0001" in calls.read_text()
        await pilot.press("q")
