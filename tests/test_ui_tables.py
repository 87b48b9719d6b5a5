"""The tables of a daily driver (issue 18): sorting, vi keys, totals, per-row age, jumping to a
failed cell, stale dimming, the last teardown action on the fleet row, and the smaller fixes
(time to full, the demo's accuracy, the verify screen's wording).

Pilot tests on the replayed fleet of tests/replay.py (real records, a clock the test moves).
"""

from __future__ import annotations

import random
from pathlib import Path

from rich.text import Text
from textual.widgets import DataTable

from cockpit.demo.trainer import metric_for
from cockpit.models.custody import CellStatus, CellVerdict, Verification
from cockpit.models.durations import format_duration
from cockpit.models.events import HostStateChanged
from cockpit.models.gate import GateState
from cockpit.models.hostview import FULL_HORIZON_S, time_to_full
from cockpit.models.snapshot import HostState, Reachability
from cockpit.services.config.acks import AckStore
from cockpit.services.custody.verify import VerifyReport
from cockpit.ui.app import CockpitApp
from cockpit.ui.custody import VerifyScreen, without_locked
from cockpit.ui.events import EventsScreen
from cockpit.ui.fleet import FleetScreen, directed_key, sort_key
from tests.replay import NOW, replay_events, replay_sweep, source_of
from tests.test_ui_app import composed, open_queue, settle, texts, until_ui

SIZE = (120, 40)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def make_app(tmp_path: Path, clock: Clock | None = None) -> CockpitApp:
    events = replay_events(with_key_problem=False)
    return CockpitApp(replay_sweep(tmp_path), source=lambda: source_of(events),
                      clock=clock or (lambda: NOW), acks=AckStore(tmp_path / "acks.json"),
                      banners=False, theme="cockpit-dark")


def fleet(app: CockpitApp) -> FleetScreen:
    screen = app.screen
    assert isinstance(screen, FleetScreen), screen
    return screen


def order(app: CockpitApp) -> list[str]:
    return [str(row.key.value) for row in fleet(app).table().ordered_rows]


def test_sort_keys_read_numbers_durations_and_put_blanks_last() -> None:
    assert sort_key("95%") > sort_key("75%")
    assert sort_key("1m5s") > sort_key("59s")
    assert sort_key("3/4 aug_strong") > sort_key("2/3 seg_small")
    assert sort_key("¥1.98") < sort_key("$2.40")
    blanks = [directed_key(v, reverse) for v in ("", "-", "n/a") for reverse in (False, True)]
    for reverse in (False, True):
        assert all(directed_key("5%", reverse) < blank for blank in blanks)
    assert directed_key("95%", True) < directed_key("75%", True)


