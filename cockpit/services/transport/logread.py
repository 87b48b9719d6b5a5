"""Reading a log on a box by byte ranges: the log view's model (the Toolong way, over SFTP).

A run log on a rented box can be gigabytes. The log view never loads one: it keeps the byte
offsets of line starts, found lazily *backward from the end* one page at a time, and reads
only the pages of the lines it shows (through a small page cache). Opening a 2 GB log reads a
page or two; scrolling up reads the pages above; following reads only the bytes appended since
the last look. Reads go over the box's connection as SFTP `read(size, offset)` requests (the
`Box` of `remote.py`, with its per-request deadlines): no shell is involved, so a path is
never quoted or interpreted, only passed to the SFTP server as a name.

Everything from the box is bounded here by named constants: a page, the longest line looked
back through for its start, the bytes shown of one line, the lines indexed, the bytes one
search or one event jump reads before it gives up (and says so), the growth read at once
while following. Text is returned as bytes; the view makes it visible (controls shown) and
never parses it as markup.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from array import array
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cockpit.models.classify import Finding, classify_bytes
from cockpit.models.rules import Rulebook
from cockpit.services.transport.remote import (
    SFTP_REQUEST_TIMEOUT,
    Box,
    LocalBox,
    RemoteFile,
    TimedFile,
    _answered,
)

PAGE = 64 << 10
"""Bytes of one read. One SFTP round trip (asyncssh pipelines it as a few requests), about a
thousand lines of a training log: a screen of lines nearly always lies in one or two pages,
and a 2 GB log opens with one read."""
CACHE_PAGES = 64
"""Pages kept (4 MiB): a few screens up and down plus the pages a search just read, so moving
the cursor or redrawing never reads again."""
MAX_LINE_BYTES = 1 << 20
"""Bytes looked back through for the start of one line. A line longer than this (a 10 MB
tqdm line written with `\\r` only) is shown as fragments of this size, each marked as cut,
instead of being read whole to find where it began."""
ROW_BYTES = 2048
"""Bytes of one line read for its row on screen: wider than any terminal; the rest of a long
line is counted and marked as cut, and the detail pane shows more."""
DETAIL_BYTES = 256 << 10
"""Bytes of one line read for the detail pane (a few thousand screen lines when wrapped): a
whole traceback line or a long JSON record; beyond it the pane says how much is left."""
MAX_INDEX_LINES = 2_000_000
"""Line starts kept (16 MB of offsets in two arrays). Scrolling above the two-millionth line
from the end stops there and says so; the file itself is never the limit."""
SEARCH_BYTES = 64 << 20
"""Bytes one search reads before it gives up and says where it stopped (a few seconds at the
~20 MB/s an SFTP link to a rented box gives); pressing `n` again goes on from there."""
EVENT_BYTES = 16 << 20
"""Bytes one jump to the next classified event reads before it gives up (the classifier's
RE2 scan is fast; the read is what costs)."""
EVENT_CHUNK = 1 << 20
"""Bytes of whole lines classified at once during an event jump."""
FOLLOW_MAX_GROWTH = 16 << 20
"""Bytes appended between two looks that are indexed line by line while following. A log
that grew more (a flood, or the view was left for hours) is reopened at its new end instead,
and the view says how much it skipped."""


class LogFile(Protocol):
    """An open log: reads at offsets and its current size."""

    async def read(self, size: int, offset: int) -> bytes: ...

    async def size(self) -> int: ...

    async def close(self) -> None: ...


class _LocalLog:
    """A log on this machine (`host: local`): pread and fstat on one descriptor."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(os.path.expanduser(path), os.O_RDONLY)

    async def read(self, size: int, offset: int) -> bytes:
        return os.pread(self.fd, size, offset)

    async def size(self) -> int:
        return os.fstat(self.fd).st_size

    async def close(self) -> None:
        os.close(self.fd)


