"""The events list (`!`): what happened, newest first, each row opening its box."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import DataTable

from cockpit.ui.box import BoxScreen
from cockpit.ui.events import EventsScreen
from tests.test_ui_app import make_app, settle


def rows(table: DataTable) -> list[list[str]]:  # type: ignore[type-arg]
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_bang_lists_the_sessions_alerts_and_enter_opens_the_box(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        await pilot.pause(1.5)
        assert app.alerts_fired, "the replayed fleet raises alerts"
        await pilot.press("exclamation_mark")
        await pilot.pause(0.3)
        screen = app.screen
        assert isinstance(screen, EventsScreen) and screen.instance is None
        table = screen.query_one("#events-table", DataTable)
        listed = rows(table)
        assert len(listed) == len(app.alerts_fired)
        failed = [r for r in listed if r[2] == "a1" and "failed" in r[4]]
        assert failed and failed[0][3] != "-", "a failed cell's row names its cell"
        source = str(screen.query_one("#events-source").render())
        assert "This session only" in source
        table.move_cursor(row=listed.index(failed[0]))
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, BoxScreen) and app.screen.instance == "a1"
        await pilot.press("exclamation_mark")
        await pilot.pause(0.3)
        box_events = app.screen
        assert isinstance(box_events, EventsScreen) and box_events.instance == "a1"
        only = rows(box_events.query_one("#events-table", DataTable))
        assert only and all(r[2] == "a1" for r in only)
        assert len(only) < len(listed) or all(r[2] == "a1" for r in listed)
        await pilot.press("escape", "escape", "q")


async def test_a_failing_channel_is_toasted_once_and_named_above_the_list(tmp_path: Path) -> None:
    """A channel whose latest delivery failed is said once (a toast) and stays named."""
    from cockpit.models.alerts import Alert
    from cockpit.services.alerts.notify import ChannelResult

    app = make_app(tmp_path)

    async def failing(_alert: Alert) -> list[ChannelResult]:
        return [ChannelResult("slack://…", False, 2, "HTTP 500"), ChannelResult("desktop", True, 1)]

    app.monitor.deliver = failing
    async with app.run_test(size=(160, 45)) as pilot:
        await settle(app, pilot)
        await pilot.pause(1.5)
        assert app.monitor.failing_channels == {"slack://…": "HTTP 500"}
        toasts = [n.message for n in app._notifications if "not reaching" in n.message]
        assert toasts == ["alerts are not reaching slack://…: HTTP 500"]
        await pilot.press("exclamation_mark")
        await pilot.pause(0.3)
        source = str(app.screen.query_one("#events-source").render())
        assert "failing channels: slack://…: HTTP 500" in source
        await pilot.press("escape", "q")
