"""The billing view: what each box bills now, so far, and after each teardown action."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header

from cockpit.models.billing import SweepBill, billing_row
from cockpit.models.durations import format_duration
from cockpit.models.text import remote_text, visible
from cockpit.ui.base import CockpitScreen
from cockpit.ui.fleet import upsert_row
from cockpit.ui.safe import PlainStatic, PlainTable

BILLING_COLUMNS = ("instance", "platform", "now", "per hour", "uptime", "so far", "idle")


class BillingScreen(CockpitScreen):
    """Money per box and for the sweep; `enter` on a box shows what survives each teardown."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def __init__(self) -> None:
        super().__init__(classes="billing")


    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainTable(id="billing-table", cursor_type="row", zebra_stripes=True)
        yield PlainStatic(id="billing-detail")
        yield PlainStatic(id="billing-total")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#billing-table", DataTable)
        for column in BILLING_COLUMNS:
            table.add_column(column, key=column)
        self.set_interval(1.0, self.redraw)
        self.redraw()
        table.focus()

    def bill(self) -> SweepBill:
        """The current bill."""
        now = self.cockpit.clock()
        return SweepBill(tuple(billing_row(t, now) for t in self.cockpit.trackers.values()))

    def redraw(self) -> None:
        """Refresh the rows, the detail and the totals."""
        bill = self.bill()
        palette = self.cockpit.palette
        table = self.query_one("#billing-table", DataTable)
        for row in bill.rows:
            price = f"{row.price_per_hour:.2f}" if row.price_per_hour is not None else "-"
            so_far = f"{row.so_far:.2f}" if row.so_far is not None else "-"
            uptime = format_duration(row.uptime_s) if row.uptime_s is not None else "-"
            cells: tuple[Text | str, ...] = (
                remote_text(row.instance), remote_text(row.platform), remote_text(row.now), price,
                uptime, so_far, remote_text(row.idle, style=palette.bad) if row.idle else "-")
            upsert_row(table, row.instance, BILLING_COLUMNS, cells)
        total = Text(f"sweep: {bill.per_hour:.2f}/h while every box bills; at least "
                     f"{bill.so_far:.2f} so far (price x uptime)", style="bold")
        if bill.unpriced:
            total.append("\n" + visible(f"no price_per_hour in the sweep for: {', '.join(bill.unpriced)}"),
                         style=palette.muted)
        self.query_one("#billing-total", PlainStatic).update(total)
        self._detail(bill)

    def _detail(self, bill: SweepBill) -> None:
        table = self.query_one("#billing-table", DataTable)
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        row = next((r for r in bill.rows if r.instance == key), None)
        if row is None:
            return
        text = Text(visible(f"{row.instance}: what still bills after each teardown action") + "\n",
                    style="bold")
        for label, after in row.after:
            text.append(visible(f"  {label}: "), style="bold")
            text.append(visible(after) + "\n")
        self.query_one("#billing-detail", PlainStatic).update(text)

    @on(DataTable.RowHighlighted, "#billing-table")
    def _highlighted(self) -> None:
        self._detail(self.bill())

    def action_back(self) -> None:
        self.dismiss(None)