class _SftpLog:
    """A log over SFTP: the box's timed handle, its size from an fstat request (also timed)."""

    def __init__(self, handle: TimedFile) -> None:
        self.handle = handle

    async def read(self, size: int, offset: int) -> bytes:
        return await self.handle.read(size, offset)

    async def size(self) -> int:
        attrs = await _answered(self.handle.handle.stat(), self.handle.timeout,
                                f"stat of {self.handle.path}")
        return int(attrs.size or 0)

    async def close(self) -> None:
        await self.handle.close()


class _ProbedLog:
    """Any other `RemoteFile` (a box without stat): its size found by one-byte reads, doubling
    then halving (about 2 log2(size) tiny reads; only boxes made for tests take this path)."""

    def __init__(self, handle: RemoteFile) -> None:
        self.handle = handle

    async def read(self, size: int, offset: int) -> bytes:
        return await self.handle.read(size, offset)

    async def size(self) -> int:
        low, high = 0, 1
        while await self.handle.read(1, high - 1):
            low, high = high, high * 2
        while high - low > 1:  # a byte exists at low-1 (or low is 0); none at high-1
            mid = (low + high) // 2
            if await self.handle.read(1, mid - 1):
                low = mid
            else:
                high = mid
        return low

    async def close(self) -> None:
        await self.handle.close()


async def open_log_file(box: Box, path: str) -> LogFile:
    """Open `path` on `box` for offset reads (SFTP `open`; no shell, no quoting)."""
    if isinstance(box, LocalBox):
        return _LocalLog(path)
    handle = await box.open(path)
    if isinstance(handle, TimedFile):
        return _SftpLog(handle)
    return _ProbedLog(handle)


@dataclass(frozen=True)
class Line:
    """One line as read for display: its first bytes, and what was left out."""

    index: int
    """Position in the index (0 = the first line found so far; shifts as lines are found above)."""
    start: int
    """Byte offset of the line in the file."""
    data: bytes
    """The bytes read (at most the limit asked for), without the line end."""
    length: int
    """Bytes of the whole line, without the line end."""
    fragment: bool = False
    """The line began more than MAX_LINE_BYTES before: this is its last part, not its start."""

    @property
    def cut(self) -> int:
        """Bytes of the line not read."""
        return self.length - len(self.data)


@dataclass(frozen=True)
class Found:
    """The outcome of a search or an event jump."""

    line: int | None
    """The index of the line found, or None."""
    scanned: int
    """Bytes read for it."""
    gave_up: bool = False
    """It stopped at its bound (SEARCH_BYTES / EVENT_BYTES) before the end of the file."""
    resume: int | None = None
    """Where a further search in the same direction would go on (a line index)."""
    finding: Finding | None = None
    """For an event jump: what the classifier found on that line."""


