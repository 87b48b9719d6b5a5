"""The billing view: price x uptime, what still bills after each action, totals per currency,
and the platforms' own word beside the cockpit's (served by a real local HTTP server)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer
from textual.widgets import DataTable, Static

from cockpit.models.billing import SweepBill, billing_row
from cockpit.models.hostview import HostTracker
from cockpit.models.profile import Profile
from cockpit.models.snapshot import HostState, Reachability
from cockpit.services.config.profiles import load_named
from cockpit.services.config.sweepfile import LoadedSweep, load_sweep
from cockpit.ui.billing import BillingScreen
from tests.replay import SWEEP
from tests.test_hostview import RULEBOOK, gpu, instance, snapshot
from tests.test_probe_script import Box
from tests.test_ui_app import make_app, settle, texts, until_ui

DATA = Path(__file__).parent / "data" / "platforms"
KEY = "billing-view-test-key-7f3a"


@pytest.fixture(scope="module")
def vastai() -> Profile:
    return load_named("vastai")


def test_price_times_uptime_and_what_bills_after_each_action(vastai: Profile) -> None:
    tracker = HostTracker(instance(name="v1", profile="vastai", clocks_started={}, price_per_hour=2.4),
                          vastai, RULEBOOK)
    tracker.absorb(dataclasses.replace(snapshot(gpus=(gpu(90.0),)), uptime_s=5400.0))
    row = billing_row(tracker, 0.0)
    assert row.now.startswith("running") and row.so_far == pytest.approx(3.6)
    assert row.currency == "USD"
    after = dict(row.after)
    assert after["Stop instance"].startswith("still bills: The disk bills forever")
    assert "local volume" in after["Destroy instance"]
    tracker.absorb_state(HostState("v1", Reachability.STALE, 10.0))
    assert billing_row(tracker, 20.0).now == "unreachable: assume it still bills"
    unpriced = HostTracker(instance(name="v2", profile="vastai", clocks_started={}), vastai, RULEBOOK)
    bill = SweepBill((row, billing_row(unpriced, 0.0)))
    assert bill.per_hour == {"USD": pytest.approx(2.4)} and bill.so_far == {"USD": pytest.approx(3.6)}
    assert bill.unpriced == ("v2",)


def test_the_probe_reports_uptime(tmp_path: Path) -> None:
    box = Box(tmp_path)
    try:
        snap = box.probe().tick()
    finally:
        box.cleanup()
    assert isinstance(snap.uptime_s, float) and snap.uptime_s > 0


async def test_dollar_opens_the_billing_view_with_totals_per_currency(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VAST_API_KEY", "RUNPOD_API_KEY", "LAMBDA_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no CLI key files: the platforms are "unknown"
    app = make_app(tmp_path)
    async with app.run_test() as pilot:
        await settle(app, pilot)
        await pilot.press("dollar_sign")
        await until_ui(pilot, lambda: isinstance(app.screen, BillingScreen) and app.screen.polls > 0,
                       "the billing view's first poll")
        total = texts([app.screen.query_one("#billing-total", Static)])
        # AutoDL bills in CNY, RunPod and vast.ai in USD: never one "5.07/h".
        assert "¥1.98/h + $3.09/h" in total and "5.07" not in total
        clocks = texts([app.screen.query_one("#billing-clocks", Static)])
        assert "runpod: platform state unknown since" in clocks and "no API key: set RUNPOD_API_KEY" in clocks
        table = app.screen.query_one("#billing-table", DataTable)
        assert "CNY/h" in str(table.get_cell("a1", "per hour"))
        assert "USD/h" in str(table.get_cell("r1", "per hour"))
        detail = texts([app.screen.query_one("#billing-detail", Static)])
        assert "what still bills after each teardown action" in detail
        await pilot.press("escape", "q")


def watched_sweep(directory: Path) -> LoadedSweep:
    """The replay sweep with the platforms' instance ids (r1 and v1 are on the accounts)."""
    text = SWEEP.replace("    host: runpod-r1\n", "    host: runpod-r1\n    instance_id: xedezhzb9la3ye\n")
    text = text.replace("    host: vast-v1\n", "    host: vast-v1\n    instance_id: \"312\"\n")
    path = directory / "sweep.yaml"
    path.write_text(text)
    return load_sweep(path)


def serve_accounts(server: HTTPServer) -> None:
    def recorded(name: str) -> object:
        return json.loads((DATA / name).read_text())

    server.expect_request("/vast/api/v1/instances/").respond_with_json(recorded("vastai_instances.json"))
    server.expect_request("/vast/api/v0/users/current/").respond_with_json(recorded("vastai_user.json"))
    server.expect_request("/runpod/pods").respond_with_json(recorded("runpod_pods.json"))
    server.expect_request("/runpod/graphql").respond_with_json(recorded("runpod_myself.json"))


async def test_platform_truth_orphans_runway_and_disagreement(
        tmp_path: Path, httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    serve_accounts(httpserver)
    base = httpserver.url_for("").rstrip("/")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("VAST_API_KEY", KEY)
    monkeypatch.setenv("RUNPOD_API_KEY", KEY)
    monkeypatch.setenv("COCKPIT_VASTAI_API", f"{base}/vast")
    monkeypatch.setenv("COCKPIT_RUNPOD_API", f"{base}/runpod")
    monkeypatch.setenv("COCKPIT_RUNPOD_GRAPHQL_API", f"{base}/runpod/graphql")
    app = make_app(tmp_path, loaded=watched_sweep(tmp_path))
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(app, pilot)
        await pilot.press("dollar_sign")
        await until_ui(pilot, lambda: isinstance(app.screen, BillingScreen) and app.screen.polls > 0,
                       "the billing view's first poll")
        screen = app.screen
        assert isinstance(screen, BillingScreen)
        table = screen.query_one("#billing-table", DataTable)
        rows = set(table.rows)
        # Orphans: on the accounts, in no sweep; they bill too.
        assert {"vastai:313", "vastai:314", "runpod:k3l9q2mz7wq0aa"} <= {str(k.value) for k in rows}
        # v1 is unreachable here; the platform says it runs: still billing, highlighted.
        assert "unreachable: still billing 0.40 USD/h (platform)" in str(table.get_cell("v1", "now"))
        assert "running (running)" in str(table.get_cell("v1", "platform says"))
        assert "running (RUNNING) 0.69 USD/h" in str(table.get_cell("r1", "platform says"))
        clocks = texts([screen.query_one("#billing-clocks", Static)])
        assert "balance $12.30 at $0.72/h: about 17h" in clocks
        assert "RunPod stops pods, then terminates those without a network volume" in clocks
        assert "v1: contract ends in 5h" in clocks
        assert "vastai:313: stopped but still billing storage $0.99/day" in clocks
        total = texts([screen.query_one("#billing-total", Static)])
        assert "¥1.98/h" in total and "3 instance(s) on the account that no sweep watches" in total
        usd = 0.69 + 0.4028 + 0.0411 + 1.1022 + 100 * 0.20 / 730
        assert f"${usd:.2f}/h" in total
        # The runway alerts fired once through the latch, with the bell and a toast.
        kinds = [a.kind for a in app.alerts_fired]
        assert kinds.count("balance-runway") == 2 and "contract-end" in kinds
        assert KEY not in clocks + total
        await pilot.press("escape", "q")
