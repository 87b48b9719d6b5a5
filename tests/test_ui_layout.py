"""Layout that degrades by priority, and one meaning per key (issue 18).

Pilot tests at 80x24, 120x40 and 200x60 on the replayed fleet: which fleet columns are shown,
the instance column fixed, the box screen's queue rows and the teardown screen's keeps and
destroys at 80x24, a footer that never runs off the screen, GPU headers that read whole, and
the keys: `T` is the theme everywhere, `t` is Teardown on the verify screen only, `tab`
cycles the box screen's panels, `?` lists what the footer leaves out.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable
from textual.widgets._footer import FooterKey

from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.custody import TeardownScreen, VerifyScreen
from cockpit.ui.fleet import COLUMNS, PRIORITY, FleetScreen, visible_columns
from cockpit.ui.modals import HelpScreen
from tests.test_ui_app import composed, open_queue, settle, texts, until_ui
from tests.test_ui_tables import make_app

ESSENTIALS = ("instance", "state", "GPU", "disk", "inodes", "queue", "alerts")


def shown_columns(app: CockpitApp) -> list[str]:
    screen = app.screen
    assert isinstance(screen, FleetScreen)
    return [str(column.key.value) for column in screen.table().ordered_columns]


def footer_fits(app: CockpitApp) -> None:
    """Every footer key the screen shows ends inside the screen (nothing cut)."""
    keys = list(app.screen.query(FooterKey))
    assert keys, "the footer shows some keys"
    for key in keys:
        assert key.region.right <= app.size.width, (key.description, key.region)


def test_priority_starts_with_the_essentials() -> None:
    assert PRIORITY[:len(ESSENTIALS)] == ESSENTIALS
    assert sorted(PRIORITY) == sorted(COLUMNS)
    columns, queue = visible_columns(80, 8)
    assert columns == ESSENTIALS and queue >= 10


@pytest.mark.parametrize(("size", "present", "absent"), [
    ((80, 24), ESSENTIALS, ("platform", "VRAM", "mem", "log age", "$/h", "age")),
    ((120, 40), (*ESSENTIALS, "age", "VRAM", "mem", "$/h", "log age"), ("platform",)),
    ((200, 60), COLUMNS, ()),
])
async def test_fleet_columns_by_width(tmp_path: Path, size: tuple[int, int],
                                      present: tuple[str, ...], absent: tuple[str, ...]) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        columns = shown_columns(app)
        assert set(present) <= set(columns), columns
        assert not set(absent) & set(columns), columns
        assert columns[0] == "instance"
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        table = screen.table()
        assert table.fixed_columns == 1  # the instance stays when scrolling right
        used = sum(c.get_render_width(table) for c in table.ordered_columns)
        assert used <= size[0] - 2, "no column is pushed off screen"
        footer_fits(app)


async def test_resizing_adds_and_drops_columns_and_keeps_the_cells(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert "mem" not in shown_columns(app)
        await pilot.resize_terminal(200, 60)
        await until_ui(pilot, lambda: "mem" in shown_columns(app), "mem after widening")
        screen = app.screen
        assert isinstance(screen, FleetScreen)
        assert str(screen.table().get_cell("r1", "mem")) == "93%"


async def test_box_screen_at_80x24_shows_queue_rows_and_whole_gpu_headers_at_120(
        tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        box, queue = await open_queue(pilot, app, 4)
        await pilot.pause(0.2)
        # The table's own height minus its header: rows the user actually sees.
        assert queue.region.height - 1 >= 3, queue.region
        assert queue.region.bottom <= app.size.height - 1  # above the footer
        footer_fits(app)
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("enter")
        await until_ui(pilot, lambda: composed(app, BoxScreen, "#gpu-body"), "the box screen")
        await pilot.pause(0.2)
        box = app.screen
        assert isinstance(box, BoxScreen)
        region = box.query_one("#gpu-body").region
        lines = app.export_screenshot()  # the real render, as SVG text
        assert "ut…" not in lines and "te…" not in lines
        head = texts([box.query_one("#gpu-body")])
        assert "util" in head and "temp" in head and region.width < 60
        footer_fits(app)


async def test_teardown_screen_at_80x24_shows_keeps_and_destroys(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.push_screen(TeardownScreen("r1"))
        await until_ui(pilot, lambda: composed(app, TeardownScreen, "#teardown-detail"),
                       "the teardown screen")
        await pilot.pause(0.3)
        screen = app.screen
        detail = screen.query_one("#teardown-detail")
        text = texts([detail])
        assert "keeps:" in text and "destroys:" in text
        assert "locked: locked:" not in text
        box = screen.query_one("#teardown-detail-box").region
        assert box.height >= 4 and box.bottom <= app.size.height - 1, box
        footer_fits(app)


async def test_one_meaning_per_key(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    assert "t" not in {b.key for b in app.BINDINGS if not isinstance(b, tuple)}
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("T")
        await pilot.pause(0.1)
        assert app.theme == "cockpit-light"
        await pilot.press("v")  # verify a1
        await until_ui(pilot, lambda: composed(app, VerifyScreen, "#verify-table"), "verify")
        await pilot.press("t")  # Teardown here, and nothing else
        await until_ui(pilot, lambda: composed(app, TeardownScreen, "#teardown-table"),
                       "teardown")
        assert app.theme == "cockpit-light"
        await pilot.press("escape", "escape")
        await until_ui(pilot, lambda: isinstance(app.screen, FleetScreen), "back to the fleet")
        await pilot.press("question_mark")
        await until_ui(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        keys = {key: what for key, what in help_screen.rows}
        # What the footer leaves out is listed here, with the long words.
        for key, words in (("T", "Theme"), ("K", "Host key"), ("r", "Reconnect"),
                           ("o", "Reverse sort order"), ("F", "Next box with a failed cell"),
                           ("v", "Verify & teardown"), ("q", "Quit (touches no remote)")):
            assert keys.get(key) == words, (key, keys)
        assert keys.get("j") == "Down" and keys.get("G") == "Last row"


async def test_tab_cycles_the_box_panels(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("enter")
        await until_ui(pilot, lambda: composed(app, BoxScreen, "#failure-table"), "the box screen")
        box = app.screen
        assert isinstance(box, BoxScreen)

        def panel() -> str:
            focused = app.focused
            assert focused is not None
            for selector in BoxScreen.PANELS:
                node = box.query_one(selector)
                if focused is node or node in focused.ancestors:
                    return selector
            return str(focused)

        assert panel() == "#queue-panel"
        seen = []
        for _ in range(4):
            await pilot.press("tab")
            seen.append(panel())
        assert seen == ["#failure-panel", "#gpu-panel", "#disk-panel", "#queue-panel"]
        await pilot.press("shift+tab")
        assert panel() == "#disk-panel"
        assert isinstance(app.focused, DataTable) is False


@pytest.mark.parametrize("width", [80, 120])
async def test_every_screen_footer_fits(tmp_path: Path, width: int) -> None:
    """The footer of each screen, at 80 and 120 columns, ends inside the screen."""
    from cockpit.ui.billing import BillingScreen
    from cockpit.ui.events import EventsScreen

    app = make_app(tmp_path)
    async with app.run_test(size=(width, 24 if width == 80 else 40)) as pilot:
        await settle(app, pilot)
        footer_fits(app)
        for screen, selector in ((VerifyScreen("r1"), "#verify-table"),
                                 (TeardownScreen("r1"), "#teardown-table"),
                                 (EventsScreen(), "#events-table"),
                                 (BillingScreen(), "#billing-table"),
                                 (BoxScreen("a1"), "#queue-table")):
            app.push_screen(screen)
            await until_ui(pilot, lambda s=screen, q=selector: composed(app, type(s), q),
                           f"{type(screen).__name__}")
            await pilot.pause(0.2)
            footer_fits(app)
            app.pop_screen()
            await pilot.pause(0.1)
