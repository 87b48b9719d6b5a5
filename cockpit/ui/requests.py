"""Teardown requests from agents in the TUI: a toast when one arrives, the list (`A`), and the
helpers the teardown screen uses to show and decide them.

An agent's request (`cockpit mcp`, `request_teardown`) is only a note in the sweep's store.
It is decided on the teardown screen: approving the requested action there, through the
gate as always (fresh N/N, then the instance name typed), marks it approved; `d` there
refuses it. Nothing on this screen approves or runs anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Header

from cockpit.models.text import remote_text, visible
from cockpit.services.agent.requests import RequestBook, RequestState, TeardownRequest
from cockpit.ui.base import CockpitScreen
from cockpit.ui.fleet import upsert_row
from cockpit.ui.safe import PlainStatic, PlainTable

if TYPE_CHECKING:
    from cockpit.ui.app import CockpitApp

REQUEST_POLL_S = 3.0
"""How often the app looks for new pending requests (a request waits for a person anyway)."""
REQUEST_COLUMNS = ("id", "when", "instance", "action", "who", "state", "reason")


def open_book(app: CockpitApp) -> RequestBook | None:
    """The store's request book for this session, or None without a store (or a broken one)."""
    session = app.session
    if session is None:
        return None
    try:
        return RequestBook(session.db)
    except Exception:  # a store that cannot be opened costs the requests list, not the session
        return None


def pending_requests(app: CockpitApp, instance: str) -> list[TeardownRequest]:
    """Pending requests for `instance`, newest first."""
    book = open_book(app)
    if book is None:
        return []
    with book:
        return book.listing(state=RequestState.PENDING, instance=instance)


def decide_requests(app: CockpitApp, instance: str, action: str, state: RequestState,
                    by: str) -> list[int]:
    """Mark the pending requests for `action` on `instance` approved or refused (called by
    the teardown screen after the person's decision); the ids decided."""
    book = open_book(app)
    if book is None:
        return []
    with book:
        return [r.id for r in book.listing(state=RequestState.PENDING, instance=instance)
                if r.action == action and book.decide(r.id, state, by)]


class RequestWatch:
    """Toasts each pending request once, as it appears in the store."""

    def __init__(self, app: CockpitApp) -> None:
        self.app = app
        self.seen: set[int] = set()

    def check(self) -> None:
        """Look for new pending requests (called every `REQUEST_POLL_S`)."""
        book = open_book(self.app)
        if book is None:
            return
        with book:
            pending = book.listing(state=RequestState.PENDING)
        for request in reversed(pending):
            if request.id in self.seen:
                continue
            self.seen.add(request.id)
            self.app.notify(f"teardown request {request.line()} — only you can approve it: "
                            f"A lists them; the teardown screen (t) decides",
                            title="agent request", severity="warning", timeout=15)


def watch_requests(app: CockpitApp) -> RequestWatch:
    """Start toasting new pending requests on `app`."""
    watch = RequestWatch(app)
    app.set_interval(REQUEST_POLL_S, watch.check)
    return watch


class RequestsScreen(CockpitScreen):
    """Every teardown request, newest first; enter opens the instance's teardown screen."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("enter", "open", "Teardown screen (decide there)"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="requests-head")
        yield PlainTable(id="requests-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#requests-table", DataTable)
        for column in REQUEST_COLUMNS:
            table.add_column(column, key=column)
        self.set_interval(REQUEST_POLL_S, self.refresh_rows)
        self.refresh_rows()
        table.focus()

    def refresh_rows(self) -> None:
        """Re-read the requests from the store."""
        if not self.whole("#requests-table"):  # popped or exiting: nothing left to paint
            return
        head = Text("Teardown requests from agents", style="bold")
        book = open_book(self.cockpit)
        requests: list[TeardownRequest] = []
        if book is None:
            head.append("\nno store is open in this session: requests cannot be read")
        else:
            with book:
                requests = book.listing()
            head.append("\nAn agent can only ask. Approve on the instance's teardown screen "
                        "(enter): fresh N/N, then the instance name typed; d there refuses.")
        self.query_one("#requests-head", PlainStatic).update(head)
        table = self.query_one("#requests-table", DataTable)
        palette = self.cockpit.palette
        for request in requests:
            style = {RequestState.PENDING: palette.warn, RequestState.APPROVED: palette.ok,
                     RequestState.REFUSED: palette.muted}[request.state]
            upsert_row(table, str(request.id), REQUEST_COLUMNS, (
                f"#{request.id}", request.document()["at"], remote_text(request.instance),
                remote_text(request.action), remote_text(request.who),
                Text(request.state.value, style=style), remote_text(request.reason)))

    @on(DataTable.RowSelected, "#requests-table")
    def _selected(self) -> None:
        self.action_open()  # enter on the focused table arrives as a row selection

    def action_back(self) -> None:
        self.dismiss(None)

    def action_open(self) -> None:
        from cockpit.ui.custody import TeardownScreen

        table = self.query_one("#requests-table", DataTable)
        if table.row_count == 0:
            return
        key = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        book = open_book(self.cockpit)
        if book is None:
            return
        with book:
            request = book.get(int(key))
        if request is None or request.instance not in self.cockpit.trackers:
            self.notify(visible(f"request #{key}: no such instance in this sweep"),
                        severity="error", timeout=4)
            return
        self.cockpit.push_screen(TeardownScreen(request.instance))
