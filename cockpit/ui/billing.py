"""The billing view: what each box bills now, so far, and after each teardown action; what the
platforms themselves say beside it; orphans; per-currency totals; money danger clocks.

The platform clients are polled by an async worker, never on the UI's path: the first poll
when the view opens, then `POLL_INTERVAL_S` after the previous poll ended, or later when a
platform's 429 asked for it (a slow API delays its own next poll, never the screen). A failed
poll shows "platform state unknown since T (reason)"; the cockpit's own view stays,
unconfirmed. Money clocks that cross a threshold ring the bell and toast once per episode (the
monitor's latch, keyed per platform).
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header

from cockpit.models.billing import (
    PlatformTruth,
    SweepBill,
    billing_row,
    build_bill,
    per_hour_unit,
    totals_text,
)
from cockpit.models.durations import format_duration
from cockpit.models.text import remote_text, visible
from cockpit.services.platforms import next_poll_s, poll_all
from cockpit.services.platforms.base import PlatformClient
from cockpit.ui.base import CockpitScreen
from cockpit.ui.fleet import KeyedTable, upsert_row
from cockpit.ui.safe import PlainStatic

BILLING_COLUMNS = ("instance", "platform", "now", "platform says", "per hour", "uptime",
                   "so far", "idle")


class BillingScreen(CockpitScreen):
    """Money per box and for the sweep; `enter` on a box shows what survives each teardown."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back"),
                                              Binding("r", "poll", "Poll platforms")]

    def __init__(self, clients: list[PlatformClient] | None = None) -> None:
        super().__init__(classes="billing")
        self._clients = clients
        """The latest poll per platform (a failed poll keeps when it was last known)."""
        self.polls = 0
        """Polls finished since the view opened (tests wait on it)."""

    def compose(self) -> ComposeResult:
        yield Header()
        yield KeyedTable(id="billing-table", cursor_type="row", zebra_stripes=True)
        yield PlainStatic(id="billing-clocks")
        yield PlainStatic(id="billing-detail")
        yield PlainStatic(id="billing-total")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#billing-table", DataTable)
        for column in BILLING_COLUMNS:
            table.add_column(column, key=column)
        if self._clients is None:
            self._clients = self.cockpit.platform_clients()
        self.set_interval(1.0, self.redraw)
        self.redraw()
        table.focus()
        if self._clients:
            self.poll()

    @work(exclusive=True, group="platforms", exit_on_error=False)
    async def poll(self) -> None:
        """Poll every platform once (concurrently, each bounded by its timeouts), then again
        POLL_INTERVAL_S (or a 429's Retry-After, if longer) after this poll ended."""
        monitor = self.cockpit.monitor
        monitor.truths = await poll_all(self._clients or [], monitor.truths, self.cockpit.clock())
        self.polls += 1
        self.redraw()
        self.cockpit.check_alerts()  # money alerts now, through the monitor (stored, sent)
        self.set_timer(next_poll_s(monitor.truths), self.poll)

    def action_poll(self) -> None:
        """Poll the platforms now."""
        if self._clients:
            self.poll()

    def bill(self) -> SweepBill:
        """The current bill: the cockpit's rows reconciled with the latest platform truth."""
        now = self.cockpit.clock()
        trackers = self.cockpit.trackers.values()
        ids = {t.instance.name: (t.profile.platform, t.instance.instance_id) for t in trackers}
        return build_bill([billing_row(t, now) for t in trackers], ids, self.truths, now)

    @property
    def truths(self) -> dict[str, PlatformTruth]:
        """The latest platform answers (the monitor's: the app polls them in the background)."""
        return self.cockpit.monitor.truths

    def redraw(self) -> None:
        """Refresh the rows, the clocks, the detail and the totals."""
        if not self.whole("#billing-table"):  # popped or exiting: nothing left to paint
            return
        bill = self.bill()
        palette = self.cockpit.palette
        table = self.query_one("#billing-table", DataTable)
        for row in bill.rows:
            unit = per_hour_unit(row.currency)
            rate = row.rate_now
            price = f"{rate:.2f} {unit}" if rate is not None else f"- {unit}"
            so_far = f"{row.so_far:.2f} {row.currency}" if row.so_far is not None else "-"
            uptime = format_duration(row.uptime_s) if row.uptime_s is not None else "-"
            says_style = palette.bad if row.disagree or row.orphan else ""
            now_style = palette.bad if row.disagree else ""
            cells: tuple[Text | str, ...] = (
                remote_text(row.instance, style=palette.bad if row.orphan else ""),
                remote_text(row.platform), remote_text(row.now, style=now_style),
                remote_text(row.platform_says or "-", style=says_style), price, uptime, so_far,
                remote_text(row.idle, style=palette.bad) if row.idle else "-")
            upsert_row(table, row.instance, BILLING_COLUMNS, cells)
        clocks = Text()
        for clock in bill.clocks:
            style = palette.bad if clock.threshold_h is not None or clock.kind == "stopped-billing" \
                else ""
            clocks.append(visible(clock.text) + "\n", style=style)
        for line in bill.unknown:
            clocks.append(visible(line) + "\n", style=palette.muted)
        for row in bill.rows:
            if row.disagree:
                clocks.append(visible(f"{row.instance}: {row.disagree}") + "\n", style=palette.bad)
        self.query_one("#billing-clocks", PlainStatic).update(clocks)
        total = Text(f"sweep now: {totals_text(bill.per_hour, '/h')}; at least "
                     f"{totals_text(bill.so_far)} so far (price x uptime)", style="bold")
        if bill.orphans:
            total.append("\n" + visible(f"{len(bill.orphans)} instance(s) on the account that no "
                                        f"sweep watches: {', '.join(r.instance for r in bill.orphans)}"),
                         style=palette.bad)
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
        if row.orphan:
            text = Text(visible(f"{row.instance}: on the account, in no sweep: it bills "
                                f"({row.platform_says})"), style="bold")
            self.query_one("#billing-detail", PlainStatic).update(text)
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
