"""The log view: one cell's log (or the master log) read by byte ranges over the box's link.

Opens at the end and follows new bytes (`f` toggles); `/` searches up (older lines), `n` goes
on up, `N` down; `]` / `[` jump to the next / previous line the failure classifier names; the
detail pane shows the highlighted line whole (up to `logread.DETAIL_BYTES`). Only the pages of
the lines on screen are read (`cockpit.services.transport.logread`), so a multi-GB log opens
as fast as a small one. Every line is data: shown as plain `Text` with its controls made
visible, through the `cockpit.ui.safe` widgets; a line longer than a row is cut with a marker.

Reads run in async workers on the app's loop (asyncssh is bound to it); the screen itself
never awaits the box.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Footer, Header, Input

from cockpit.models.text import visible
from cockpit.services.transport.logread import (
    DETAIL_BYTES,
    ROW_BYTES,
    Found,
    Line,
    LogReader,
    open_log,
)
from cockpit.services.transport.remote import TRANSFER_ERRORS, Box
from cockpit.ui.base import CockpitScreen
from cockpit.ui.safe import PlainStatic

FOLLOW_S = 1.0
"""How often the log's size is looked at: one SFTP stat a second, and a read only when it grew."""
OPEN_LINES = 200
"""Lines indexed when the view opens (a tall terminal's screen and some to scroll)."""
UP_LINES = 200
"""Lines found above at once when scrolling past the first indexed line."""
ROW_CHARS = 1000
"""Characters of one row shown (wider than any terminal); the detail pane shows the rest."""
SEARCH_MAX = 200
"""Characters of a search text (a line's worth: searches are for a phrase on one line)."""
NEEDLE_CHARS = 120
"""Characters of a failure's excerpt searched for when opening at a failure (a prefix that
identifies the line; the excerpt may have been cut or had undecodable bytes replaced)."""


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", errors="surrogateescape")


def _size(n: int) -> str:
    """`n` bytes in words (B, KiB, MiB, GiB)."""
    if n < 1024:
        return f"{n} B"
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if value < 1024 or unit == "GiB":
            break
    return f"{value:.1f} {unit}"


def failure_needle(excerpt: str) -> str:
    """What to search for to find a failure's line: the longest run of the excerpt with no
    replaced byte (U+FFFD), cut to NEEDLE_CHARS."""
    runs = [part.strip() for part in excerpt.split("\ufffd")]
    best = max(runs, key=len, default="")
    return best[:NEEDLE_CHARS]


