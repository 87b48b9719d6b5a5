"""The fleet overview: one row per instance, updated cell by cell.

Columns come and go with the terminal's width, by priority: at 80 columns the essentials
(instance, state, GPU, disk, inodes, queue, alerts) fit, wider terminals add the rest; the
instance column stays in place when the table scrolls right. Rows sort by any column (`s`
cycles the column, `o` reverses, a header click does both); a totals line sits below.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header, Input

from cockpit.models.billing import instance_currency, money, per_hour_unit, totals_text
from cockpit.models.durations import format_duration
from cockpit.models.queue import CellState
from cockpit.models.snapshot import NA, Reachability
from cockpit.ui.base import CockpitScreen
from cockpit.ui.render import fleet_cells, state_cell
from cockpit.ui.safe import PlainStatic, PlainTable, shown

COLUMNS = ("instance", "platform", "state", "GPU", "VRAM", "disk", "inodes",
           "mem", "queue", "age", "log age", "alerts", "$/h")
"""Every fleet column, in display order."""
PRIORITY = ("instance", "state", "GPU", "disk", "inodes", "queue", "alerts",
            "age", "VRAM", "mem", "$/h", "log age", "platform")
"""Which columns a narrow terminal keeps first: the first seven are the essentials that
must fit at 80 columns; the rest are added as the width allows."""
WIDTHS = {"platform": 8, "state": 17, "GPU": 8, "VRAM": 4, "disk": 4, "inodes": 6, "mem": 4,
          "queue": 10, "age": 5, "log age": 7, "alerts": 6, "$/h": 7}
"""Fixed widths: re-measuring columns on every update costs more than the whole update.
The queue's width is its minimum: it takes whatever the other columns leave, up to
`QUEUE_MAX`."""
QUEUE_MAX = 32
"""Characters of the queue column however wide the terminal (`12/40 a_long_cell_name…`)."""
INSTANCE_MAX = 24
"""Characters of the instance column: a longer name is cut (the box screen shows it whole)."""
CELL_PADDING = 2
"""Columns one DataTable cell adds to its width (one space each side)."""
TABLE_CHROME = 4
"""Columns the table's round border (2) and vertical scrollbar (2) take from the screen."""
BUSY_PCT = 10.0
"""A GPU at or above this utilisation counts as busy in the totals (below it, the idle-burn
colour starts: the same threshold as `Palette.busy`)."""
_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
_NUMBER = re.compile(r"^[^\d-]*(-?\d+(?:\.\d+)?)")


def visible_columns(width: int, instance_width: int) -> tuple[tuple[str, ...], int]:
    """The columns that fit `width` screen columns, in display order, and the queue's width.

    Columns are taken in `PRIORITY` order while they fit; the queue column then grows into
    what is left (up to `QUEUE_MAX`). The instance column is always kept."""
    budget = width - TABLE_CHROME
    chosen: list[str] = []
    for column in PRIORITY:
        need = (instance_width if column == "instance" else WIDTHS[column]) + CELL_PADDING
        if column == "instance" or need <= budget:
            chosen.append(column)
            budget -= need
    queue = WIDTHS["queue"] + (min(budget, QUEUE_MAX - WIDTHS["queue"]) if budget > 0 else 0)
    return tuple(c for c in COLUMNS if c in chosen), queue


def sort_key(value: Text | str) -> tuple[int, float, str]:
    """How a cell sorts: durations (`2m5s`) and numbers (`43% x2`, `3/4 cell`, `¥1.98`) by
    value, before text; empty and `-`/`n/a` cells last."""
    plain = (value.plain if isinstance(value, Text) else value).strip()
    if plain in ("", "-", "n/a"):
        return (2, 0.0, "")
    match = _DURATION.match(plain)
    if match and any(match.groups()):
        d, h, m, sec = (int(g) if g else 0 for g in match.groups())
        return (0, d * 86400.0 + h * 3600.0 + m * 60.0 + sec, "")
    number = _NUMBER.match(plain)
    if number:
        return (0, float(number.group(1)), plain.lower())
    return (1, 0.0, plain.lower())


def directed_key(value: Text | str, reverse: bool) -> tuple[int, float, tuple[int, ...]]:
    """`sort_key` in the asked direction with empty cells last either way (a plain
    `reverse=True` would put the boxes with no reading on top)."""
    rank, number, text = sort_key(value)
    sign = -1 if reverse and rank < 2 else 1
    return rank, sign * number, tuple(sign * ord(c) for c in text)


