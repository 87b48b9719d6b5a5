"""The incremental log classifier: bytes of one log in, classified findings out.

One `LogClassifier` follows one log. It is fed only the bytes read since the last tick and
keeps just the unfinished last line (capped) and an open traceback between feeds, so the cost
of a tick scales with the new bytes, never with the file.

How a log is read (issue 4, platform-facts §3):
- One RE2 automaton (`Rulebook.scanner`) searches the new bytes for any signature or a
  traceback header; only a line it hits is tested rule by rule. A clean log costs one pass.
- A Python traceback is one finding, named by its final exception line (the most specific
  rule along an exception chain wins) with the deepest frame in user code; the lines inside
  it are not scanned on their own.
- A traceback pasted without its header starts at its first `File "...", line N` frame (it
  counts only if it ends in an exception line); rich's boxed traceback is named by the line
  below its box; text before a header on its line (a tqdm bar, an echoed `^C`) is judged.
- One verdict per log (`classify_excerpt`, issue 17): the primary cause in evidence order
  (`primary_cause`: the rule's tier, then the earliest line), or None for a clean log.
- Lines are bytes split at `\\n`: CRLF is normalised, a `\\r` progress bar is cut to the
  segment that matched, non-UTF-8 bytes are kept and shown replaced, and a line of any
  length is scanned as it arrives but never buffered beyond `MAX_CARRY`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from cockpit.models.rules import LEVEL_TAG, LINE_STAMP, PROCESS_TAGS, Rule, Rulebook

MAX_CARRY = 65536
"""Bytes of an unfinished line kept for the next feed (a 10 MB line is not buffered)."""
MAX_TB_LINES = 400
"""Lines of one traceback kept for `context` rules; deeper ones only update the frame."""
MAX_STRAYS = 16
"""Interleaved lines kept from one headless traceback (`_Traceback.strays`): enough for a
compiler's or linker's few error lines, bounded so a hostile log cannot grow the state."""
EXCERPT = 240

_HEADER = b"Traceback (most recent call last):"
_FRAME_RE = re.compile(rb'^\s*(?:> )?File "(?P<path>[^"]*)", line (?P<line>\d+), in (?P<fn>.*)$')
"""A frame line; loguru marks the failing frame with `> `."""
_STAMP_RE = re.compile(b"^" + LINE_STAMP.encode())
"""`rules.LINE_STAMP` at a line's start: it differs line by line, so it cannot be stripped as
one fixed prefix."""
_RICH_HEADER_RE = re.compile(rb"^\s*\xe2\x95\xad\S* Traceback \(most recent call last\) ")
"""rich's traceback box top: `╭───── Traceback (most recent call last) ─────╮`."""
_BOX = ("│".encode(), "╰".encode(), "╭".encode())
_HEADLESS_EXC_RE = re.compile(
    rb"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Iteration)(?::|$)")
