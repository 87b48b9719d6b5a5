"""One box: GPU, disk & inodes, queue and failure-log panels."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Vertical, VerticalScroll
from textual.widgets import DataTable, Footer, Header, Input

from cockpit.models.durations import format_duration
from cockpit.models.failures import FailureEvent
from cockpit.models.hostview import HostTracker, cell_name
from cockpit.models.queue import CellState, CellView
from cockpit.models.summary import state_text
from cockpit.models.text import remote_text, visible
from cockpit.models.trend import axis_line, bars
from cockpit.ui.base import CockpitScreen
from cockpit.ui.fleet import KeyedTable, upsert_row
from cockpit.ui.render import (
    cell_detail,
    cell_row,
    clock_time,
    disk_panel,
    gpu_panel,
    health_lines,
    queue_header,
    resume_hint_of,
)
from cockpit.ui.safe import PlainStatic

QUEUE_COLUMNS = ("#", "cell", "state", "epoch", "elapsed", "ETA")
FAILURE_COLUMNS = ("time", "rule", "class", "cell", "count", "message")
MESSAGE_MIN = 20
"""Characters of a failure's message shown in its row however narrow the panel."""


class BoxScreen(CockpitScreen):
    """The four panels of one instance."""

    BINDINGS: ClassVar[list[BindingType]] = [
        # The footer shows the first few (short words); `?` lists every key with its
        # tooltip, so the footer never cuts a word at 80 or 120 columns.
        Binding("escape", "back", "Back", tooltip="Back to fleet"),
        Binding("slash", "filter", "Filter", tooltip="Filter failures"),
        Binding("v", "verify", "Verify", tooltip="Verify & teardown"),
        Binding("l", "master_log", "Log", tooltip="Master log"),
        Binding("r", "reconnect", "Reconnect", show=False),
        Binding("P", "operation('preflight')", "Preflight", show=False),
        Binding("L", "operation('launch')", "Launch", show=False),
        Binding("R", "operation('resume')", "Resume", show=False),
        Binding("S", "operation('stop')", "Stop", show=False),
        Binding("X", "rerun", "Rerun cell", show=False),
        Binding("c", "copy_hint", "Copy resume cmd", show=False),
        Binding("exclamation_mark", "events", "Events", show=False),
        Binding("tab", "next_panel(1)", "Next panel", show=False),
        Binding("shift+tab", "next_panel(-1)", "Previous panel", show=False),
        Binding("F", "next_failed", "Next failed cell", show=False),
    ]
    PANELS = ("#gpu-panel", "#disk-panel", "#queue-panel", "#failure-panel")
    """The panels `tab` cycles through, in reading order."""
    SHORT_ROWS = 32
    """Below this many terminal rows the GPU and disk panels shrink so the queue's and the
    failures' rows stay visible (at 80x24 the queue showed no row at all)."""

    def __init__(self, instance: str) -> None:
        super().__init__(classes="box")
        self.instance = instance
        self.seen_version = -1
        self.seen_failures = -1
        self.filter_text = ""


    @property
    def tracker(self) -> HostTracker:
        """This box's live model."""
        return self.cockpit.trackers[self.instance]

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="box-title")
        with Grid(id="panels"):
            with Vertical(id="gpu-panel", classes="panel"):
                yield PlainStatic(id="gpu-body")
                yield Vertical(id="sparks")
            with VerticalScroll(id="disk-panel", classes="panel"):
                yield PlainStatic(id="disk-body")
                yield Vertical(id="disk-trends")
            with Vertical(id="queue-panel", classes="panel"):
                yield PlainStatic(id="queue-head")
                yield KeyedTable(id="queue-table", cursor_type="row", zebra_stripes=True)
                yield PlainStatic(id="queue-detail")
            with Vertical(id="failure-panel", classes="panel"):
                yield PlainStatic(id="health")
                yield Input(placeholder="filter failures (class, cell, text)  esc: clear",
                            id="failure-filter")
                yield KeyedTable(id="failure-table", cursor_type="row")
                yield PlainStatic(id="failure-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#gpu-panel").border_title = "GPU"
        self.query_one("#disk-panel").border_title = "Disk & inodes"
        self.query_one("#queue-panel").border_title = "Queue"
        self.query_one("#failure-panel").border_title = "Failure log"
        queue = self.query_one("#queue-table", DataTable)
        for column in QUEUE_COLUMNS:
            queue.add_column(column, key=column)
        failures = self.query_one("#failure-table", DataTable)
        for column in FAILURE_COLUMNS:
            failures.add_column(column, key=column)
        self.query_one("#failure-filter", Input).display = False
        self.query_one("#gpu-panel").can_focus = True  # `tab` stops on every panel
        self.set_class(self.app.size.height < self.SHORT_ROWS, "-short")
        self.redraw(force=True)
        queue.focus()

    def refresh_hosts(self, names: set[str]) -> None:
        """Redraw when this box changed."""
        if self.instance in names and self.is_mounted and self.whole("#box-title"):
            self.redraw()

    def redraw(self, force: bool = False) -> None:
        """Re-render the panels from the tracker (skipped when nothing changed)."""
        tracker = self.tracker
        if not force and tracker.version == self.seen_version:
            return
        self.seen_version = tracker.version
        palette = self.cockpit.palette
        inst = tracker.instance
        title = remote_text(inst.name, style="bold")
        title.append(visible(f"  {tracker.profile.display_name}  {inst.host}  "))
        title.append(visible(state_text(tracker.state, self.cockpit.clock())))
        for alert in tracker.alerts(self.cockpit.clock()):
            title.append(visible(f"  ⚠ {alert}"), style=palette.bad)
        self.query_one("#box-title", PlainStatic).update(title)
        self.query_one("#gpu-body", PlainStatic).update(gpu_panel(tracker, palette))
        self._sparklines()
        self.query_one("#disk-body", PlainStatic).update(disk_panel(tracker, palette))
        self.query_one("#queue-head", PlainStatic).update(queue_header(tracker, palette))
        self._queue_rows()
        self.query_one("#health", PlainStatic).update(health_lines(tracker, palette,
                                                              self.cockpit.clock()))
        self._failure_rows(force)

    def _sparklines(self) -> None:
        """Per GPU: utilisation and memory over the whole run (the store, when one is open);
        per mount: bytes and inodes used, with the time-to-full. One line each on a fixed
        0-100% scale; each group shares one linear time axis, its column width and gaps said
        above it."""
        from cockpit.services.store.db import metric_disk, metric_gpu_mem, metric_gpu_util, metric_inodes

        tracker = self.tracker
        gpus: list[tuple[str, str, str, list[tuple[float, float]]]] = []
        for index in sorted(tracker.gpu_util):
            for what, metric, series in (
                    ("util", metric_gpu_util(index), tracker.gpu_util.get(index)),
                    ("mem", metric_gpu_mem(index), tracker.gpu_mem.get(index))):
                gpus.append((f"gpu{index}-{what}", f"gpu{index} {what}", metric,
                             list(series.points) if series is not None else []))
        self._trend_group(self.query_one("#sparks", Vertical), "gpu", "", gpus)
        snap = tracker.snapshot
        disks: list[tuple[str, str, str, list[tuple[float, float]]]] = []
        notes: list[str] = []
        for number, mount in enumerate(snap.mounts if snap is not None else ()):
            full = tracker.mount_trend(mount)
            for what, metric, used, total, eta in (
                    ("bytes", metric_disk(mount.path), tracker.mount_bytes.get(mount.path),
                     mount.bytes_total, full.bytes_full_s),
                    ("inodes", metric_inodes(mount.path), tracker.mount_inodes.get(mount.path),
                     mount.inodes_total, full.inodes_full_s)):
                live = ([(at, 100.0 * value / total) for at, value in used.points]
                        if used is not None and isinstance(total, int) and total > 0 else [])
                disks.append((f"m{number}-{what}", f"m{number} {what}", metric, live))
                if eta is not None:
                    notes.append(f"m{number} {what} full in {format_duration(eta)}")
        legend = "  ".join(f"m{n}={m.path}" for n, m in enumerate(snap.mounts if snap else ()))
        if notes:
            legend += "\n" + "; ".join(notes)
        self._trend_group(self.query_one("#disk-trends", Vertical), "disk", legend, disks)

    TREND_TITLE = 12
    """Columns of a trend line's title (`gpu0 util`, `m1 inodes`)."""

    def _trend_group(self, parent: Vertical, key: str, legend: str,
                     rows: list[tuple[str, str, str, list[tuple[float, float]]]]) -> None:
        """Mount or update a group of trend lines sharing one time axis under `parent`."""
        if not rows:
            return
        columns = max(10, (parent.size.width or 60) - self.TREND_TITLE)
        first = [self.cockpit.trend(self.instance, metric, live, columns)
                 for _, _, metric, live in rows]
        start = min(trend.start for trend, _ in first)
        drawn = [self.cockpit.trend(self.instance, metric, live, columns, start)
                 for _, _, metric, live in rows]
        sample = drawn[0][0]
        scope = "whole run" if any(scope == "whole run" for _, scope in drawn) else "this session"
        head = Text(f"{scope} · max per {format_duration(sample.column_s)} · 0-100%")
        if any(trend.gaps for trend, _ in drawn):
            head.append(" · blank: no data")
        if legend:
            head.append("\n")
            head.append(remote_text(legend, one_line=False))
        axis = Text(" " * self.TREND_TITLE + axis_line(len(sample.values), *sample.axis()))
        lines = []
        for (row_key, title, _, _), (trend, _) in zip(rows, drawn, strict=True):
            line = Text(f"{title[: self.TREND_TITLE - 1]:<{self.TREND_TITLE}}")
            line.append(bars(trend.values), style=self.cockpit.palette.ok)
            lines.append((row_key, line))
        found = parent.query(f"#spark-head-{key}")
        if not found:
            parent.mount(PlainStatic(head, id=f"spark-head-{key}", classes="spark-label"))
            for row_key, line in lines:
                parent.mount(PlainStatic(line, id=f"spark-{row_key}", classes="spark"))
            parent.mount(PlainStatic(axis, id=f"spark-axis-{key}", classes="spark-axis"))
            return
        found.first(PlainStatic).update(head)
        for row_key, line in lines:
            existing = parent.query(f"#spark-{row_key}")
            if existing:
                existing.first(PlainStatic).update(line)
            else:  # a GPU or a mount that appeared later: before the axis
                parent.mount(PlainStatic(line, id=f"spark-{row_key}", classes="spark"),
                             before=self.query_one(f"#spark-axis-{key}"))
        self.query_one(f"#spark-axis-{key}", PlainStatic).update(axis)

    def _queue_rows(self) -> None:
        table = self.query_one("#queue-table", DataTable)
        palette = self.cockpit.palette
        for cell in self.tracker.queue_view().cells:
            row = cell_row(cell, palette)
            upsert_row(table, f"{cell.index}:{cell.name}", QUEUE_COLUMNS, row)
        self._show_cell()

    def highlighted_cell(self) -> CellView | None:
        """The queue table's highlighted cell, if any."""
        table = self.query_one("#queue-table", DataTable)
        if table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((c for c in self.tracker.queue_view().cells
                     if f"{c.index}:{c.name}" == key), None)

    def _show_cell(self) -> None:
        self.query_one("#queue-detail", PlainStatic).update(
            cell_detail(self.highlighted_cell(), self.cockpit.palette))

    @on(DataTable.RowHighlighted, "#queue-table")
    def _cell_highlighted(self) -> None:
        self._show_cell()

    def _failure_rows(self, force: bool) -> None:
        log = self.tracker.failures
        if not force and log.version == self.seen_failures:
            return
        self.seen_failures = log.version
        table = self.query_one("#failure-table", DataTable)
        palette = self.cockpit.palette
        shown = log.matching(self.filter_text)
        keys = {self._event_key(e) for e in shown}
        for stale in [k for k in table.rows if k.value not in keys]:
            table.remove_row(stale)
        for event in shown:
            row: tuple[Text | str, ...] = (
                clock_time(event.last_at), event.rule_id or "-",
                remote_text(event.klass, style=palette.bad if event.severe else palette.warn),
                remote_text(event.cell), f"x{event.count}",
                remote_text(self._fitted(event.message, table)))
            upsert_row(table, self._event_key(event), FAILURE_COLUMNS, row)
        if not log.events:
            self.query_one("#failure-detail", PlainStatic).update(
                Text("no failures seen in this session", style=palette.muted))
        else:
            self._show_detail()

    @staticmethod
    def _fitted(message: str, table: DataTable[Any]) -> str:
        """A failure's message cut to what the panel has left after the other columns (the
        detail pane below and the log view show it whole)."""
        width = MESSAGE_MIN
        if table.size.width:
            others = sum(column.get_render_width(table) for key, column in table.columns.items()
                         if key.value != "message")
            width = max(MESSAGE_MIN, table.size.width - others - 3)
        return message if len(message) <= width else message[: width - 1] + "…"

    def on_resize(self) -> None:
        """A wider panel shows more of each failure's message (once laid out anew); a short
        terminal gives the queue and failure panels the rows."""
        self.set_class(self.app.size.height < self.SHORT_ROWS, "-short")
        if self.is_mounted:
            self.call_after_refresh(self._failure_rows, True)

    @staticmethod
    def _event_key(event: FailureEvent) -> str:
        return f"{event.key}:{event.cell}"

    def _show_detail(self) -> None:
        table = self.query_one("#failure-table", DataTable)
        detail = self.query_one("#failure-detail", PlainStatic)
        if table.row_count == 0:
            detail.update("no events match the filter")
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        event = next((e for e in self.tracker.failures.events if self._event_key(e) == key), None)
        if event is None:
            return
        text = remote_text(f"{event.rule_id or 'exit'} {event.title}", style="bold")
        where = f"{event.cell}.log:{event.line_no}" if event.line_no is not None else event.cell
        parts = [event.klass, where]
        if event.frame:
            parts.append(f"at {event.frame}")
        if event.exit_code is not None:
            parts.append(f"exit={event.exit_code}")
        parts.append(f"x{event.count} {clock_time(event.first_at)}-{clock_time(event.last_at)}")
        text.append(visible(" · " + " · ".join(parts)) + "\n")
        text.append(visible(event.message) + "\n")  # the whole excerpt (the row is cut to fit)
        if event.retry is not None:
            text.append("same-config retry: allowed. " if event.retry else
                        "same-config retry: NO, fix first. ", style="bold")
        text.append(visible(f"fix: {event.remediation}", one_line=False))
        detail.update(text)

    @on(DataTable.RowHighlighted, "#failure-table")
    def _failure_highlighted(self) -> None:
        self._show_detail()

    # -- logs (enter on a cell or a failure, `l` for the master log) -----------------------
    def cell_log_path(self, cell: str) -> str | None:
        """Where `cell`'s own log is: the run log the probe listed for it, else
        `run_logs/<cell>.log`; None when the sweep names no run_logs folder."""
        snap = self.tracker.snapshot
        if snap is not None:
            for stat in snap.queue.run_logs:
                if cell_name(stat.path) == cell:
                    return stat.path
        base = self.tracker.instance.run_logs
        return f"{base.rstrip('/')}/{cell}.log" if base else None

    def open_log(self, path: str | None, *, what: str, find: str = "",
                 line_no: int | None = None) -> None:
        """Push the log view of `path` (read over this box's connection)."""
        from cockpit.ui.logview import LogScreen

        if path is None:
            self.notify(f"{self.instance}: the sweep names no {what} for this box", severity="warning")
            return
        self.cockpit.push_screen(LogScreen(self.instance, path, title=path, find=find,
                                           line_no=line_no))

    @on(DataTable.RowSelected, "#queue-table")
    def _cell_selected(self) -> None:
        """Enter on a queue cell: its log, at the end."""
        cell = self.highlighted_cell()
        if cell is not None:
            self.open_log(self.cell_log_path(cell.name), what="run_logs folder")

    @on(DataTable.RowSelected, "#failure-table")
    def _failure_selected(self) -> None:
        """Enter on a failure: its cell's log at the failure's line."""
        table = self.query_one("#failure-table", DataTable)
        if table.row_count == 0:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        event = next((e for e in self.tracker.failures.events if self._event_key(e) == key), None)
        if event is None:
            return
        find = event.message if event.line_no is not None else ""
        self.open_log(self.cell_log_path(event.cell), what="run_logs folder", find=find,
                      line_no=event.line_no)

    def action_master_log(self) -> None:
        """The queue's master log, at the end."""
        self.open_log(self.tracker.instance.queue_log, what="queue_log")

    # -- actions ---------------------------------------------------------------------------
    def action_back(self) -> None:
        box = self.query_one("#failure-filter", Input)
        if box.display:
            box.value = ""
            box.display = False
            self.filter_text = ""
            self._failure_rows(force=True)
            self.query_one("#failure-table", DataTable).focus()
            return
        self.dismiss(None)

    def action_filter(self) -> None:
        box = self.query_one("#failure-filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#failure-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self._failure_rows(force=True)

    @on(Input.Submitted, "#failure-filter")
    def _filter_kept(self) -> None:
        self.query_one("#failure-table", DataTable).focus()

    def action_reconnect(self) -> None:
        self.cockpit.reconnect(self.instance)

    def action_verify(self) -> None:
        self.cockpit.open_verify(self.instance)

    def action_events(self) -> None:
        """This box's events list (`!`): the store's and this session's, newest first."""
        from cockpit.ui.events import EventsScreen

        self.cockpit.push_screen(EventsScreen(self.instance))

    def action_operation(self, verb: str) -> None:
        self.cockpit.start_operation(self.instance, verb)

    def action_copy_hint(self) -> None:
        """Copy the resume command (OSC 52, written by the app itself)."""
        hint = resume_hint_of(self.tracker)
        if hint is None:
            self.notify("no resume command now (the queue runs, or no cell is left)",
                        severity="warning")
            return
        self.app.copy_to_clipboard(hint[1])
        self.notify(f"copied the command that resumes at cell {hint[0]}", timeout=3)

    def action_rerun(self) -> None:
        """Re-run the highlighted cell only (a new queue file; its old log rotated)."""
        from cockpit.ui.ops import run_operation

        cell = self.highlighted_cell()
        if cell is None:
            self.notify("no cell highlighted", severity="warning")
            return
        self.app.run_worker(run_operation(self.cockpit, self.instance, "rerun", cells=[cell.name]),
                            group=f"ops-{self.instance}", exclusive=True, exit_on_error=False)

    def action_next_panel(self, step: int) -> None:
        """Focus the next (or previous) panel: GPU, disk, queue, failures."""
        panels = [self.query_one(selector) for selector in self.PANELS]
        focused = self.focused
        at = next((i for i, panel in enumerate(panels)
                   if focused is not None and (focused is panel or panel in focused.ancestors)),
                  -1)
        panel = panels[(at + step) % len(panels)]
        tables = panel.query(DataTable)
        (tables.first() if tables else panel).focus()

    def action_next_failed(self) -> None:
        """The queue's cursor to the next failed cell (after the cursor, wrapping)."""
        table = self.query_one("#queue-table", DataTable)
        cells = self.tracker.queue_view().cells
        keys = [str(k.value) for k in table.rows]
        failed = {f"{c.index}:{c.name}" for c in cells if c.state is CellState.FAILED}
        for step in range(1, len(keys) + 1):
            row = (table.cursor_row + step) % len(keys)
            if keys[row] in failed:
                table.focus()
                table.move_cursor(row=row)
                return
        self.notify("no failed cell on this box", timeout=2)

    def tables(self) -> dict[str, DataTable[Any]]:
        """The queue and failure tables (for tests)."""
        return {"queue": self.query_one("#queue-table", DataTable),
                "failures": self.query_one("#failure-table", DataTable)}