def one_line(cell: Any) -> Any:
    """A cell cut with `…` at its column's width instead of wrapped out of its one-line row
    (`3/4 aug_strong` in a 13-wide column read `3/4`)."""
    out = shown(cell, one_line=True)
    if isinstance(out, Text):
        out.no_wrap = True
        out.overflow = "ellipsis"
    return out


def age_cell(seconds: float | None) -> str:
    """Seconds since the box's last record, as `3s`, `2m5s`; empty before the first one."""
    return "" if seconds is None else format_duration(max(0.0, seconds))


class KeyedTable(PlainTable):
    """A table with vi keys: `j`/`k` move the cursor, `g`/`G` go to the first/last row."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "scroll_top", "First row", show=False),
        Binding("G", "scroll_bottom", "Last row", show=False),
    ]


def _plain(value: Text | str) -> str:
    return value.plain if isinstance(value, Text) else value


def same(a: Text | str | None, b: Text | str) -> bool:
    """Equal text AND colour (rich's Text equality ignores the base style)."""
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and str(a.style) == str(b.style) and a.spans == b.spans
    return type(a) is type(b) and a == b


class StableTable(KeyedTable):
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
        super().update_cell(row_key, column_key, one_line(value), update_width=update_width)
        key = (str(getattr(row_key, "value", row_key)), str(getattr(column_key, "value", column_key)))
        self._versions[key] = self._versions.get(key, 0) + 1

    def _rows_changed(self) -> None:
        self._structure += 1
        self._stable.clear()

    def add_row(self, *cells: Any, **kwargs: Any) -> Any:
        self._rows_changed()
        return super().add_row(*(one_line(cell) for cell in cells), **kwargs)

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
        Binding("v", "verify", "Verify", tooltip="Verify & teardown"),
        Binding("dollar_sign", "billing", "Billing"),
        Binding("s", "sort", "Sort", tooltip="Sort by the next column (then sweep order)"),
        Binding("o", "reverse", "Reverse sort order", show=False),
        Binding("F", "next_failed", "Next box with a failed cell", show=False),
        Binding("r", "reconnect", "Reconnect", show=False),
        Binding("K", "host_key", "Host key", show=False),
        Binding("b", "banner", "Danger clocks", show=False),
    ]

    def __init__(self) -> None:
        super().__init__(id="fleet-screen")
        self.cells: dict[str, dict[str, Text | str]] = {}
        self.filter_text = ""
        self.sort_column: str | None = None
        """The column rows are sorted by; None keeps the sweep's order."""
        self.sort_reverse = False
        self.shown_columns: tuple[str, ...] = ()
        """The columns the table holds now (by priority, for this width)."""
        self.queue_width = WIDTHS["queue"]
        self.instance_width = 8
        self._custody_seen: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield StableTable(id="fleet", cursor_type="row", zebra_stripes=True, fixed_columns=1)
        yield PlainStatic(id="fleet-jobs")
        yield PlainStatic(id="fleet-totals")
        yield Input(placeholder="filter rows (name, platform, state…)  enter: keep  esc: clear",
                    id="filter")
        yield Footer()

    def on_mount(self) -> None:
        table = self.table()
        self.instance_width = min(INSTANCE_MAX, max([8, *(len(n) for n in self.cockpit.trackers)]))
        for name, tracker in self.cockpit.trackers.items():
            inst = tracker.instance
            price = "" if inst.price_per_hour is None else money(
                inst.price_per_hour, instance_currency(inst, tracker.profile))
            row: dict[str, Text | str] = dict.fromkeys(COLUMNS, "")
            row.update({"instance": name, "platform": inst.profile, "state": "connecting",
                        "$/h": price})
            self.cells[name] = row
        self.layout_columns(self.app.size.width)
        self.query_one("#filter", Input).display = False
        table.focus()
        self.refresh_hosts(set(self.cells))  # events may have arrived before this mount
        self.show_jobs()
        self.set_interval(1.0, self.tick)

    # -- columns by width ------------------------------------------------------------------
    def on_resize(self, event: events.Resize) -> None:
        """Columns by priority for the new width (a rebuild only when the set changes)."""
        if self.cells:
            self.layout_columns(event.size.width)

    def layout_columns(self, width: int, force: bool = False) -> None:
        """Hold the columns that fit `width`, then the rows (filtered, sorted)."""
        columns, queue = visible_columns(width, self.instance_width)
        if not force and columns == self.shown_columns and queue == self.queue_width:
            return
        self.shown_columns, self.queue_width = columns, queue
        table = self.table()
        selected = self.selected()
        table.clear(columns=True)
        for column in columns:
            width_of = (self.instance_width if column == "instance" else
                        queue if column == "queue" else WIDTHS[column])
            table.add_column(self._label(column), key=column, width=width_of)
        self._fill(selected)

    def _label(self, column: str) -> Text:
        if column != self.sort_column:
            return Text(column)
        return Text(f"{column}{'▼' if self.sort_reverse else '▲'}", style="bold")

    def order(self) -> list[str]:
        """Names of the rows to show: those passing the filter, in sort order."""
        names = [n for n in self.cells if self.matches(n)]
        column = self.sort_column
        if column is not None:
            names.sort(key=lambda n: directed_key(self.cells[n][column], self.sort_reverse))
        return names

    def _fill(self, selected: str | None = None) -> None:
        """Rebuild the rows (a user action: filter, sort, resize)."""
        table = self.table()
        table.clear()
        for name in self.order():
            row = self.cells[name]
            table.add_row(*(row[c] for c in self.shown_columns), key=name)
        if selected is not None and selected in table.rows:
            table.move_cursor(row=table.get_row_index(selected))
        self.show_totals()

    # -- sorting ---------------------------------------------------------------------------
    def sort_by(self, column: str | None, reverse: bool = False) -> None:
        """Sort rows by `column` (None: the sweep's order) and mark its header."""
        self.sort_column, self.sort_reverse = column, reverse
        self.layout_columns(self.app.size.width, force=True)

    def action_sort(self) -> None:
        """Next column (of those shown), then back to the sweep's order."""
        columns = list(self.shown_columns)
        if self.sort_column not in columns:
            self.sort_by(columns[0])
        else:
            at = columns.index(self.sort_column) + 1
            self.sort_by(columns[at] if at < len(columns) else None)
        self.notify(f"sorted by {self.sort_column}" if self.sort_column else "sweep order",
                    timeout=2)

    def action_reverse(self) -> None:
        self.sort_by(self.sort_column or self.shown_columns[0], not self.sort_reverse)

    @on(DataTable.HeaderSelected, "#fleet")
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        """A header click sorts by that column; a second click reverses."""
        column = str(event.column_key.value)
        self.sort_by(column, not self.sort_reverse if column == self.sort_column else False)

    def _resort(self) -> None:
        """Live values moved in the sort column: put the rows back in order (cursor kept)."""
        column = self.sort_column
        table = self.table()
        if column is None or column not in self.shown_columns:
            return
        selected = self.selected()
        table.sort(column, key=lambda cell: directed_key(cell, self.sort_reverse))
        if selected is not None:  # the cursor stays on its box, not on its row number
            table.move_cursor(row=table.get_row_index(selected), animate=False)

    # -- live updates ----------------------------------------------------------------------
    def refresh_hosts(self, names: Iterable[str]) -> None:
        """Update only the cells whose text or colour changed."""
        if not self.whole("#fleet"):  # being torn down (app exit): nothing left to paint
            return
        palette = self.cockpit.palette
        now = self.cockpit.clock()
        resort = False
        for name in names:
            if name not in self.cells:  # not mounted yet: on_mount paints every row
                continue
            tracker = self.cockpit.trackers[name]
            new: dict[str, Text | str] = {"state": self._state(name, now)}
            new.update(fleet_cells(tracker, palette, now))
            new["age"] = self._age(name, now)
            resort |= self._update(name, new)
        if resort:
            self._resort()
        self.show_totals()

    def _state(self, name: str, now: float) -> Text:
        custody = self.cockpit.custody.get(name)
        return state_cell(self.cockpit.trackers[name].state, self.cockpit.palette, now,
                          gate=custody.gate if custody is not None else None)

    def _age(self, name: str, now: float) -> Text | str:
        snap = self.cockpit.trackers[name].snapshot
        if snap is None:
            return ""
        cell = Text(age_cell(now - snap.observed_at))
        if self.cockpit.trackers[name].state.reachability is not Reachability.CONNECTED:
            cell.stylize("dim")
        return cell

    def _update(self, name: str, new: dict[str, Text | str]) -> bool:
        """Store and show the changed cells of `name`; whether the sort column moved."""
        table = self.table()
        row = self.cells[name]
        visible = name in table.rows
        moved = False
        for column, value in new.items():
            if same(row.get(column), value):
                continue
            row[column] = value
            moved |= column == self.sort_column
            if visible and column in self.shown_columns:
                table.update_cell(name, column, value)
        return moved

    def tick(self) -> None:
        """Once a second: every box's age, and its state when a teardown moved (the ages of
        boxes that sent nothing are exactly the ones that must keep counting)."""
        if not self.whole("#fleet"):  # being torn down (app exit): nothing left to paint
            return
        now = self.cockpit.clock()
        resort = False
        for name in self.cells:
            new: dict[str, Text | str] = {"age": self._age(name, now)}
            custody = self.cockpit.custody.get(name)
            if custody is not None and self._custody_seen.get(name) != custody.version:
                self._custody_seen[name] = custody.version
                new["state"] = self._state(name, now)
            resort |= self._update(name, new)
        if resort:
            self._resort()
        self.show_jobs()

    def show_jobs(self) -> None:
        """Job groups (the sweep's `jobs:`) as one row each, expanded to their boxes; hidden
        when the sweep has none (issue 21; `J` opens the job view)."""
        from cockpit.ui.jobs import jobs_text

        views = self.cockpit.monitor.job_views
        widget = self.query_one("#fleet-jobs", PlainStatic)
        widget.display = bool(views)
        if views:
            widget.update(jobs_text(views.values(), self.cockpit.palette))

    def totals(self) -> Text:
        """`3 boxes (1 stale) · GPUs busy 2/3 · alerts 2 · ¥1.98/h + $3.09/h`."""
        trackers = self.cockpit.trackers
        now = self.cockpit.clock()
        palette = self.cockpit.palette
        busy = total = alerts = 0
        away = 0
        rates: dict[str, float] = {}
        for tracker in trackers.values():
            if tracker.state.reachability is not Reachability.CONNECTED:
                away += 1
            snap = tracker.snapshot
            if snap is not None:
                total += len(snap.gpu.gpus)
                busy += sum(1 for g in snap.gpu.gpus
                            if not isinstance(g.util_pct, NA) and g.util_pct >= BUSY_PCT)
            alerts += len(tracker.alerts(now))
            price = tracker.instance.price_per_hour
            if price is not None:
                currency = instance_currency(tracker.instance, tracker.profile)
                rates[currency] = rates.get(currency, 0.0) + price
        text = Text(f"{len(trackers)} boxes")
        if away:
            text.append(f" ({away} not connected)", style=palette.warn)
        text.append(f" · GPUs busy {busy}/{total}")
        text.append(" · alerts ")
        text.append(str(alerts), style=palette.bad if alerts else palette.muted)
        text.append(f" · {totals_text(rates, '/h')}")
        units = sorted({per_hour_unit(c) for c in rates})
        if len(units) > 1:
            text.append(" (never summed across currencies)", style=palette.muted)
        if self.sort_column is not None:
            text.append(f" · sorted by {self.sort_column}{' (reversed)' if self.sort_reverse else ''}",
                        style=palette.muted)
        return text

    def show_totals(self) -> None:
        """Repaint the totals line."""
        self.query_one("#fleet-totals", PlainStatic).update(self.totals())

    # -- filtering -------------------------------------------------------------------------
    def matches(self, name: str) -> bool:
        """Whether a row passes the current filter (any cell contains the text)."""
        needle = self.filter_text.lower()
        return not needle or any(needle in _plain(v).lower() for v in self.cells[name].values())

    def apply_filter(self) -> None:
        """Show the rows that match, in sort order (user-initiated, so a rebuild is fine)."""
        self._fill(self.selected())

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
        self.table().focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.apply_filter()

    @on(Input.Submitted, "#filter")
    def _filter_kept(self) -> None:
        self.table().focus()

    # -- actions on the selected box --------------------------------------------------------
    def selected(self) -> str | None:
        """Name of the instance under the cursor."""
        table = self.table()
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return str(key.value) if key.value is not None else None

    def action_next_failed(self) -> None:
        """The cursor to the next box (after the cursor, wrapping) with a failed cell."""
        table = self.table()
        names = [str(row.key.value) for row in table.ordered_rows]
        if not names:
            return
        start = table.cursor_row
        for step in range(1, len(names) + 1):
            name = names[(start + step) % len(names)]
            view = self.cockpit.trackers[name].queue_view()
            if any(c.state is CellState.FAILED for c in view.cells):
                table.move_cursor(row=(start + step) % len(names))
                return
        self.notify("no box has a failed cell", timeout=2)

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