"""What ends a traceback that had no header: only a line that names an exception type (frames
without a header can also be a logger's stack dump, followed by an ordinary log line)."""
_RERAISE_RE = re.compile(rb"^[A-Za-z_][\w.]*(?:Error|Exception):\s*['\"]?$")
"""What precedes the header when an old DataLoader (torch < 1.0) re-raises a worker's error:
`IndexError: Traceback (most recent call last):`, the worker's frames and message below it;
a `KeyError` shows the repr of that text, all on one line: `KeyError: 'Traceback (...\\n...'`."""
_LIBRARY_RE = re.compile(rb"site-packages|dist-packages|/lib/python\d|^<|/torch/|/_bootstrap")
_IGNORED = b"Exception ignored "
"""CPython's line above a traceback it printed and then ignored (`Exception ignored in:
<function _MultiProcessingDataLoaderIter.__del__ ...>`, from 3.14 `Exception ignored while
calling deallocator ...`): an exception in a finaliser or at interpreter exit, which cannot
end the run."""
PREV_LINE = 256
"""Bytes kept from the head of the line above a traceback header, to see whether it was
`Exception ignored in:` (the marker sits at the line's start, after any rank or time prefix)."""
_CTRL_C = b"^C"
"""How a terminal echoes Ctrl-C; a traceback header glued behind it was raised by the key."""
_LEVEL_TAG_RE = re.compile(LEVEL_TAG.encode())
_SGR_RE = re.compile(rb"\x1b\[[0-9;]{0,32}m")
"""A colour (SGR) sequence that a program writing to a terminal, or forced to colour its
output, puts around its words: formatting, not content, so it is read past. Any other control
sequence (a clear-screen, a cursor move) is left in the text, where the screens show it visible
as the odd content it is. A sequence cut by a feed stays in the unfinished line and is stripped
when the line completes."""
CATCH_ALL = "PY"
"""The rule that names any traceback's exception line no specific rule knows: it says no
more than "the program raised", so a specific event of its tier outranks it."""
_RAISE_RE = re.compile(rb"""^\s*raise\s+(?P<type>[A-Za-z_][\w.]*)\((?:[rfbu]{0,2}["'])?(?P<message>.*)""")
"""A code line that raises an exception, with the start of its message (a literal's text)."""
_NAMED_RE = re.compile(rb"^[A-Za-z_][\w.]*:(?:\s|$)")
"""An exception line's `Name: message` shape (`torch._dynamo.exc.Unsupported: ...`), which a
code line that lost its indent rarely has."""
_CHAIN = (b"During handling of the above exception", b"The above exception was the direct cause")
_ORIGINAL = b"Original Traceback"
_NCCL_DETAIL_RE = re.compile(rb"^(?:nccl[A-Z]\w*: |Last error:)")
"""The lines torch prints under an NCCL error (`ncclInternalError: Internal check failed.`,
`Last error:` and NCCL's own sentence on the next line): the error's message, which is where
its cause is named (`Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000`)."""
_EXC_TYPE_RE = re.compile(rb"^(?P<type>[A-Za-z_][\w.]*)(?::|$)")
_TAGS = PROCESS_TAGS.encode()
_TAGS_RE = re.compile(_TAGS)
"""A process's tags before its lines (`rules.PROCESS_TAGS`). A traceback behind tags reads
every tagged line as its own: the processes die of the same error and their output
interleaves."""


@dataclass(frozen=True)
class Finding:
    """One classified failure in one log."""

    rule: Rule
    line_no: int
    """1-based line of the evidence (a traceback's exception line) since the log's start."""
    excerpt: str
    frame: str = ""
    """The deepest frame in user code, `train.py:57 in train_step`, for tracebacks."""
    exception: str = ""
    """The exception type of a traceback (`KeyError`)."""

    @property
    def key(self) -> str:
        """What makes two findings 'the same event': the rule, and for a rule that only
        names a traceback (the generic exception rule) the exception type too."""
        if self.rule.spec.scope == "traceback" and self.exception:
            return f"{self.rule.id}:{self.exception}"
        return self.rule.id


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").strip()[:EXCERPT]


def _segment(line: bytes, start: int, end: int) -> tuple[bytes, int]:
    """The `\r`-separated state of a progress-bar line that holds the match, and where the
    match starts in it (a tqdm line is many states of one line: judge the one that matched)."""
    seg_start = line.rfind(b"\r", 0, start) + 1
    seg_end = line.find(b"\r", end)
    return line[seg_start: seg_end if seg_end >= 0 else len(line)], start - seg_start