async def test_s_cycles_the_sort_column_o_reverses_and_a_header_click_sorts(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = fleet(app)
        assert order(app) == ["a1", "r1", "v1"]  # the sweep's order until asked
        await pilot.press("s")  # instance
        assert screen.sort_column == "instance"
        for _ in range(screen.shown_columns.index("disk")):
            await pilot.press("s")
        assert screen.sort_column == "disk"
        # a1 75%, r1 95%, v1 has no reading yet: it stays last both ways.
        assert order(app) == ["a1", "r1", "v1"]
        assert str(screen.table().columns[next(k for k in screen.table().columns
                                               if k.value == "disk")].label) == "disk▲"
        await pilot.press("o")
        assert order(app) == ["r1", "a1", "v1"]
        assert "sorted by disk (reversed)" in screen.totals().plain
        # A click on the GPU header sorts by it (a1 52%, r1 12%); a second click reverses.
        table = screen.table()
        x = 1 + sum(column.get_render_width(table) for column in table.ordered_columns
                    if screen.shown_columns.index(str(column.key.value))
                    < screen.shown_columns.index("GPU"))
        await pilot.click("#fleet", offset=(x + 1, 1))
        await pilot.pause(0.1)
        assert screen.sort_column == "GPU" and not screen.sort_reverse
        assert order(app) == ["r1", "a1", "v1"]
        await pilot.click("#fleet", offset=(x + 1, 1))
        await pilot.pause(0.1)
        assert screen.sort_reverse and order(app) == ["a1", "r1", "v1"]


async def test_j_k_g_G_move_the_cursor_on_the_fleet_queue_and_events(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = fleet(app).table()
        assert table.cursor_row == 0
        await pilot.press("j")
        assert table.cursor_row == 1
        await pilot.press("G")
        assert table.cursor_row == 2
        await pilot.press("k")
        assert table.cursor_row == 1
        await pilot.press("g")
        assert table.cursor_row == 0
        _, queue = await open_queue(pilot, app, 4)
        await pilot.press("G")
        assert queue.cursor_row == 3
        await pilot.press("k", "k")
        assert queue.cursor_row == 1
        await pilot.press("g")
        assert queue.cursor_row == 0
        await pilot.press("j")
        assert queue.cursor_row == 1
        await pilot.press("escape")
        app.push_screen(EventsScreen())
        await until_ui(pilot, lambda: composed(app, EventsScreen, "#events-table"), "events")
        events = app.screen.query_one("#events-table", DataTable)
        assert events.has_focus
        await until_ui(pilot, lambda: events.row_count >= 2, "this session's alerts listed")
        await pilot.press("G")
        assert events.cursor_row == events.row_count - 1
        await pilot.press("g", "j")
        assert events.cursor_row == 1
        await pilot.press("escape")
        await pilot.press("dollar_sign")
        await until_ui(pilot, lambda: len(app.screen.query("#billing-table")) == 1, "billing")
        billing = app.screen.query_one("#billing-table", DataTable)
        await until_ui(pilot, lambda: billing.row_count >= 3, "billing rows")
        billing.focus()
        await pilot.press("G")
        assert billing.cursor_row == billing.row_count - 1
        await pilot.press("k")
        assert billing.cursor_row == billing.row_count - 2


async def test_totals_row_counts_boxes_gpus_alerts_and_money_per_currency(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = fleet(app)
        totals = screen.totals().plain
        alerts = sum(len(t.alerts(NOW)) for t in app.trackers.values())
        # a1: two GPUs at 97% and 6% (one busy); r1: one at 12% (busy); v1: no reading.
        assert totals.startswith("3 boxes (1 not connected) · GPUs busy 2/3")
        assert f"alerts {alerts}" in totals and alerts > 0
        assert "¥1.98/h + $3.09/h" in totals  # never summed across currencies
        shown = str(screen.query_one("#fleet-totals").render())
        assert "GPUs busy 2/3" in shown


async def test_age_per_row_counts_seconds_since_the_last_record(tmp_path: Path) -> None:
    clock = Clock()
    app = make_app(tmp_path, clock)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = fleet(app).table()
        last = app.trackers["a1"].snapshot
        assert last is not None
        await until_ui(pilot, lambda: str(table.get_cell("a1", "age"))
                       == format_duration(NOW - last.observed_at), "a1's age")
        clock.now += 65  # no record arrives: the age must keep counting on its own
        await until_ui(pilot, lambda: str(table.get_cell("a1", "age"))
                       == format_duration(NOW + 65 - last.observed_at), "a1's age a minute on")
        assert str(table.get_cell("v1", "age")) == ""  # never heard from


async def test_F_jumps_to_the_next_failed_cell(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = fleet(app).table()
        await pilot.press("j")  # r1
        await pilot.press("F")
        assert order(app)[table.cursor_row] == "a1"  # the box with det_baseline failed
        box, _ = await open_queue(pilot, app, 4)
        await pilot.press("F")
        cell = box.highlighted_cell()
        assert cell is not None and cell.name == "det_baseline"


async def test_a_stale_box_is_dimmed_and_says_since_when(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = fleet(app).table()
        disk = table.get_cell("r1", "disk")
        assert isinstance(disk, Text) and "dim" not in str(disk.style)
        app.absorb(HostStateChanged(HostState("r1", Reachability.STALE, NOW - 120, "no record")))
        app.repaint()
        await pilot.pause(0.1)
        disk = table.get_cell("r1", "disk")
        assert isinstance(disk, Text) and disk.plain == "95%"  # still readable
        assert "dim" in str(disk.style) or any("dim" in str(s.style) for s in disk.spans)
        assert str(table.get_cell("r1", "state")).startswith("stale since ")
        gpu = table.get_cell("r1", "GPU")
        assert isinstance(gpu, Text) and ("dim" in str(gpu.style)
                                          or any("dim" in str(s.style) for s in gpu.spans))


async def test_the_fleet_row_shows_the_last_teardown_action_and_its_result(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = fleet(app).table()
        custody = app.custody_of("r1")
        # What Gate.finish leaves after an irreversible destroy that succeeded.
        custody.gate.history.append((GateState.DONE, "destroy done"))
        custody.gate.state = GateState.DONE
        custody.changed()
        await until_ui(pilot, lambda: str(table.get_cell("r1", "state")).startswith(
            "destroy done · "), "the destroy on r1's row")


def test_time_to_full_beyond_the_horizon_is_not_filling() -> None:
    assert time_to_full(1.0, 3600) == 3600.0
    assert time_to_full(1.0, int(FULL_HORIZON_S) + 1) is None  # was `full in 1433d20h`


def test_demo_accuracy_stays_a_fraction() -> None:
    """The demo's v1 cells start at 0.88-0.92 val_acc: no epoch may report more than 1."""
    for base in (0.88, 0.91, 0.92, 0.99):
        spec = metric_for("classification", base)
        rng = random.Random(7)
        for _ in range(2000):
            value = spec.bounded(spec.start + spec.gain * rng.random() + rng.gauss(0, 0.04) * spec.gain)
            assert value < 1.0
        assert spec.start + spec.gain < 1.0
    assert metric_for("reconstruction", 27.1).ceiling is None  # PSNR is not a fraction


def test_locked_is_said_once() -> None:
    assert without_locked("locked: locked: not verified yet") == "not verified yet"
    assert without_locked("locked: needs N/N (1/2 loaded (1 excluded): not N/N)") == (
        "needs N/N (1/2 loaded (1 excluded): not N/N)")


async def test_verify_screen_agrees_with_the_gate_after_an_exclusion(tmp_path: Path) -> None:
    """The verify screen said `1/3 loaded` (the pull's stage line) while the gate said
    `1/2 loaded (1 excluded)`: after an exclusion both read the same and N is explained."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        custody = app.custody_of("r1")
        found = Verification("r1", "d" * 64, (
            CellVerdict("seg_baseline", CellStatus.OK, bytes=10, metric="val_miou=0.8"),
            CellVerdict("seg_small", CellStatus.FAILED_ON_BOX, ("exit=1",), ended=True),
            CellVerdict("seg_big", CellStatus.UNPROVEN, ("no FINISHED mark",))), 10, NOW)
        custody.report = VerifyReport("r1", ("seg_baseline", "seg_small", "seg_big"),
                                      verification=found.excluding("seg_small", "excluded by the user"))
        custody.stage = found.summary  # what the pull left: `1/3 loaded`
        custody.gate.verified(custody.report.verification)  # type: ignore[arg-type]
        custody.changed()
        app.push_screen(VerifyScreen("r1"))
        await until_ui(pilot, lambda: composed(app, VerifyScreen, "#verify-foot"), "verify")
        await pilot.pause(0.6)
        screen = app.screen
        head = texts([screen.query_one("#verify-head")])
        foot = texts([screen.query_one("#verify-foot")])
        assert "1/3" not in head + foot, head + foot
        assert "1/2 loaded (1 excluded)" in head and "1/2 loaded (1 excluded)" in foot
        assert "N = 3 cells minus the 1 you excluded" in " ".join(foot.split())


async def test_a_live_change_resorts_and_the_cursor_stays_on_its_box(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = fleet(app)
        screen.sort_by("disk")  # a1 75%, r1 95%
        table = screen.table()
        await pilot.press("j")
        assert order(app) == ["a1", "r1", "v1"] and screen.selected() == "r1"
        # a1's disk fills past r1's (as a record would say): the rows swap, r1 stays selected.
        if screen._update("a1", {"disk": Text("99%")}):
            screen._resort()
        assert order(app) == ["r1", "a1", "v1"]
        assert screen.selected() == "r1" and table.cursor_row == 0