class LogScreen(CockpitScreen):
    """One log of one box, read by byte ranges."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("f", "follow", "Follow"),
        Binding("slash", "search", "Search up"),
        Binding("n", "next_match(False)", "Older match", show=False),
        Binding("N", "next_match(True)", "Newer match", show=False),
        Binding("right_square_bracket", "event(True)", "Next event"),
        Binding("left_square_bracket", "event(False)", "Previous event", show=False),
        Binding("up,k", "move(-1)", "Up", show=False),
        Binding("down,j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown,space", "page(1)", "Page down", show=False),
        Binding("home,g", "top", "First read line", show=False),
        Binding("end,G", "bottom", "Last line", show=False),
    ]
    """| key | action |
    | --- | --- |
    | f | follow new bytes on/off |
    | / n N | search up, go on up, go on down |
    | ] [ | next / previous classified line |
    | j k g G | move, first read line, last line |
    """

    def __init__(self, instance: str, path: str, *, title: str = "",
                 find: str = "", line_no: int | None = None) -> None:
        super().__init__(classes="logview")
        self.instance = instance
        self.path = path
        self.title_text = title or path
        self.find_text = find
        """Open at the last line holding this text (a failure's excerpt), else at the end."""
        self.line_no = line_no
        """A failure's 1-based line number: used when the whole log is indexed (exact then)."""
        self.reader: LogReader | None = None
        self.box: Box | None = None
        self.owned = False
        self.top = 0
        self.cursor = 0
        self.follow = find == "" and line_no is None
        self.needle = ""
        self.resume: dict[bool, int | None] = {True: None, False: None}
        """Where `N` (True) / `n` (False) go on after a search that gave up."""
        self.event_resume: dict[bool, int | None] = {True: None, False: None}
        self.note = "opening..."
        self.error = ""
        self._above = 0
        self._generation = 0
        self.rendered = 0
        """Renders finished (tests wait on it)."""
        self._growing = False
        self._refits = 0

    def compose(self) -> ComposeResult:
        yield Header()
        yield PlainStatic(id="log-status")
        yield PlainStatic(id="log-body")
        yield Input(placeholder="search up (older lines); enter: find, n: older, N: newer, "
                                "esc: close", id="log-search", max_length=SEARCH_MAX)
        with VerticalScroll(id="log-detail"):
            yield PlainStatic(id="log-detail-body")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#log-search", Input).display = False
        self.query_one("#log-detail").border_title = "Line"
        body = self.query_one("#log-body", PlainStatic)
        body.can_focus = True  # keys land on the log, not on whatever had focus before
        body.focus()
        self.show_status()
        self.open_reader()
        self.set_interval(FOLLOW_S, self.tick)

    async def on_unmount(self) -> None:
        if self.reader is not None:
            await self.reader.close()
        if self.box is not None and self.owned:
            await self.box.close()

    # -- state ---------------------------------------------------------------------------------
    def rows(self) -> int:
        """Rows the body shows (its height; a few before the first layout)."""
        return max(1, self.query_one("#log-body", PlainStatic).size.height or 10)

    def _sync(self) -> None:
        """Apply lines found above (every index shifts) or a reopened index to the cursor."""
        reader = self.reader
        if reader is None:
            return
        if reader.generation != self._generation:
            self._generation = reader.generation
            self._above = reader.above
            self.cursor = max(0, len(reader) - 1)
            self.top = max(0, self.cursor - self.rows() + 1)
            return
        shift = reader.above - self._above
        if shift:
            self._above = reader.above
            self.cursor += shift
            self.top += shift
            for table in (self.resume, self.event_resume):
                for key, value in table.items():
                    if value is not None:
                        table[key] = value + shift

    def _center(self) -> None:
        """Scroll so that the cursor (a line jumped to) has context above and below it."""
        self.top = max(0, self.cursor - self.rows() // 3)

    def on_resize(self) -> None:
        """A new height shows a different number of rows."""
        if self.reader is not None:
            self.call_after_refresh(self.redraw)  # once the body has its new size

    def _place(self) -> None:
        """Clamp the cursor to the index and scroll so that it is on screen."""
        reader = self.reader
        count = len(reader) if reader is not None else 0
        self.cursor = min(max(0, self.cursor), max(0, count - 1))
        rows = self.rows()
        if self.cursor < self.top:
            self.top = self.cursor
        elif self.cursor >= self.top + rows:
            self.top = self.cursor - rows + 1
        self.top = max(0, min(self.top, max(0, count - rows)))

    def show_status(self) -> None:
        """The status line: box, path, size, position, follow, the last note."""
        reader = self.reader
        text = Text()
        text.append(visible(f"{self.instance}  "), style="bold")
        text.append(visible(self.title_text))
        if reader is not None:
            where = reader.number(self.cursor)
            position = (f"line {where}" if where is not None else
                        f"byte {reader.start(self.cursor) if len(reader) else 0}")
            text.append(visible(f"  {_size(reader.end)}  {position}"
                                f"  read {_size(reader.bytes_read)}"))
            if not reader.complete:
                text.append(visible(f"  ({_size(reader.scanned)} above not read)"))
        text.append("  following" if self.follow else "  paused", style="bold")
        if self.error:
            text.append(visible(f"  {self.error}"), style=self.cockpit.palette.bad)
        elif self.note:
            text.append(visible(f"  {self.note}"), style=self.cockpit.palette.muted)
        self.query_one("#log-status", PlainStatic).update(text)

    # -- reading (workers) ---------------------------------------------------------------------
    @work(group="log-open", exclusive=True, exit_on_error=False)
    async def open_reader(self) -> None:
        """Open the log over the box's link and place the cursor (end, or the failure)."""
        try:
            self.box, self.owned = await self.cockpit.box_factory(self.instance)()
            self.reader = await open_log(self.box, self.path, max(OPEN_LINES, self.rows() * 2))
        except TRANSFER_ERRORS as exc:
            self.error = f"cannot read the log: {type(exc).__name__}: {exc}"
            self.note = ""
            self.show_status()
            self.query_one("#log-body", PlainStatic).update(Text(visible(self.error)))
            return
        reader = self.reader
        self._generation, self._above = reader.generation, reader.above
        self.cursor = len(reader) - 1
        self.note = "" if len(reader) else "the log is empty"
        if self.line_no is not None or self.find_text:
            await self._find_failure(reader)
        self._place()
        await self._show_lines()

    async def _find_failure(self, reader: LogReader) -> None:
        """Place the cursor on a failure's line: by its number when the whole log is indexed
        and that line holds the text, else the last line holding the text."""
        needle = failure_needle(self.find_text)
        line_no = self.line_no
        if line_no is not None and reader.complete and 1 <= line_no <= len(reader):
            line = await reader.whole(line_no - 1)
            if not needle or needle.lower() in _decoded(line.data).lower():
                self.cursor = line_no - 1
                self._center()
                self.note = f"at the failure's line {line_no}"
                return
        if not needle:
            self.note = "the failure's line is not known: showing the end"
            return
        self.note = "looking for the failure's line..."
        self.show_status()
        found = await reader.search(needle, len(reader), False)
        self._sync()
        if found.line is not None:
            self.cursor = found.line
            self._center()
            self.note = "at the failure's line (found by its text)"
        else:
            self.note = (f"the failure's line was not found in the last {_size(found.scanned)}: "
                         f"showing the end")

    async def _show_lines(self) -> None:
        """Read the lines on screen and the highlighted one, and show them."""
        reader = self.reader
        if reader is None:
            return
        try:
            self._place()
            lines = await reader.lines(self.top, self.rows(), ROW_BYTES)
            self._sync()
            detail = await reader.whole(self.cursor) if len(reader) else None
            self._sync()
        except TRANSFER_ERRORS as exc:
            self.error = f"read failed: {type(exc).__name__}: {exc}"
            self.show_status()
            return
        self.error = ""
        body = self.query_one("#log-body", PlainStatic)
        if body.size.height != len(lines) and len(lines) < len(reader) and self._refits < 3:
            self._refits += 1  # laid out since (or resized): fill it, a few times at most
            self.call_after_refresh(self.redraw)
        else:
            self._refits = 0
        body.update(self._body(lines, reader))
        self.query_one("#log-detail-body", PlainStatic).update(self._detail(detail, reader))
        self.show_status()
        self.rendered += 1

    def _body(self, lines: list[Line], reader: LogReader) -> Text:
        palette = self.cockpit.palette
        rulebook = self.cockpit.rulebook
        width = len(str(len(reader))) if reader.complete else 0
        out = Text(no_wrap=True, overflow="ellipsis", end="")
        for row, line in enumerate(lines):
            if row:
                out.append("\n")
            style = "reverse" if line.index == self.cursor else ""
            if width:
                out.append(f"{line.index + 1:>{width}} ", style=palette.muted)
            rule = rulebook.match_line(line.data)
            out.append("▶ " if rule is not None else "  ",
                       style=(palette.bad if rule is not None and rule.severe else palette.warn))
            start = len(out)
            if line.fragment:
                out.append("… ", style=palette.muted)
            out.append(visible(_decoded(line.data), limit=ROW_CHARS), style=style)
            if line.cut:
                out.append(f" … [+{_size(line.cut)}, whole in the pane below]", style=palette.muted)
            if self.needle:
                out.highlight_words([visible(self.needle)], "bold underline",
                                    case_sensitive=False)
            if style:
                out.stylize(style, start, len(out))
        if not lines:
            out.append("(no lines)" if not self.error else "", style=palette.muted)
        return out

    def _detail(self, line: Line | None, reader: LogReader) -> Text:
        palette = self.cockpit.palette
        if line is None:
            return Text("no line", style=palette.muted)
        number = reader.number(line.index)
        head = f"line {number}" if number is not None else f"byte {line.start}"
        text = Text(visible(f"{head} · {line.length} bytes"), style="bold")
        if line.fragment:
            text.append(visible(" · the end of a longer line (its start lies further up)"),
                        style=palette.muted)
        rule = self.cockpit.rulebook.match_line(line.data)
        if rule is not None:
            text.append(visible(f" · {rule.id} [{rule.klass}] {rule.spec.title}"),
                        style=palette.bad if rule.severe else palette.warn)
        text.append("\n")
        text.append(visible(_decoded(line.data), limit=0))
        if line.cut:
            text.append(visible(f" … [{_size(line.cut)} more not shown: the pane shows "
                                f"{_size(DETAIL_BYTES)} of a line]"), style=palette.muted)
        if rule is not None:
            text.append("\n")
            text.append(visible(f"fix: {rule.remediation}", one_line=False), style=palette.muted)
        return text

    @work(group="log-render", exclusive=True, exit_on_error=False)
    async def redraw(self) -> None:
        """Render in a worker (a newer redraw replaces an older one)."""
        await self._show_lines()

    def tick(self) -> None:
        """Look at the log's size (follow mode jumps to the last line). A look still under
        way is left to finish: on a slow link a new one would cancel it every time."""
        if self.reader is not None and not self._growing and self.whole("#log-body"):
            self._growing = True
            self.grow()

    @work(group="log-grow", exclusive=True, exit_on_error=False)
    async def grow(self) -> None:
        """Index what was appended; redraw when anything changed."""
        try:
            await self._grow()
        finally:
            self._growing = False

    async def _grow(self) -> None:
        reader = self.reader
        if reader is None:
            return
        try:
            count, end = len(reader), reader.end
            said = await reader.grow()
        except TRANSFER_ERRORS as exc:
            self.error = f"cannot look at the log: {type(exc).__name__}: {exc}"
            self.show_status()
            return
        self._sync()
        if said:
            self.note = said
        if self.follow:
            self.cursor = len(reader) - 1
        if said or len(reader) != count or reader.end != end or self.error:
            self.error = ""
            await self._show_lines()

    # -- actions ---------------------------------------------------------------------------------
    def action_back(self) -> None:
        search = self.query_one("#log-search", Input)
        if search.display:
            search.display = False
            self.workers.cancel_group(self, "log-search")
            self.query_one("#log-body", PlainStatic).focus()
            return
        self.dismiss(None)

    def action_follow(self) -> None:
        self.follow = not self.follow
        if self.follow and self.reader is not None:
            self.cursor = len(self.reader) - 1
        self.note = "following new lines" if self.follow else "paused: new lines are not followed"
        self.redraw()

    def action_move(self, delta: int) -> None:
        if self.reader is None:
            return
        if delta < 0 and self.cursor + delta < 0:
            self.extend_then_move(delta)
            return
        self.cursor += delta
        self.follow = self.follow and self.cursor >= len(self.reader) - 1
        self.redraw()

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(1, self.rows() - 1))

    def action_top(self) -> None:
        self.cursor = 0
        self.follow = False
        self.note = "" if self.reader is None or self.reader.complete else (
            "first line read so far: k / up reads further up")
        self.redraw()

    def action_bottom(self) -> None:
        if self.reader is not None:
            self.cursor = len(self.reader) - 1
        self.redraw()

    @work(group="log-render", exclusive=True, exit_on_error=False)
    async def extend_then_move(self, delta: int) -> None:
        """Moving above the first indexed line: find more lines above, then move."""
        reader = self.reader
        if reader is None:
            return
        self.follow = False
        try:
            await reader.extend_up(max(UP_LINES, -delta))
        except TRANSFER_ERRORS as exc:
            self.error = f"read failed: {type(exc).__name__}: {exc}"
            self.show_status()
            return
        self._sync()
        self.cursor += delta
        if self.cursor < 0:
            self.note = ("top of the log" if reader.complete else
                         f"the index holds its most lines ({len(reader)}): nothing above is shown")
        await self._show_lines()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self.action_move(3)

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.action_move(-3)

    def action_search(self) -> None:
        search = self.query_one("#log-search", Input)
        search.display = True
        search.value = self.needle
        search.focus()

    @on(Input.Submitted, "#log-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.needle = event.value
        self.resume = {True: None, False: None}
        self.query_one("#log-search", Input).display = False
        self.query_one("#log-body", PlainStatic).focus()
        self.search(False)

    def action_next_match(self, newer: bool) -> None:
        if not self.needle:
            self.action_search()
            return
        self.search(newer)

    @work(group="log-search", exclusive=True, exit_on_error=False)
    async def search(self, newer: bool) -> None:
        """Find the needle up (older) or down (newer) from the cursor, within SEARCH_BYTES;
        a search that gave up goes on from where it stopped on the next `n` / `N`."""
        reader = self.reader
        if reader is None or not self.needle:
            return
        origin = self.resume[newer]
        if origin is None:
            origin = self.cursor
        self.note = f"searching {'down' if newer else 'up'} for {self.needle!r}..."
        self.show_status()

        def progress(scanned: int) -> None:
            self.note = f"searching for {self.needle!r}: {_size(scanned)} read"
            self.show_status()

        try:
            found = await reader.search(self.needle, origin, newer, progress=progress)
        except TRANSFER_ERRORS as exc:
            self.error = f"search failed: {type(exc).__name__}: {exc}"
            self.show_status()
            return
        self._sync()
        self.resume[newer] = self._report(found, f"{self.needle!r}", newer, "N" if newer else "n")
        await self._show_lines()

    def _report(self, found: Found, what: str, newer: bool, key: str) -> int | None:
        """Move to what was found, or say why not; returns where a repeat goes on."""
        way = "below" if newer else "above"
        if found.line is not None:
            self.cursor = found.line
            self._center()
            self.follow = False
            self.note = f"{what} found ({_size(found.scanned)} read)"
        elif found.gave_up and found.resume is not None:
            self.note = (f"{what}: not in the {_size(found.scanned)} {way}; gave up there "
                         f"(press {key} to go on)")
            return found.resume
        elif found.gave_up:
            self.note = f"{what}: not found; the index is full, nothing further {way} is read"
        else:
            self.note = f"{what}: not found {way} ({_size(found.scanned)} read)"
        return None

    @work(group="log-search", exclusive=True, exit_on_error=False)
    async def action_event(self, forward: bool) -> None:
        """Jump to the next (`]`) or previous (`[`) line the classifier names a failure on."""
        reader = self.reader
        if reader is None:
            return
        origin = self.event_resume[forward]
        if origin is None:
            origin = self.cursor
        try:
            found = await reader.event(self.cockpit.rulebook, origin, forward)
        except TRANSFER_ERRORS as exc:
            self.error = f"read failed: {type(exc).__name__}: {exc}"
            self.show_status()
            return
        self._sync()
        what = "a classified line"
        if found.finding is not None:
            what = f"{found.finding.rule.id} [{found.finding.rule.klass}]"
        self.event_resume = {True: None, False: None}
        self.event_resume[forward] = self._report(found, what, forward, "]" if forward else "[")
        await self._show_lines()
