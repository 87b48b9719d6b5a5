"""The verify screen, the teardown screen and the typed-confirmation dialog.

Keyboard only. Verification runs as an async worker (never a thread: asyncssh is bound to
the app's loop) and loading happens in worker processes. Nothing irreversible is reachable
without N/N, a fresh manifest and the instance name typed in `ConfirmByTyping`.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Header, Input

from cockpit.models.custody import EXCLUDABLE, CellStatus
from cockpit.models.durations import format_bytes, format_duration
from cockpit.models.gate import GateError, GateState
from cockpit.models.text import remote_text, visible
from cockpit.services.custody.flow import Custody
from cockpit.services.custody.plan import ActionView, action_details, plan_actions
from cockpit.ui.base import CockpitScreen
from cockpit.ui.fleet import KeyedTable, upsert_row
from cockpit.ui.safe import PlainStatic

VERIFY_COLUMNS = ("cell", "status", "metric", "bytes", "reason")


def without_locked(why: str) -> str:
    """`why` without its leading `locked: ` (one or more): the words around it already say
    locked (`gate: LOCKED`, the red `locked` cell), so it read `locked: locked: …`."""
    while why.lower().startswith("locked: "):
        why = why[len("locked: "):]
    return why
ACTION_COLUMNS = ("action", "kind", "lock", "meter", "keeps", "destroys")


class ConfirmByTyping(ModalScreen[str | None]):
    """Approve by typing a name exactly; dismisses with what was typed, or None (esc)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, body: Text, expected: str) -> None:
        super().__init__(classes="banner")
        self.title_text = title
        self.body = body
        self.expected = expected

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield PlainStatic(Text(self.title_text, style="bold"), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic(self.body)
            yield Input(placeholder=f"type {self.expected} and press enter", id="confirm-input")
            yield Footer()

    def on_mount(self) -> None:
        self.query_one("#confirm-input", Input).focus()

    @on(Input.Submitted, "#confirm-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class _CustodyScreen(CockpitScreen):
    """Shared plumbing of the verify and teardown screens."""

    def __init__(self, instance: str, classes: str) -> None:
        super().__init__(classes=classes)
        self.instance = instance
        self.seen = -1


    @property
    def custody(self) -> Custody:
        """This instance's verification and teardown state."""
        return self.cockpit.custody_of(self.instance)

    def on_mount(self) -> None:
        self.set_interval(0.5, self._tick)
        self.redraw(force=True)

    def _tick(self) -> None:
        if self.whole("Footer"):  # popped or exiting: nothing left to paint
            self.redraw()

    def redraw(self, force: bool = False) -> None:
        """Redraw when the custody state moved."""
        if not force and self.custody.version == self.seen:
            return
        self.seen = self.custody.version
        self.render_state()

    def render_state(self) -> None:
        """Fill the widgets (per screen)."""

    def gate_line(self) -> Text:
        """`LOCKED: 2/3 loaded: not N/N` in the right colour."""
        gate = self.custody.gate
        palette = self.cockpit.palette
        style = {GateState.VERIFIED: palette.ok, GateState.DONE: palette.ok,
                 GateState.LOCKED: palette.bad, GateState.FAILED: palette.bad}.get(gate.state, palette.warn)
        text = Text("gate: ")
        text.append(gate.state.value.upper(), style=f"bold {style}")
        text.append(f"  {visible(without_locked(gate.reason))}")
        return text


class VerifyScreen(_CustodyScreen):
    """Roster, pull progress and per-cell verdicts of one instance: `N/N loaded`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("p", "verify", "Pull & verify"),
        Binding("x", "exclude", "Exclude", tooltip="Exclude unfinished cell"),
        Binding("t", "teardown", "Teardown"),
    ]

    def __init__(self, instance: str) -> None:
        super().__init__(instance, "verify")

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="verify-head")
        yield KeyedTable(id="verify-table", cursor_type="row", zebra_stripes=True)
        yield PlainStatic(id="verify-foot")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#verify-table", DataTable)
        for column in VERIFY_COLUMNS:
            table.add_column(column, key=column)
        super().on_mount()
        table.focus()

    def render_state(self) -> None:
        custody = self.custody
        palette = self.cockpit.palette
        report = custody.report
        head = Text(f"Verify {self.instance}", style="bold")
        head.append(f"  → {visible(str(custody.dest))}\n")
        head.append_text(self.gate_line())
        if custody.busy or (custody.stage and (report is None or report.verification is None)):
            # Once a verification is shown, its stage line ("1/3 loaded") is history: an
            # exclusion since changed N, and the gate and the summary below say the same.
            head.append(f"\n{'working: ' if custody.busy else ''}{visible(custody.stage)}")
        progress = custody.progress
        if progress is not None and progress.total:
            eta = progress.eta_s
            head.append(f"\npulled {format_bytes(progress.done)} of {format_bytes(progress.total)}"
                        f" ({100 * progress.done / progress.total:.0f}%); "
                        f"{format_bytes(progress.moved)} moved this run at {format_bytes(progress.rate)}/s"
                        f"{', ETA ' + format_duration(eta) if eta and custody.busy else ''}")
        self.query_one("#verify-head", PlainStatic).update(head)
        table = self.query_one("#verify-table", DataTable)
        foot = Text()
        verification = report.verification if report else None
        if report is not None and report.error:
            foot.append(f"ERROR {visible(report.error)}", style=f"bold {palette.bad}")
        elif verification is None:
            foot.append("press p to read the roster, hash the cells on the box, pull and verify",
                        style=palette.muted)
        else:
            colour = palette.ok if verification.complete else palette.bad
            foot.append(f"{verification.summary}", style=f"bold {colour}")
            if verification.excluded:
                total = verification.expected + len(verification.excluded)
                foot.append(f" (N = {total} cells minus the {len(verification.excluded)} you "
                            f"excluded)", style=palette.muted)
            foot.append(f"  {format_bytes(verification.bytes_pulled)} verified, manifest "
                        f"{verification.manifest_digest[:16]}")
            foot.append(f"\nreceipt: {visible(str(report.marker))}" if report and report.marker else
                        "\nno receipt (written only at N/N)")
            for blocker in verification.blockers:
                foot.append(f"\nblocked: {visible(blocker)}", style=palette.bad)
            if report is not None and report.runbook_marker:
                foot.append(f"\nnote: {visible(report.runbook_marker)}", style=palette.muted)
            for extra in verification.extras:
                foot.append(f"\nnote: unexpected extra directory on the box: {visible(extra)}/",
                            style=palette.warn)
            for outcome in report.pull.failures if report and report.pull else ():
                foot.append(f"\npull: {visible(outcome.entry.cell)}/{visible(outcome.entry.path)}: "
                            f"{visible(outcome.detail)}", style=palette.bad)
            style = {CellStatus.OK: palette.ok, CellStatus.ERROR: palette.bad,
                     CellStatus.FAILED_ON_BOX: palette.bad, CellStatus.EXCLUDED: palette.muted,
                     CellStatus.RUNNING: palette.warn, CellStatus.UNPROVEN: palette.warn}
            for verdict in verification.verdicts:
                row: tuple[Text | str, ...] = (
                    remote_text(verdict.cell),
                    Text(verdict.status.value.upper(), style=style[verdict.status]),
                    remote_text(verdict.metric or "-"),
                    format_bytes(verdict.bytes) if verdict.bytes else "-",
                    remote_text(verdict.reason or ""))
                upsert_row(table, verdict.cell, VERIFY_COLUMNS, row)
        self.query_one("#verify-foot", PlainStatic).update(foot)

    def action_back(self) -> None:
        self.dismiss(None)

    def action_verify(self) -> None:
        if self.custody.busy:
            self.notify("verification already running", timeout=2)
            return
        self.cockpit.start_verify(self.instance)

    def action_teardown(self) -> None:
        self.cockpit.push_screen(TeardownScreen(self.instance))

    def action_exclude(self) -> None:
        table = self.query_one("#verify-table", DataTable)
        report = self.custody.report
        if table.row_count == 0 or report is None or report.verification is None:
            self.notify("verify first", timeout=2)
            return
        cell = str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value)
        verdict = next(v for v in report.verification.verdicts if v.cell == cell)
        shown = visible(cell)
        if verdict.status not in EXCLUDABLE:
            self.notify(f"{shown} is {verdict.status.value}: only a cell without a finished result "
                        f"(failed on the box, unproven or running) can be excluded",
                        severity="warning", timeout=4, markup=False)
            return
        cause = verdict.cause or self.cockpit.cause_of(self.instance, cell)
        body = Text(f"{shown} is {verdict.status.value}: "
                    f"{visible(cause.text if cause else verdict.reason)}\n\n"
                    f"Excluding it removes it from N, so the instance can reach N/N without it: a "
                    f"teardown may then destroy whatever it left on the box. The exclusion and its "
                    f"reason are written to the audit log and shown on the teardown screen.")

        def done(typed: str | None) -> None:
            if typed is None:
                return
            try:
                self.custody.exclude(cell, typed, cause.text if cause else "")
            except GateError as exc:
                self.notify(str(exc), severity="error", timeout=5, markup=False)
                return
            self.notify(f"{shown} excluded and recorded", timeout=3, markup=False)

        self.cockpit.push_screen(ConfirmByTyping(f"Exclude {shown} from N?", body, cell), done)


class TeardownScreen(_CustodyScreen):
    """The profile's teardown actions for one instance, locked until N/N and fresh."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        # Short footer words (80 columns); `?` shows the tooltips.
        Binding("a", "approve", "Approve", tooltip="Approve selected (type the name)"),
        Binding("d", "refuse_request", "Refuse request",
                tooltip="Refuse the agent's request for the selected action"),
    ]

    def __init__(self, instance: str) -> None:
        super().__init__(instance, "teardown")
        self.views: list[ActionView] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="teardown-head")
        yield KeyedTable(id="teardown-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="teardown-detail-box"):
            yield PlainStatic(id="teardown-detail")
        yield PlainStatic(id="teardown-output")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#teardown-table", DataTable)
        for column in ACTION_COLUMNS:
            table.add_column(column, key=column)
        tracker = self.cockpit.trackers[self.instance]
        self.views = plan_actions(tracker.instance, tracker.profile)
        super().on_mount()
        table.focus()

    def selected(self) -> ActionView | None:
        """The highlighted action."""
        table = self.query_one("#teardown-table", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((v for v in self.views if v.action.id == key), None)

    def render_state(self) -> None:
        custody = self.custody
        palette = self.cockpit.palette
        head = Text(f"Teardown {self.instance}", style="bold")
        head.append(f"  {custody.profile.display_name}\n")
        head.append_text(self.gate_line())
        verification = custody.gate.latest
        for verdict in verification.excluded if verification else ():
            head.append(f"\nexcluded from N: {visible(verdict.cell)}: {visible(verdict.reason)}",
                        style=palette.warn)
        from cockpit.ui.requests import pending_requests  # an agent's request: a note, not a key

        for request in pending_requests(self.cockpit, self.instance):
            head.append(f"\nrequest {request.line()} (verification then: "
                        f"{visible(str(request.verification.get('gate', '?')))}) - approve the "
                        f"action here as always, or d to refuse", style=f"bold {palette.warn}")
        self.query_one("#teardown-head", PlainStatic).update(head)
        table = self.query_one("#teardown-table", DataTable)
        for view in self.views:
            allowed, why = (False, view.problem) if view.step is None else custody.gate.can_approve(view.step)
            action = view.action
            row: tuple[Text | str, ...] = (
                action.label,
                Text("reversible", style=palette.ok) if action.reversible else
                Text("IRREVERSIBLE", style=f"bold {palette.bad}"),
                Text("open", style=palette.ok) if allowed else
                Text(visible(f"locked: {without_locked(why)}")[:48], style=palette.bad),
                action.stops_meter, ", ".join(action.keeps) or "-", ", ".join(action.destroys) or "-")
            upsert_row(table, action.id, ACTION_COLUMNS, row)
        self._detail()
        self.query_one("#teardown-output", PlainStatic).update(
            remote_text("".join(custody.output[-12:])[-4000:], one_line=False))

    def _detail(self) -> None:
        view = self.selected()
        if view is None:
            return
        action = view.action
        text = Text(f"{action.label}", style="bold")
        text.append(f"  [{action.id}]\n")
        # What it keeps and destroys first: at 80 columns the table's own columns for them
        # are off screen, and they are what an approval is about.
        text.append("keeps: ")
        text.append(f"{visible(', '.join(action.keeps) or '-')}\n", style=self.cockpit.palette.ok)
        text.append("destroys: ")
        text.append(f"{visible(', '.join(action.destroys) or '-')}\n",
                    style=self.cockpit.palette.bad)
        allowed, why = ((False, view.problem) if view.step is None
                        else self.custody.gate.can_approve(view.step))
        if not allowed:
            text.append(f"locked: {visible(without_locked(why))}\n", style=self.cockpit.palette.bad)
        for label, value in action_details(view):
            text.append(f"{label}: ")
            text.append(f"{visible(value)}\n", style="bold" if label == "command" else "")
        self.query_one("#teardown-detail", PlainStatic).update(text)

    @on(DataTable.RowHighlighted, "#teardown-table")
    def _highlighted(self) -> None:
        self._detail()

    @on(DataTable.RowSelected, "#teardown-table")
    def _selected(self) -> None:
        self.action_approve()  # enter on the focused table arrives as a row selection

    def action_back(self) -> None:
        self.dismiss(None)

    def action_approve(self) -> None:
        view = self.selected()
        custody = self.custody
        if view is None or view.step is None:
            self.notify(view.problem if view else "no action", severity="error", timeout=4)
            return
        step = view.step
        allowed, why = custody.gate.can_approve(step)
        if not allowed:
            custody.refused_key(step, why)
            self.notify(f"{view.action.label}: locked: {without_locked(why)}", severity="error",
                        timeout=5, markup=False)
            return
        manual = step.argv is None
        body = Text()
        body.append(f"{view.action.label} on {self.instance}: "
                    f"{'IRREVERSIBLE' if step.irreversible else 'reversible'}\n", style="bold")
        body.append(f"destroys: {', '.join(view.action.destroys) or '-'}\n"
                    f"keeps: {', '.join(view.action.keeps) or '-'}\nbilling after: {view.billing}\n"
                    f"needs: {step.need.value}\n")
        if manual:
            body.append("\nDo this yourself in the platform's console:\n")
            for line in step.manual_steps:
                body.append(f"  • {line}\n")
            body.append("\nType the instance name once it is DONE, to record it as done by hand.")
        else:
            body.append(f"\nwill run: {visible(step.command_text)}\n")
            if step.need.name != "NAME":
                body.append("The remote state is recomputed first; any change re-locks.\n")

        def approved(typed: str | None) -> None:
            if typed is None:
                return
            try:
                plan = custody.approve(step, typed)
            except GateError as exc:
                self.notify(str(exc), severity="error", timeout=5, markup=False)
                return
            from cockpit.services.agent.requests import RequestState
            from cockpit.ui.requests import decide_requests

            decide_requests(self.cockpit, self.instance, step.action.id, RequestState.APPROVED,
                            f"approved on the teardown screen ({plan.basis.value}, name typed)")
            self.cockpit.start_teardown(self.instance, plan)

        self.cockpit.push_screen(ConfirmByTyping(
            f"Type {self.instance} to approve {view.action.label}", body, self.instance), approved)

    def action_refuse_request(self) -> None:
        """Refuse the pending agent requests for the highlighted action (runs nothing)."""
        from cockpit.services.agent.requests import RequestState
        from cockpit.ui.requests import decide_requests

        view = self.selected()
        if view is None:
            return
        refused = decide_requests(self.cockpit, self.instance, view.action.id,
                                  RequestState.REFUSED, "refused on the teardown screen")
        self.notify(f"refused request {', '.join(f'#{i}' for i in refused)}" if refused else
                    f"no pending request for {view.action.label}", timeout=4, markup=False)
        self.render_state()