def _excerpt(segment: bytes, at: int) -> str:
    """The segment, or for a very long one the part around the match."""
    if len(segment) <= EXCERPT:
        return _text(segment)
    lead = max(0, at - EXCERPT // 3)
    return _text(segment[lead: lead + EXCERPT])


def _traceback_like(line: bytes) -> bool:
    """Whether another process's line can belong to the traceback being read: a frame, its
    indented code, an exception line or a chain sentence (not that process's ordinary log)."""
    return (line[:1] in (b" ", b"\t") or _FRAME_RE.match(line) is not None
            or _HEADLESS_EXC_RE.match(line) is not None or line.startswith(_CHAIN)
            or _HEADER in line)


@dataclass
class _Traceback:
    """A traceback being read line by line (possibly across feeds)."""

    prefix: bytes
    """What preceded `Traceback` on the header line (`[rank0]: `), stripped from each line."""
    tagged: bool = False
    """The prefix is a process's tags (`_TAGS`): other processes' tags also lead into it."""
    lines: list[bytes] = field(default_factory=list)
    exceptions: list[tuple[int, list[bytes]]] = field(default_factory=list)
    """(line number, [exception line, continuation lines...]) along the chain."""
    user_frame: str = ""
    after_exception: bool = False
    stamped: bool = False
    """Every line starts with its own timestamp (stripped before reading it)."""
    headless: bool = False
    """Started at a frame, its header missing (a pasted excerpt)."""
    boxed: bool = False
    """rich's boxed traceback: lines drawn in the box are frames, not exception lines."""
    after_frame: bool = False
    """The previous line was a frame (the next is its code line)."""
    foreign: int = 0
    ignored: bool = False
    """CPython printed it under `Exception ignored in:`: only a rule that names the exception
    itself (disk full, a signal) counts, not one that only says "a traceback ended here"."""
    interrupted: bool = False
    """Its header follows the terminal's `^C` on one line: the traceback is what Ctrl-C
    raised wherever the program was waiting (a KeyboardInterrupt, or a library's own error
    about the interrupted wait). As with `ignored`, only a rule that names the exception itself
    counts; the `^C` before the header is judged as the interrupt."""
    chained: bool = False
    open_message: bool = False
    last_frame: bytes = b""
    """The innermost frame read so far (its `File "..."` line) and `last_code`, the source
    line under it: where the program was if the log ends before the exception line."""
    last_code: bytes = b""
    strays: list[tuple[int, bytes]] = field(default_factory=list)
    """Unindented lines between a headless traceback's frames that name no exception: another
    stream's lines interleaved (a linker's `cannot find -lcuda` on stderr) or a code line that
    lost its indent. Judged as log lines only if the traceback is cut off before its exception
    line (at most `MAX_STRAYS` kept)."""


class LogClassifier:
    """Classifies one log incrementally. Feed bytes; get findings."""

    def __init__(self, rulebook: Rulebook) -> None:
        self.rulebook = rulebook
        self.reset()

    def reset(self) -> None:
        """Forget everything (the log was truncated or replaced)."""
        self._carry = b""
        self._carry_hits: set[str] = set()
        self._line_no = 0  # complete lines consumed
        self._tb: _Traceback | None = None
        self._prev_tail = b""
        self.bytes_seen = 0

    @property
    def carried_bytes(self) -> int:
        """Bytes of the unfinished last line held for the next feed (at most MAX_CARRY)."""
        return len(self._carry)

    # -- input ------------------------------------------------------------------------
    def feed(self, data: bytes, reset: bool = False) -> list[Finding]:
        """Classify `data`, the bytes appended to the log since the last feed."""
        if reset:
            self.reset()
        self.bytes_seen += len(data)
        return self._feed(data)

    def _feed(self, data: bytes) -> list[Finding]:
        carried = bool(self._carry)
        buf = self._carry + data if carried else data
        if b"\r\n" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        if b"\x1b" in buf:
            buf = _SGR_RE.sub(b"", buf)  # colours: `\x1b[31mKeyError\x1b[0m: 'x'` reads as printed
        end = buf.rfind(b"\n") + 1  # [0, end) are complete lines
        out: list[Finding] = []
        self._complete(buf, end, carried, out)
        self._partial(buf, end, out)
        return out

    def flush(self) -> list[Finding]:
        """Close a traceback whose exception line has arrived (live mode: the process may
        have exited, so no later line will close it). An open chain stays open."""
        out: list[Finding] = []
        if self._tb is not None and self._tb.after_exception:
            self._close_traceback(out)
        return out

    def finish(self) -> list[Finding]:
        """End of input: close any traceback and classify an unterminated last line."""
        out = self.flush()
        if self._carry:
            out += self._feed(b"\n")  # complete the last line; its reported hits stay quiet
        if self._tb is not None:
            self._close_traceback(out, at_end=True)
        return out

    # -- complete lines ---------------------------------------------------------------
    def _complete(self, buf: bytes, end: int, carried: bool, out: list[Finding]) -> None:
        pos = 0
        counted = 0  # buf[:counted] has been added to self._line_no
        scanner = self.rulebook.scanner
        while pos < end:
            if self._tb is not None:
                self._line_no += buf.count(b"\n", counted, pos)
                counted = pos
                pos = self._traceback_lines(buf, pos, end, out)
                counted = pos
                continue
            match = scanner.search(buf, pos, end)
            if match is None:
                break
            start = buf.rfind(b"\n", pos, match.start()) + 1 or pos
            stop = buf.find(b"\n", match.start(), end)
            if stop < 0:  # cannot happen: [pos, end) ends with a newline
                break
            self._line_no += buf.count(b"\n", counted, start)
            counted = start
            line = buf[start:stop]
            header = line.find(_HEADER)
            if header >= 0:
                # What precedes the header on its line is a line of its own that lost its
                # newline (a tqdm bar, `^C` echoed by the terminal): judge it as one.
                self._prefix_finding(line[:header], out)
                prefix = line[:header]
                # A line stamp differs line by line: stripped from each line before the rest
                # of the prefix (`[2025-03-07 02:53:29] [INFO] `) is matched as fixed.
                stamp = _STAMP_RE.match(prefix)
                stamped = stamp is not None
                if stamp is not None:
                    prefix = prefix[stamp.end():]
                self._tb = _Traceback(prefix=prefix, stamped=stamped,
                                      tagged=_TAGS_RE.fullmatch(prefix) is not None,
                                      ignored=_IGNORED in self._line_before(buf, start),
                                      interrupted=_CTRL_C in prefix)
                self._line_no += 1
                counted = pos = stop + 1
                continue
            if _RICH_HEADER_RE.match(line):
                # rich's boxed traceback: frames inside the box, the exception line below it.
                self._tb = _Traceback(prefix=b"", boxed=True)
                self._line_no += 1
                counted = pos = stop + 1
                continue
            stamp = _STAMP_RE.match(line)
            lead = stamp.end() if stamp is not None else 0
            level = _LEVEL_TAG_RE.match(line, lead)
            tags = _TAGS_RE.match(line, level.end() if level is not None else lead)
            behind = tags.end() if tags is not None else level.end() if level is not None else lead
            if _FRAME_RE.match(line[behind:]):
                # CPython indents a frame by two spaces: more is the decoration's own (a
                # logger's `[ERROR]  `, a quoted paste), which the exception line carries too.
                indent = len(line) - behind - len(line[behind:].lstrip(b" "))
                behind += max(0, indent - 2)
                # A frame without a header: the traceback starts here (behind a line stamp, a
                # logger's level tag or a process's tags, which its other lines carry too).
                self._tb = _Traceback(prefix=line[lead:behind], stamped=stamp is not None,
                                      tagged=tags is not None, headless=True)
                counted = pos = start
                continue
            # The carried line was scanned while unfinished: what it reported stays reported.
            quiet = self._carry_hits if carried and start == 0 else set()
            self._line_finding(line, match.start() - start, match.end() - start, quiet, out)
            pos = stop + 1
        self._line_no += buf.count(b"\n", counted, end)
        if end:
            self._carry_hits = set()  # the carried line, if any, is complete now
            self._prev_tail = _line_above(buf, end)

    def _line_before(self, buf: bytes, start: int) -> bytes:
        """The head of the complete line before the one starting at `start` (from the last
        feed if `start` is this buffer's first line)."""
        return self._prev_tail if start == 0 else _line_above(buf, start)

    def _prefix_finding(self, prefix: bytes, out: list[Finding]) -> None:
        match = self.rulebook.scanner.search(prefix) if prefix.strip() else None
        if match is not None:
            self._line_finding(prefix, match.start(), match.end(), set(), out)

    def _relined(self, line: bytes, line_no: int) -> list[Finding]:
        """`line` (1-based line `line_no`) judged as an ordinary log line."""
        match = self.rulebook.scanner.search(line)
        if match is None:
            return []
        segment, at = _segment(line, match.start(), match.end())
        rule = self.rulebook.match_line(segment)
        return [] if rule is None else [Finding(rule, line_no, _excerpt(segment, at))]

    def _line_finding(self, line: bytes, m_start: int, m_end: int, quiet: set[str],
                      out: list[Finding]) -> None:
        segment, at = _segment(line, m_start, m_end)
        rule = self.rulebook.match_line(segment)
        if rule is None or rule.id in quiet:
            return
        out.append(Finding(rule, self._line_no + 1, _excerpt(segment, at)))

    # -- the unfinished last line -----------------------------------------------------
    def _partial(self, buf: bytes, end: int, out: list[Finding]) -> None:
        tail = buf[end:]
        if len(tail) > MAX_CARRY and self._tb is None:
            # A line longer than the carry (a 10 MB line, a progress bar without newlines) is
            # judged as it streams, before its head is dropped. A rule reported here is not
            # reported again when the rest of the line arrives. A short unfinished line just
            # waits for its newline (or finish()), so its excerpt is whole.
            for match in self.rulebook.scanner.finditer(tail):
                segment, at = _segment(tail, match.start(), match.end())
                rule = self.rulebook.match_line(segment)
                if rule is not None and rule.id not in self._carry_hits:
                    self._carry_hits.add(rule.id)
                    out.append(Finding(rule, self._line_no + 1, _excerpt(segment, at)))
        self._carry = tail[-MAX_CARRY:]

    # -- tracebacks -------------------------------------------------------------------
    def _traceback_lines(self, buf: bytes, pos: int, end: int, out: list[Finding]) -> int:
        """Read lines of the open traceback from `pos`; return where normal scanning resumes."""
        tb = self._tb
        assert tb is not None
        while pos < end:
            stop = buf.find(b"\n", pos, end)
            raw = buf[pos:stop]
            line = raw.rstrip(b"\r")
            if tb.stamped:
                line = _STAMP_RE.sub(b"", line, count=1)
            if tb.prefix:
                if line.startswith(tb.prefix):
                    line = line[len(tb.prefix):]
                elif tb.tagged and (tags := _TAGS_RE.match(line)) is not None \
                        and _traceback_like(line[tags.end():]):
                    line = line[tags.end():]  # another process's line of the same traceback
                elif not tb.lines:
                    tb.prefix = b""  # a one-off decoration of the header (`ERROR:root:`)
                elif line.strip():
                    # Another process's output between this rank's lines: not ours.
                    tb.foreign += 1
                    if tb.foreign > MAX_TB_LINES:
                        self._close_traceback(out)
                        return pos
                    pos = stop + 1
                    self._line_no += 1
                    continue
            if tb.after_exception and not self._continues(tb, line):
                self._close_traceback(out)
                return pos  # this line belongs to the log again
            self._line_no += 1
            pos = stop + 1
            self._traceback_line(tb, line)
        return pos

    @staticmethod
    def _continues(tb: _Traceback, line: bytes) -> bool:
        """Whether `line` still belongs to a traceback whose exception line was read."""
        if not line.strip() or line[:1] in (b" ", b"\t") or tb.open_message:
            return True
        if _NCCL_DETAIL_RE.match(line):
            return True
        # A new header continues the chain only after CPython's chain sentence (or as the
        # `Original Traceback` a DataLoader worker re-raises); right after an exception line
        # it is the next, separate traceback. After the chain sentence an exception may also
        # come bare, without a traceback of its own.
        return (line.startswith(_CHAIN) or tb.chained
                or (line.startswith(_ORIGINAL) and _HEADER in line))

    def _traceback_line(self, tb: _Traceback, line: bytes) -> None:
        if len(tb.lines) < MAX_TB_LINES:
            tb.lines.append(line)
        if tb.after_exception:
            if not line.strip():
                tb.open_message = False
            elif line.startswith(_CHAIN):
                tb.chained = True
            elif _HEADER in line:
                tb.after_exception = tb.chained = False  # the chained traceback follows
            elif tb.chained and line[:1] not in (b" ", b"\t"):
                tb.chained = False  # a bare exception of the chain (no traceback of its own)
                self._exception_line(tb, line)
            elif len(tb.exceptions[-1][1]) < 20:
                tb.exceptions[-1][1].append(line)  # a message continuation
                if _NCCL_DETAIL_RE.match(line):
                    tb.open_message = line.rstrip().endswith(b":")  # `Last error:` + its line
            return
        if tb.boxed and line.lstrip().startswith(_BOX):
            return  # a frame, code or variable line inside rich's box
        frame = _FRAME_RE.match(line)
        after_frame, tb.after_frame = tb.after_frame, frame is not None
        if frame is not None:
            tb.last_frame, tb.last_code = line[:PREV_LINE], b""
        elif after_frame and line.strip():
            tb.last_code = line[:PREV_LINE]
        if frame is not None:
            if not _LIBRARY_RE.search(frame["path"]):
                path = frame["path"].decode(errors="replace").rsplit("/", 1)[-1]
                tb.user_frame = (f"{path}:{frame['line'].decode()} in "
                                 f"{frame['fn'].decode(errors='replace').strip()}")
            return
        header = line.find(_HEADER)
        if header > 0 and _RERAISE_RE.match(line[:header]):
            if line[:header].rstrip().endswith((b"'", b'"')):
                self._exception_line(tb, line)  # the worker's traceback quoted on this line
                return
            # The worker's traceback is this exception's message: its own exception line
            # ends the chain (a specific rule there still wins).
            self._exception_line(tb, line[:header].rstrip())
            tb.chained = True
            return
        if line.strip() and line[:1] not in (b" ", b"\t") and not line.startswith(_CHAIN) \
                and header < 0:
            if tb.headless and after_frame and not _HEADLESS_EXC_RE.match(line):
                # a pasted excerpt that lost the code line's indent, or an interleaved line
                if len(tb.strays) < MAX_STRAYS:
                    tb.strays.append((self._line_no, line))
                return
            if after_frame and not _HEADLESS_EXC_RE.match(line) and not _NAMED_RE.match(line):
                return  # the frame's code line, its indent lost (a GUI re-logging stderr)
            self._exception_line(tb, line)

    def _exception_line(self, tb: _Traceback, line: bytes) -> None:
        tb.exceptions.append((self._line_no, [line]))
        tb.after_exception = True
        # `RuntimeError:` alone: its message follows on the next lines, up to a blank line.
        tb.open_message = line.rstrip().endswith(b":")

    def _raised(self, tb: _Traceback) -> Rule | None:
        """A specific rule for the exception a cut-off traceback's innermost code line raises
        (`raise EmptyDatasetError(f"The directory at {base_path} doesn't contain any data
        files")`), judged as the exception line it would have printed; None for the generic
        one, which says no more than the cut rules."""
        raised = _RAISE_RE.match(tb.last_code)
        if raised is None:
            return None
        line = raised["type"] + b": " + raised["message"].rstrip(b"\"')")
        rule = self.rulebook.match_line(line, traceback=tb.lines)
        return rule if rule is not None and rule.id != CATCH_ALL else None

    def _close_traceback(self, out: list[Finding], at_end: bool = False) -> None:
        tb, self._tb = self._tb, None
        if tb is None:
            return
        if not tb.exceptions:
            # Cut off before its exception line: lines of another stream interleaved between
            # its frames can still name something; failing that, a log that ENDS inside it
            # (`at_end`) is judged by its innermost frame (`Rulebook.match_cut`).
            before = len(out)
            for line_no, line in tb.strays:
                out += self._relined(line, line_no)
            if at_end and len(out) == before and tb.last_frame \
                    and not (tb.ignored or tb.interrupted):
                rule = self._raised(tb) or self.rulebook.match_cut(tb.last_frame, tb.last_code)
                # Frames without a header may be a stack dump (dynamo's graph-break warning,
                # logging's `stack_info`): only where they stop (a network call, an import)
                # names something, never the bare fact that they stop.
                if rule is not None and not (tb.headless and rule.id == "PY-CUT"):
                    out.append(Finding(rule, self._line_no, _text(tb.last_frame.strip()),
                                       tb.user_frame))
            return
        if tb.headless and not _HEADLESS_EXC_RE.match(tb.exceptions[-1][1][0]):
            # Frames that ended in an ordinary line (a stack dump, not a traceback): that line
            # and any interleaved between the frames are judged as lines, like any other.
            for line_no, line in tb.strays:
                out += self._relined(line, line_no)
            out += self._relined(tb.exceptions[-1][1][0], tb.exceptions[-1][0])
            return
        best: tuple[Rule, int, list[bytes]] | None = None
        for line_no, lines in reversed(tb.exceptions):  # the final exception first
            rule = self.rulebook.match_line(b"\n".join(lines), traceback=tb.lines)
            if rule is not None and (best is None or rule.order < best[0].order):
                best = (rule, line_no, lines)
        if best is None or ((tb.ignored or tb.interrupted) and best[0].spec.scope == "traceback"):
            return
        rule, _, _ = best
        final_no, final = tb.exceptions[-1]
        exc = _EXC_TYPE_RE.match(final[0])
        out.append(Finding(rule, final_no, _text(final[0]), tb.user_frame,
                           exc["type"].decode() if exc else ""))


def classify_bytes(rulebook: Rulebook, chunks: Iterable[bytes]) -> list[Finding]:
    """Every finding of a whole log given as chunks (for `cockpit classify` and tests)."""
    classifier = LogClassifier(rulebook)
    out: list[Finding] = []
    for chunk in chunks:
        out += classifier.feed(chunk)
    out += classifier.finish()
    return out


@dataclass(frozen=True)
class Verdict:
    """The primary cause of one log excerpt: the event that names what happened to the run."""

    rule: Rule
    line_no: int | None
    """Line of the evidence, or None when only the exit code named it."""
    excerpt: str
    finding: Finding | None = None
    """The finding it came from (None for an exit code)."""

    @property
    def klass(self) -> str:
        """The cause's class (real-bug, host-oom, ...)."""
        return self.rule.klass


def primary_cause(findings: Sequence[Finding]) -> Finding | None:
    """The finding that names a log's cause, in evidence order (issue 17).

    Scheduler and launcher state and signals come first (a Slurm oom-kill, torchrun's
    `exitcode: -9`, a preemption), then kernel and driver lines (Xid, fallen off the bus, the
    kernel OOM killer), then the program's own text (exceptions, library messages); within a
    tier the earliest event wins, except that a traceback's generic exception (the catch-all
    `PY`) gives way to a specific event of its tier (requests' `ConnectionError: ... Max
    retries exceeded` printed under the socket's bare `ConnectionRefusedError`). Symptoms (an
    NCCL watchdog timeout, the launcher's `ChildFailedError`, a DataLoader worker that died)
    name the log only when nothing else does, because the peer's or the worker's own error is
    the cause."""
    return min(findings, key=lambda f: (f.rule.rank, f.rule.id == CATCH_ALL, f.line_no),
               default=None)


FINAL_LINES = 8
"""How many lines from the end an excerpt's final exception may sit (a launcher's exit notice
or a shell prompt may follow it)."""
_RANK_PREFIX_RE = re.compile(rb"^(?:\[(?:rank|default)\d*\]:\s*|" + _TAGS + rb")")
_BAR_RE = re.compile(rb"\d{1,3}%\|[^|\n]*\|\s*\d+(?:\.\d+)?[kKM]?/\d")
"""A tqdm bar (`18%|████      | 17940/100000 [...]`)."""
_LEVEL_RE = re.compile(rb"^\[?(?:INFO|WARN(?:ING)?|ERROR|CRITICAL|FATAL)\]?(?::[\w.]+:|:\s*|\s+)")
"""A logger's level before the exception line a program logged on its way out (`[INFO] `,
`ERROR:root:`, `ERROR: `)."""
_EPILOGUE_RE = re.compile(
    rb"^$|^\S*[$#>]$|^wandb:|(?i:exit|status|finished|failed|abort|terminat|press any key|"
    rb"error in atexit|hydra_full_error)")
"""What may follow a fatal exception at an excerpt's end: a blank line, a shell prompt, the
launcher's exit notice, the tracker's closing lines."""
_CONTINUATION_RE = re.compile(
    rb"^\s|^(?:CUDA kernel errors might be asynchronously reported|For debugging consider passing "
    rb"CUDA_LAUNCH_BLOCKING|Compile with `TORCH_USE_CUDA_DSA`|Search for `cuda\w+' in |; \w)")
"""What belongs to the exception line above it: an indented message line (`    full_key: ...`),
the appendix torch prints under every CUDA error, or the `; No such process` errno text
TensorFlow appends to a status message on a line of its own. Read past it to the exception
line."""


def _line_above(buf: bytes, start: int) -> bytes:
    """The first `PREV_LINE` bytes of the line that ends just before offset `start` (the start
    of a line; empty when `start` is 0)."""
    if start == 0:
        return b""
    head = buf.rfind(b"\n", 0, start - 1) + 1
    return buf[head:min(start - 1, head + PREV_LINE)]


def _ignored_above(before: bytes) -> bool:
    """Whether the last traceback header in `before` sits under `Exception ignored in:`."""
    header = before.rfind(_HEADER)
    return header >= 0 and _IGNORED in _line_above(before, before.rfind(b"\n", 0, header) + 1)


def _final_exception(rulebook: Rulebook, data: bytes) -> list[Finding]:
    """An excerpt that holds no event but ENDS on an exception line (`KeyError: 'label'`)
    died of that exception: its traceback was cut off or printed elsewhere. Judged as the
    exception line of a traceback, so a specific rule still wins over the generic one. A bare
    exception line anywhere else is only text (a handled error a program printed)."""
    body = data.rstrip().replace(b"\r\n", b"\n")
    total = body.count(b"\n") + 1
    tail = body.rsplit(b"\n", FINAL_LINES)
    after: list[bytes] = []  # lines below the candidate that are neither epilogue nor appendix
    for back, raw in enumerate(reversed(tail)):
        line = _LEVEL_RE.sub(b"", _RANK_PREFIX_RE.sub(b"", _STAMP_RE.sub(b"", raw.strip(), count=1)))
        if back == 0 and _BAR_RE.search(line):
            continue  # the progress bar's last redraw, flushed after the traceback on exit
        if _HEADLESS_EXC_RE.match(line) and (b": " in line or line.endswith((b"Error", b":"))):
            if after and not _closes_on(line, after):
                return []  # the run went on after it: a handled error it printed
            if _ignored_above(b"\n".join(tail[:len(tail) - 1 - back])):
                return []  # the end of a traceback CPython printed and ignored
            found = classify_bytes(rulebook, [_HEADER + b"\n" + line + b"\n"])
            return [Finding(f.rule, total - back, f.excerpt, f.frame, f.exception)
                    for f in found]
        if after or (not _EPILOGUE_RE.search(line) and not _CONTINUATION_RE.match(raw)):
            after.insert(0, line)  # the run went on after it, or its message's repr goes on
    return []


def _depth(line: bytes) -> int:
    """Brackets `line` opens minus those it closes (a repr spread over lines)."""
    return sum(line.count(c) for c in (b"(", b"[", b"{")) - sum(
        line.count(c) for c in (b")", b"]", b"}"))


def _closes_on(exception: bytes, after: list[bytes]) -> bool:
    """Whether the lines `after` an exception line are its message going on: a tuple or dict
    repr it opened (`tarfile.ReadError: ("unexpected end of data @ <...>",`) that stays open
    until the last of them closes it. Anything else after it is the run going on."""
    depth = _depth(exception)
    for i, line in enumerate(after):
        if depth <= 0:
            # closed before this line: only the epilogue may follow
            return all(_EPILOGUE_RE.search(rest) for rest in after[i:])
        depth += _depth(line)
    return depth == 0


_IPYTHON_HEADER_RE = re.compile(
    rb"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit))\s{2,}Traceback \(most recent "
    rb"call last\)", re.MULTILINE)
"""IPython's traceback header names the exception that ended the cell before its frames:
`KeyError                                  Traceback (most recent call last)`."""


def _notebook_exception(rulebook: Rulebook, data: bytes) -> list[Finding]:
    """An excerpt that holds no event but shows IPython's traceback header died of the
    exception the header names (a notebook cell; the stream classifier does not read this
    format). Judged as that traceback's exception line: the `Type: message` line below the
    header when the excerpt has it, else the bare type, so a specific rule still wins over the
    generic one (`KeyboardInterrupt` is a stop by hand, `ModuleNotFoundError` the env)."""
    body = data.replace(b"\r\n", b"\n")
    headers = list(_IPYTHON_HEADER_RE.finditer(body))
    if not headers:
        return []
    last = headers[-1]
    kind = last["type"]
    line, at = kind, last.start()
    for match in re.finditer(rb"^" + re.escape(kind) + rb"(?::[^\n]*)?$", body[last.end():],
                             re.MULTILINE):
        line, at = match.group(0), last.end() + match.start()
    found = classify_bytes(rulebook, [_HEADER + b"\n" + line.strip() + b"\n"])
    line_no = body.count(b"\n", 0, at) + 1
    return [Finding(f.rule, line_no, f.excerpt, f.frame, f.exception) for f in found]


def classify_excerpt(rulebook: Rulebook, data: bytes, exit_code: int | None = None,
                     runner_known: bool = False) -> Verdict | None:
    """One verdict for a whole log excerpt: its primary cause, or None when it is clean.

    `exit_code` (with `runner_known`, see `Rulebook.for_exit`) names the run only when the
    log holds no event at all: a bare code from an unknown runner says nothing."""
    cause = primary_cause(classify_bytes(rulebook, [data]) or _final_exception(rulebook, data)
                          or _notebook_exception(rulebook, data))
    if cause is not None:
        return Verdict(cause.rule, cause.line_no, cause.excerpt, cause)
    if exit_code:
        rule = rulebook.for_exit(exit_code, runner_known)
        if rule is not None:
            return Verdict(rule, None, f"exit {exit_code}")
    return None
