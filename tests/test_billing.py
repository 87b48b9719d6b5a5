"""The billing view: price x uptime, what still bills after each action, a sweep total."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from textual.widgets import Static

from cockpit.models.billing import SweepBill, billing_row
from cockpit.models.hostview import HostTracker
from cockpit.models.profile import Profile
from cockpit.models.snapshot import HostState, Reachability
from cockpit.services.config.profiles import load_named
from cockpit.ui.billing import BillingScreen
from tests.test_hostview import RULEBOOK, gpu, instance, snapshot
from tests.test_probe_script import Box
from tests.test_ui_app import make_app, settle, texts


@pytest.fixture(scope="module")
def vastai() -> Profile:
    return load_named("vastai")


def test_price_times_uptime_and_what_bills_after_each_action(vastai: Profile) -> None:
    tracker = HostTracker(instance(name="v1", profile="vastai", clocks_started={}, price_per_hour=2.4),
                          vastai, RULEBOOK)
    tracker.absorb(dataclasses.replace(snapshot(gpus=(gpu(90.0),)), uptime_s=5400.0))
    row = billing_row(tracker, 0.0)
    assert row.now.startswith("running") and row.so_far == pytest.approx(3.6)
    after = dict(row.after)
    assert after["Stop instance"].startswith("still bills: The disk bills forever")
    assert "local volume" in after["Destroy instance"]
    tracker.absorb_state(HostState("v1", Reachability.STALE, 10.0))
    assert billing_row(tracker, 20.0).now == "unreachable: assume it still bills"
    unpriced = HostTracker(instance(name="v2", profile="vastai", clocks_started={}), vastai, RULEBOOK)
    bill = SweepBill((row, billing_row(unpriced, 0.0)))
    assert bill.per_hour == pytest.approx(2.4) and bill.so_far == pytest.approx(3.6)
    assert bill.unpriced == ("v2",)


def test_the_probe_reports_uptime(tmp_path: Path) -> None:
    box = Box(tmp_path)
    try:
        snap = box.probe().tick()
    finally:
        box.cleanup()
    assert isinstance(snap.uptime_s, float) and snap.uptime_s > 0


async def test_dollar_opens_the_billing_view(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test() as pilot:
        await settle(app, pilot)
        await pilot.press("dollar_sign")
        await pilot.pause(0.3)
        assert isinstance(app.screen, BillingScreen)
        total = texts([app.screen.query_one("#billing-total", Static)])
        assert "5.07/h" in total  # 1.98 + 0.69 + 2.40: the stale box is assumed to bill
        detail = texts([app.screen.query_one("#billing-detail", Static)])
        assert "what still bills after each teardown action" in detail
        await pilot.press("escape", "q")
