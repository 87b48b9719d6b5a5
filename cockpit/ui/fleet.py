"""The fleet overview: one row per instance, updated cell by cell."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Input

from cockpit.ui.base import CockpitScreen
from cockpit.ui.render import fleet_cells, state_cell
from cockpit.ui.safe import PlainTable, shown

COLUMNS = ("instance", "platform", "state", "GPU", "VRAM", "disk", "inodes",
           "mem", "queue", "log age", "alerts", "$/h")
WIDTHS = {"platform": 8, "state": 17, "GPU": 8, "VRAM": 4, "disk": 4, "inodes": 6, "mem": 4,
          "queue": 16, "log age": 7, "alerts": 6, "$/h": 5}
"""Fixed widths: re-measuring columns on every update costs more than the whole update."""


def _plain(value: Text | str) -> str:
    return value.plain if isinstance(value, Text) else value


def same(a: Text | str | None, b: Text | str) -> bool:
    """Equal text AND colour (rich's Text equality ignores the base style)."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and str(a.style) == str(b.style) and a.spans == b.spans
    return type(a) is type(b) and a == b


class StableTable(PlainTable):
    """A DataTable whose unchanged cells stay rendered across updates.

    Textual 8.2's DataTable keys its cell render cache on a table-wide update counter, so one
    `update_cell` re-renders every visible cell: at 50 hosts that was half of the app's CPU.
    Here a cell is re-rendered only when *it* changed (a per-cell version bumped by
    `update_cell`), its place, width or style changed, or the rows changed. Relies on the
    private `_render_cell` of the pinned Textual version (tests check the behaviour).
    """

    MAX_CACHED = 20_000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._versions: dict[tuple[Any, Any], int] = {}
        self._stable: dict[tuple[Any, ...], Any] = {}
        self._structure = 0
        self.renders = 0
        """Cells actually rendered (for tests and benchmarks)."""

    def update_cell(self, row_key: Any, column_key: Any, value: Any, *,
                    update_width: bool = False) -> None:
        super().update_cell(row_key, column_key, value, update_width=update_width)
        key = (str(getattr(row_key, "value", row_key)), str(getattr(column_key, "value", column_key)))
        self._versions[key] = self._versions.get(key, 0) + 1

    def _rows_changed(self) -> None:
        self._structure += 1
        self._stable.clear()

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        self._rows_changed()
        return super().add_row(*cells, **kwargs)

    def remove_row(self, row_key: Any) -> None:
        self._rows_changed()
        super().remove_row(row_key)

    def clear(self, columns: bool = False) -> Any:
        self._rows_changed()
        return super().clear(columns)

    def _render_cell(self, row_index: int, column_index: int, base_style: Any, width: int,
                     cursor: bool = False, hover: bool = False) -> Any:
        row_key = self._header_row_key if row_index == -1 else self._row_locations.get_key(row_index)
        column_key = self._column_locations.get_key(column_index)
        version = self._versions.get((str(getattr(row_key, "value", row_key)),
                                      str(getattr(column_key, "value", column_key))), 0)
        key = (row_key, column_key, row_index, column_index, version, base_style, width, cursor,
               hover, self._show_hover_cursor, self._pseudo_class_state, self._structure)
        lines = self._stable.get(key)
        if lines is None:
            if len(self._stable) > self.MAX_CACHED:
                self._stable.clear()
            lines = self._stable[key] = super()._render_cell(
                row_index, column_index, base_style, width, cursor, hover)
            self.renders += 1
        return lines


def upsert_row(table: DataTable[Any], key: str, columns: tuple[str, ...],
               row: tuple[Text | str, ...]) -> None:
    """Add the row, or update only those of its cells whose text or colour changed.

    Cells are made safe (`shown`) before they are compared: the table holds them that way."""
    row = tuple(shown(value, one_line=True) for value in row)
    if key not in table.rows:
        table.add_row(*row, key=key)
        return
    for column, value in zip(columns, row, strict=True):
        if not same(table.get_cell(key, column), value):
            table.update_cell(key, column, value, update_width=True)


class FleetScreen(CockpitScreen):
    """Home screen: the whole sweep at a glance."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_box", "Open box"),
        Binding("slash", "filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("r", "reconnect", "Reconnect"),
        Binding("k", "host_key", "Host key"),
        Binding("b", "banner", "Danger clocks"),
        Binding("v", "verify", "Verify & teardown"),
        Binding("dollar_sign", "billing", "Billing"),
    ]

    def __init__(self) -> None:
        super().__init__(id="fleet-screen")
        self.cells: dict[str, dict[str, Text | str]] = {}
        self.filter_text = ""


    def compose(self) -> ComposeResult:
        yield Header()
        yield StableTable(id="fleet", cursor_type="row", zebra_stripes=True)
        yield Input(placeholder="filter rows (name, platform, state…)  enter: keep  esc: clear",
                    id="filter")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#fleet", DataTable)
        longest = max([8, *(len(name) for name in self.cockpit.trackers)])
        for column in COLUMNS:
            table.add_column(column, key=column, width=WIDTHS.get(column, min(longest, 24)))
        for name, tracker in self.cockpit.trackers.items():
            inst = tracker.instance
            price = "" if inst.price_per_hour is None else f"{inst.price_per_hour:.2f}"
            row: dict[str, Text | str] = dict.fromkeys(COLUMNS, "")
            row.update({"instance": name, "platform": inst.profile, "state": "connecting",
                        "$/h": price})
            self.cells[name] = row
            table.add_row(*row.values(), key=name)
        self.query_one("#filter", Input).display = False
        table.focus()
        self.refresh_hosts(set(self.cells))  # events may have arrived before this mount

    # -- live updates ----------------------------------------------------------------------
    def refresh_hosts(self, names: set[str]) -> None:
        """Update only the cells whose text or colour changed."""
        table = self.query_one("#fleet", DataTable)
        palette = self.cockpit.palette
        now = self.cockpit.clock()
        for name in names:
            if name not in self.cells:  # not mounted yet: on_mount paints every row
                continue
            tracker = self.cockpit.trackers[name]
            new: dict[str, Text | str] = {"state": state_cell(tracker.state, palette, now)}
            new.update(fleet_cells(tracker, palette, now))
            row = self.cells[name]
            visible = name in table.rows
            for column, value in new.items():
                if same(row.get(column), value):
                    continue
                row[column] = value
                if visible:
                    table.update_cell(name, column, value)

    # -- filtering -------------------------------------------------------------------------
    def matches(self, name: str) -> bool:
        """Whether a row passes the current filter (any cell contains the text)."""
        needle = self.filter_text.lower()
        return not needle or any(needle in _plain(v).lower() for v in self.cells[name].values())

    def apply_filter(self) -> None:
        """Show the rows that match, in sweep order (user-initiated, so a rebuild is fine)."""
        table = self.query_one("#fleet", DataTable)
        table.clear()
        for name, row in self.cells.items():
            if self.matches(name):
                table.add_row(*row.values(), key=name)

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.value = ""
        box.display = False
        self.filter_text = ""
        self.apply_filter()
        self.query_one("#fleet", DataTable).focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.apply_filter()

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.query_one("#fleet", DataTable).focus()

    # -- actions on the selected box --------------------------------------------------------
    def selected(self) -> str | None:
        """Name of the instance under the cursor."""
        table = self.query_one("#fleet", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    @on(DataTable.RowSelected, "#fleet")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.cockpit.open_box(str(event.row_key.value))

    def action_open_box(self) -> None:
        name = self.selected()
        if name is not None:
            self.cockpit.open_box(name)

    def action_reconnect(self) -> None:
        name = self.selected()
        if name is not None:
            self.cockpit.reconnect(name)

    def action_host_key(self) -> None:
        name = self.selected()
        if name is not None:
            self.cockpit.show_host_key(name)

    def action_billing(self) -> None:
        from cockpit.ui.billing import BillingScreen

        self.cockpit.push_screen(BillingScreen())

    def action_verify(self) -> None:
        name = self.selected()
        if name is not None:
            self.cockpit.open_verify(name)

    def action_banner(self) -> None:
        name = self.selected()
        if name is not None:
            self.cockpit.show_banner(self.cockpit.trackers[name].profile.platform, force=True)

    def table(self) -> DataTable[Any]:
        """The fleet table."""
        return self.query_one("#fleet", DataTable)
