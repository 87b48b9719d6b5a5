"""On the demo fleet, by keyboard alone: finished cells → N/N loaded → an approved, audited
teardown that runs the demo box's (stand-in) command; a failed cell excluded by typing."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable, Static

from cockpit.models.gate import GateState
from cockpit.services.config.acks import AckStore
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.custody.audit import read_audit
from cockpit.ui.app import CockpitApp
from cockpit.ui.custody import ConfirmByTyping, TeardownScreen, VerifyScreen
from tests.test_ui_app import texts
from tests.test_ui_fleet import wait_until


def queue_done(demo: Path, box: str, cells: int) -> bool:
    log = demo / "boxes" / box / "data" / "q1_master.log"
    return log.exists() and log.read_text().count("FINISHED") >= cells


async def test_verify_to_n_of_n_then_an_approved_audited_teardown(demo: Path, tmp_path: Path) -> None:
    app = CockpitApp(load_sweep(demo / "sweep.yaml"), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    calls = demo / "teardown-calls.log"
    before = calls.read_text() if calls.exists() else ""
    async with app.run_test(size=(150, 44)) as pilot:
        await wait_until(pilot, lambda: queue_done(demo, "v1", 3), 90, "v1's three cells")
        await wait_until(pilot, lambda: app.trackers["v1"].snapshot is not None, 20, "v1 connected")
        await pilot.press("down", "down", "v")  # fleet rows: a1, r1, v1
        await wait_until(pilot, lambda: isinstance(app.screen, VerifyScreen), 5, "the verify screen")
        screen = app.screen
        assert isinstance(screen, VerifyScreen) and screen.instance == "v1"
        await pilot.press("t")  # teardown before verifying: everything irreversible is locked
        await wait_until(pilot, lambda: isinstance(app.screen, TeardownScreen), 5, "teardown")
        locked = app.screen
        assert isinstance(locked, TeardownScreen)
        await pilot.pause(0.3)
        table = locked.query_one("#teardown-table", DataTable)
        assert str(table.get_cell("destroy", "lock")).startswith("locked")
        await pilot.press("down", "enter")  # destroy: refused, no dialog
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmByTyping)
        await pilot.press("escape")
        await pilot.press("p")
        custody = app.custody_of("v1")
        await wait_until(pilot, lambda: custody.report is not None and not custody.busy, 60,
                         "pull and verify")
        assert custody.gate.state is GateState.VERIFIED, custody.report
        await pilot.pause(0.6)
        foot = texts([screen.query_one("#verify-foot", Static)])
        assert "3/3 loaded" in foot and "receipt:" in foot
        marker = json.loads((demo / "pulled" / "v1.cockpit-verified.json").read_text())
        assert marker["loaded"] == 3
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TeardownScreen), 5, "teardown")
        teardown = app.screen
        assert isinstance(teardown, TeardownScreen)
        await pilot.pause(0.6)
        table = teardown.query_one("#teardown-table", DataTable)
        assert list(k.value for k in table.rows) == ["stop", "destroy"], "the reversible stop first"
        assert str(table.get_cell("destroy", "lock")) == "open"
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmByTyping), 5, "the dialog")
        await pilot.press(*"v2", "enter")  # a mistyped name does not approve
        await pilot.pause(0.3)
        assert custody.gate.state is GateState.VERIFIED
        assert calls.read_text() == before if calls.exists() else True
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmByTyping), 5, "the dialog")
        await pilot.press(*"v1", "enter")
        await wait_until(pilot, lambda: custody.gate.state is GateState.DONE, 30, "the teardown")
        await pilot.pause(0.6)
        output = texts([teardown.query_one("#teardown-output", Static)])
        assert "vastai destroy instance demo-v1-0001" in output
        await pilot.press("q")
    assert "vastai destroy instance demo-v1-0001" in calls.read_text()[len(before):]
    (record,) = [r for r in read_audit() if r.get("action") == "destroy" and r["event"] == "executed"]
    assert record["instance"] == "v1" and record["exit_code"] == 0 and record["typed"] == "v1"
    assert record["verified"] == "3/3 loaded" and len(record["manifest_sha256"]) == 64


async def test_a_failed_cell_is_excluded_only_by_typing_its_name(fresh_demo: Path, tmp_path: Path) -> None:
    # r1's last cell must still run when the exclusion is typed: a fleet of its own (CI, both
    # cores busy: the shared fleet had finished seg_small and the gate was rightly VERIFIED)
    demo = fresh_demo
    app = CockpitApp(load_sweep(demo / "sweep.yaml"), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    async with app.run_test(size=(150, 44)) as pilot:
        await wait_until(pilot, lambda: queue_done(demo, "r1", 2), 90, "r1's failing cell")
        app.open_verify("r1")
        await wait_until(pilot, lambda: isinstance(app.screen, VerifyScreen), 5, "the verify screen")
        await pilot.press("p")
        custody = app.custody_of("r1")
        await wait_until(pilot, lambda: custody.report is not None and not custody.busy, 60, "verify")
        verification = custody.report.verification if custody.report else None
        assert verification is not None
        statuses = {v.cell: v.status.value for v in verification.verdicts}
        assert statuses["seg_baseline"] == "ok" and statuses["seg_big"] == "failed on box"
        expected_before = verification.expected
        await pilot.pause(0.6)
        await pilot.press("down", "x")  # rows: seg_baseline, seg_big, seg_small
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmByTyping), 5, "the dialog")
        await pilot.press(*"seg", "enter")  # wrong: nothing excluded
        await pilot.pause(0.3)
        assert "seg_big" not in custody.excluded
        await pilot.press("x")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmByTyping), 5, "the dialog")
        await pilot.press(*"seg_big", "enter")
        await wait_until(pilot, lambda: "seg_big" in custody.excluded, 5, "the exclusion")
        assert custody.report is not None and custody.report.verification is not None
        assert custody.report.verification.expected == expected_before - 1
        assert custody.gate.state is GateState.LOCKED, "seg_small has not finished: still not N/N"
        # RunPod's "Stop pod" is reversible but wipes the container disk: locked short of N/N.
        await pilot.press("t")
        await wait_until(pilot, lambda: isinstance(app.screen, TeardownScreen), 5, "teardown")
        await pilot.pause(0.6)
        table = app.screen.query_one("#teardown-table", DataTable)
        assert next(k.value for k in table.rows) == "stop"
        assert str(table.get_cell("stop", "lock")).startswith("locked: needs N/N")
        await pilot.press("a")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmByTyping), "no approval dialog while locked"
        await pilot.press("q")
    pressed = [r for r in read_audit() if r.get("event") == "locked action pressed"]
    assert pressed and pressed[-1]["action"] == "stop" and pressed[-1]["instance"] == "r1"
    (record,) = [r for r in read_audit() if r.get("event") == "exclude"]
    assert record["cell"] == "seg_big" and record["typed"] == "seg_big"
    assert "exit=1" in record["failure"] or "torch.save" in record["failure"] or record["failure"]
