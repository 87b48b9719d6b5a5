"""The events list: what happened while you were away, newest first.

Rows come from the sweep's store (what a `cockpit watch` or an earlier session recorded) and
from this session's monitor. Each row names its box and cell; `enter` opens that box. A channel
whose latest delivery failed is named above the list, so a silent Slack is seen.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header

from cockpit.models.durations import format_duration
from cockpit.models.history import HistoryItem
from cockpit.models.text import remote_text
from cockpit.ui.base import CockpitScreen
from cockpit.ui.fleet import KeyedTable
from cockpit.ui.safe import PlainStatic

EVENT_COLUMNS = ("when", "ago", "instance", "cell", "what", "sent")
REFRESH_S = 2.0
"""How often the list re-reads the store: events arrive at the watcher's pace, not per frame."""
MAX_WHAT = 200
"""Characters of an event's text in its row (the detail pane shows the whole text)."""


class EventsScreen(CockpitScreen):
    """Alerts and events of the fleet, or of one box when opened from its screen."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("enter", "open_box", "Open box"),
    ]

    def __init__(self, instance: str | None = None) -> None:
        super().__init__(classes="events")
        self.instance = instance
        self.items: list[HistoryItem] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="events-source")
        yield KeyedTable(id="events-table", cursor_type="row", zebra_stripes=True)
        yield PlainStatic(id="events-detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#events-table", DataTable)
        for column in EVENT_COLUMNS:
            table.add_column(column, key=column)
        self.set_interval(REFRESH_S, self.redraw)
        self.redraw()
        table.focus()

    def redraw(self) -> None:
        """Re-read the history; keep the cursor on the same row index."""
        if not self.whole("#events-table"):  # popped or exiting: nothing left to paint
            return
        app = self.cockpit
        self.items = app.history(self.instance)
        now = app.clock()
        table = self.query_one("#events-table", DataTable)
        row = table.cursor_row
        table.clear()
        for item in self.items:
            stamp = datetime.fromtimestamp(item.at).strftime("%m-%d %H:%M:%S")
            table.add_row(stamp, format_duration(max(0.0, now - item.at)), remote_text(item.instance),
                          remote_text(item.cell or "-"), remote_text(item.text[:MAX_WHAT]),
                          remote_text(item.delivery or "-"))
        if self.items:
            table.move_cursor(row=min(row, len(self.items) - 1))
        scope = f"box {self.instance}" if self.instance else "the whole fleet"
        source = Text(f"{len(self.items)} events for {scope}, newest first. ")
        source.append(app.history_source())
        failing = app.failing_channels()
        if failing:
            source.append("\nfailing channels: ")
            source.append(remote_text("; ".join(f"{c}: {e}" for c, e in sorted(failing.items()))))
        self.query_one("#events-source", PlainStatic).update(source)
        self._show_detail()

    def _selected(self) -> HistoryItem | None:
        table = self.query_one("#events-table", DataTable)
        if not self.items or table.cursor_row < 0 or table.cursor_row >= len(self.items):
            return None
        return self.items[table.cursor_row]

    def _show_detail(self) -> None:
        item = self._selected()
        detail = Text()
        if item is not None:
            detail.append(remote_text(f"{item.instance} {item.cell}".strip()))
            detail.append(f"  {item.kind}  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(item.at))}\n")
            detail.append(remote_text(item.text, one_line=False))
            if item.detail:
                detail.append("\n")
                detail.append(remote_text(item.detail, one_line=False))
        self.query_one("#events-detail", PlainStatic).update(detail)

    def on_data_table_row_highlighted(self, _event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    def on_data_table_row_selected(self, _event: DataTable.RowSelected) -> None:
        self.action_open_box()

    def action_open_box(self) -> None:
        item = self._selected()
        if item is not None and item.instance in self.cockpit.trackers:
            self.cockpit.open_box(item.instance)

    def action_back(self) -> None:
        self.dismiss(None)