class LogReader:
    """One log on a box, read by byte ranges with a line index built backward from the end.

    Line `i` of the index spans `[start(i), start(i+1))` (the last line ends at `end`); the
    first lines are found by `extend_up`, which shifts every index by the lines it adds (it
    returns that count so a view can keep its place). All index changes happen under one
    lock and only after their read completed, so a cancelled search leaves it consistent.
    """

    def __init__(self, file: LogFile, path: str) -> None:
        self.file = file
        self.path = path
        self.bytes_read = 0
        """Bytes read from the box so far (the test counts them: opening must read little)."""
        self.reads = 0
        self.skipped = 0
        """Bytes the index jumped over while following (growth above FOLLOW_MAX_GROWTH)."""
        self._pages: OrderedDict[int, bytes] = OrderedDict()
        self._lock = asyncio.Lock()
        self.above = 0
        """Lines ever added above the first indexed one: a view adds the change in this
        across a call to its own line numbers (every index shifts by it)."""
        self.generation = 0
        """Bumped when the index starts over (truncated, replaced, or skipped ahead): a
        view's line numbers from before mean nothing then."""
        self._reset(0)

    # -- the index ----------------------------------------------------------------------------
    def _reset(self, size: int) -> None:
        self.generation += 1
        self.end = size
        """The file size the index reaches."""
        self.scanned = size
        """Bytes `[scanned, end)` have been looked through for line starts."""
        self._back = array("q")  # starts found by extend_up, nearest first (descending)
        self._fwd = array("q")  # starts found while following (ascending, all above _back's)
        self._cut: set[int] = set()  # starts made at MAX_LINE_BYTES, not after a newline
        self._pending = size == 0  # a line starts at `end` once bytes arrive there
        self.full = False
        """MAX_INDEX_LINES reached: no earlier lines will be found."""

    def __len__(self) -> int:
        return len(self._back) + len(self._fwd)

    def start(self, i: int) -> int:
        """Byte offset of line `i`."""
        back = len(self._back)
        return self._back[back - 1 - i] if i < back else self._fwd[i - back]

    def stop(self, i: int) -> int:
        """Byte offset just past line `i` (its newline included)."""
        return self.start(i + 1) if i + 1 < len(self) else self.end

    @property
    def complete(self) -> bool:
        """Every line from the file's first byte is indexed (line numbers are exact)."""
        return self.scanned == 0

    def number(self, i: int) -> int | None:
        """The 1-based line number of line `i` in the file, when the index reaches the top."""
        return i + 1 if self.complete else None

    def line_at(self, offset: int) -> int | None:
        """The line holding byte `offset`, or None when it lies above the indexed lines."""
        n = len(self)
        if n == 0 or offset < self.start(0):
            return None
        low, high = 0, n - 1
        while low < high:
            mid = (low + high + 1) // 2
            if self.start(mid) <= offset:
                low = mid
            else:
                high = mid - 1
        return low

    # -- reads --------------------------------------------------------------------------------
    async def _page(self, number: int) -> bytes:
        page = self._pages.get(number)
        if page is not None:
            self._pages.move_to_end(number)
            return page
        page = await self.file.read(PAGE, number * PAGE)
        self.bytes_read += len(page)
        self.reads += 1
        # A short last page is cached too; `grow` drops it before reading what was appended.
        self._pages[number] = page
        if len(self._pages) > CACHE_PAGES:
            self._pages.popitem(last=False)
        return page

    async def read_range(self, start: int, stop: int) -> bytes:
        """Bytes `[start, stop)` through the page cache (fewer at the end of the file)."""
        if stop <= start:
            return b""
        parts = []
        for number in range(start // PAGE, (stop - 1) // PAGE + 1):
            page = await self._page(number)
            base = number * PAGE
            parts.append(page[max(0, start - base): stop - base])
            if len(page) < PAGE:
                break
        return b"".join(parts)

    # -- opening, growing, extending -------------------------------------------------------------
    async def open(self, lines: int) -> None:
        """Index the last `lines` lines (or the whole file when it is shorter)."""
        async with self._lock:
            self._reset(await self.file.size())
            self._pages.clear()
            await self._extend(lines)

    async def extend_up(self, lines: int) -> int:
        """Find at least `lines` more lines above the first indexed one (whole pages at a
        time) unless the top comes first; returns how many were added (every index shifts by
        that much). 0 at the top of the file or of the index."""
        async with self._lock:
            return await self._extend(lines)

    async def _extend(self, lines: int) -> int:
        before = len(self)
        while len(self) - before < lines and self.scanned > 0 and not self.full:
            await self._extend_page()
        return len(self) - before

    async def _extend_page(self) -> None:
        """Look through one page above `scanned` for line starts (the read first, then the
        index changes, so a cancellation in the read changes nothing)."""
        low = ((self.scanned - 1) // PAGE) * PAGE
        data = await self.read_range(low, self.scanned)
        back = self._back
        first = self.start(0) if len(self) else self.end
        position = len(data)
        while True:
            newline = data.rfind(b"\n", 0, position)
            if newline < 0:
                break
            position = newline
            begins = low + newline + 1
            if begins >= self.end:
                self._pending = True  # the file ends with a newline: no line there yet
                continue
            if begins == first:  # a start made at MAX_LINE_BYTES turned out real
                self._cut.discard(begins)
                continue
            back.append(begins)
            self.above += 1
            first = begins
            if len(self) >= MAX_INDEX_LINES:
                self.full = True
                self.scanned = begins
                return
        self.scanned = low
        if low == 0 and self.end > 0 and first != 0:
            back.append(0)
            self.above += 1
        elif low > 0 and first - low >= MAX_LINE_BYTES:
            back.append(low)  # a line too long to look back through: shown as a fragment
            self.above += 1
            self._cut.add(low)

    async def grow(self) -> str:
        """Look at the file's size again and index what was appended. Returns "" when the
        index simply grew (or nothing changed), else a sentence: the file was truncated or
        replaced (reindexed from its new end), or it grew by more than FOLLOW_MAX_GROWTH
        (reindexed from its new end, the gap counted in `skipped`)."""
        async with self._lock:
            size = await self.file.size()
            if size == self.end:
                return ""
            if size < self.end:
                self._reset(size)
                self._pages.clear()
                await self._extend(1)
                return "the log was truncated or replaced: reopened at its end"
            if size - self.end > FOLLOW_MAX_GROWTH:
                gap = size - self.end
                self.skipped += gap
                self._reset(size)
                self._pages.clear()
                await self._extend(1)
                return f"the log grew by {gap >> 20} MiB at once: reopened at its new end"
            # The cached short last page is stale; full pages never change in an append-only log.
            self._pages.pop(self.end // PAGE, None)
            data = await self.read_range(self.end, size)
            if len(data) < size - self.end:
                size = self.end + len(data)
            old = self.end
            if self._pending:
                self._fwd.append(old)
                self._pending = False
            position = 0
            while True:
                newline = data.find(b"\n", position)
                if newline < 0:
                    break
                begins = old + newline + 1
                if begins < size:
                    self._fwd.append(begins)
                else:
                    self._pending = True
                position = newline + 1
            self.end = size
            return ""

    # -- lines ------------------------------------------------------------------------------------
    async def line(self, i: int, limit: int = ROW_BYTES) -> Line:
        """Line `i`: its first `limit` bytes, without the line end."""
        start, stop = self.start(i), self.stop(i)
        length = stop - start
        tail = await self.read_range(max(start, stop - 2), stop) if length else b""
        if tail.endswith(b"\r\n"):
            length -= 2
        elif tail.endswith(b"\n"):
            length -= 1
        data = await self.read_range(start, start + min(length, limit))
        return Line(i, start, data, length, start in self._cut)

    async def lines(self, first: int, count: int, limit: int = ROW_BYTES) -> list[Line]:
        """Lines `first` .. `first + count - 1` that exist."""
        async with self._lock:
            last = min(len(self), first + count)
            return [await self.line(i, limit) for i in range(max(0, first), last)]

    async def whole(self, i: int) -> Line:
        """Line `i` for the detail pane (up to DETAIL_BYTES)."""
        async with self._lock:
            return await self.line(i, DETAIL_BYTES)

    # -- search -----------------------------------------------------------------------------------
    async def search(self, needle: str, origin: int, forward: bool, *,
                     budget: int = SEARCH_BYTES,
                     progress: Callable[[int], None] | None = None) -> Found:
        """The nearest line after (or before) line `origin` holding `needle`, ignoring ASCII
        case. Reads at most `budget` bytes, then gives up and says where to go on. Backward
        searches find lines above the index too (extending it as they go)."""
        key = needle.encode("utf-8", "surrogateescape").lower()
        if not key or b"\n" in key:
            return Found(None, 0)
        overlap = len(key) - 1
        scanned = 0
        async with self._lock:
            if forward:
                if origin + 1 >= len(self):
                    return Found(None, 0)
                position = self.start(origin + 1)
                while position < self.end:
                    if scanned >= budget:
                        resume = self.line_at(position)
                        return Found(None, scanned, True, None if resume is None else resume - 1)
                    stop = min(self.end, position + PAGE)
                    chunk = await self.read_range(position, min(self.end, stop + overlap))
                    scanned += stop - position
                    hit = chunk.lower().find(key)
                    if hit >= 0:
                        return Found(self.line_at(position + hit), scanned)
                    position = stop
                    if progress is not None:
                        progress(scanned)
                return Found(None, scanned)
            if origin <= 0 and self.scanned == 0:
                return Found(None, 0)
            limit = self.start(origin) if 0 < origin < len(self) else (
                self.end if origin >= len(self) else self.start(0))
            while True:
                low = max(0, limit - PAGE)
                if low < self.scanned and not self.full:
                    while self.scanned > low and not self.full:
                        await self._extend_page()
                if low < self.scanned:  # the index is full: nothing above it can be shown
                    low = self.scanned
                if low >= limit:
                    return Found(None, scanned, self.full)
                chunk = await self.read_range(low, min(self.end, limit + overlap))
                scanned += limit - low
                hit = chunk.lower().rfind(key, 0, limit - low + overlap)
                if hit >= 0:
                    line = await self._resolve(low + hit)
                    return Found(line, scanned, line is None)
                limit = low
                if progress is not None:
                    progress(scanned)
                if limit <= 0:
                    return Found(None, scanned)
                if scanned >= budget:
                    # Past the line holding `limit`, so its part below `limit` is searched again.
                    resume = self.line_at(limit)
                    return Found(None, scanned, True, 0 if resume is None else resume + 1)

    async def _resolve(self, offset: int) -> int | None:
        """The line holding `offset`, finding lines above until it is indexed (None only
        when the index is full first)."""
        while (line := self.line_at(offset)) is None and self.scanned > 0 and not self.full:
            await self._extend_page()
        return line

    async def event(self, rulebook: Rulebook, origin: int, forward: bool, *,
                    budget: int = EVENT_BYTES) -> Found:
        """The nearest line after (or before) line `origin` that the classifier names a
        failure on (the same `LogClassifier` the failure log uses, run on whole lines in
        chunks of EVENT_CHUNK bytes). Reads at most `budget` bytes."""
        scanned = 0
        async with self._lock:
            if forward:
                first = origin + 1
                while first < len(self):
                    if scanned >= budget:
                        return Found(None, scanned, True, first - 1)
                    last = first
                    while last + 1 < len(self) and self.stop(last + 1) - self.start(first) <= EVENT_CHUNK:
                        last += 1
                    found, read = await self._classify(rulebook, first, last)
                    scanned += read
                    after = [f for f in found if f[0] > origin]
                    if after:
                        line, finding = min(after, key=lambda f: f[0])
                        return Found(line, scanned, finding=finding)
                    first = last + 1
                return Found(None, scanned)
            last = min(origin, len(self)) - 1
            while True:
                if last < 0:
                    if self.scanned == 0 or self.full:
                        return Found(None, scanned, self.full)
                    added = await self._extend(256)
                    origin += added
                    last += added
                    if added == 0:
                        return Found(None, scanned)
                if scanned >= budget:
                    return Found(None, scanned, True, last + 1)
                first = last
                while first > 0 and self.stop(last) - self.start(first - 1) <= EVENT_CHUNK:
                    first -= 1
                found, read = await self._classify(rulebook, first, last)
                scanned += read
                before = [f for f in found if f[0] < origin]
                if before:
                    line, finding = max(before, key=lambda f: f[0])
                    return Found(line, scanned, finding=finding)
                last = first - 1

    async def _classify(self, rulebook: Rulebook, first: int,
                        last: int) -> tuple[list[tuple[int, Finding]], int]:
        """Findings on lines `first..last` (a single line longer than EVENT_CHUNK is read only
        up to it), each with its line index."""
        start = self.start(first)
        stop = min(self.stop(last), start + EVENT_CHUNK)
        data = await self.read_range(start, stop)
        found = []
        for finding in classify_bytes(rulebook, [data]):
            line = first + finding.line_no - 1
            if first <= line <= last:
                found.append((line, finding))
        return found, len(data)

    async def close(self) -> None:
        """Close the file (bounded: a wedged server may not answer)."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(SFTP_REQUEST_TIMEOUT):
                await self.file.close()


async def open_log(box: Box, path: str, lines: int = 200) -> LogReader:
    """Open `path` on `box` and index its last `lines` lines (a few pages at most)."""
    file = await open_log_file(box, path)
    reader = LogReader(file, path)
    try:
        await reader.open(lines)
    except BaseException:
        await reader.close()
        raise
    return reader
