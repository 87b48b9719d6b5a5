"""Text that came from a box: the one place where it is made safe to show.

A rented box is untrusted. Its log lines, file and cell names, GPU fields and command output
are *data*: they must never be parsed as Rich markup (`[/bold]` crashes, `[@click=…]` becomes
an action, `[link=…]` a hyperlink) and must never reach the user's terminal as control
sequences (OSC 52 writes the clipboard, CSI 2J clears the screen, a bidi override reorders
what the user reads). Everything remote goes through `visible()` (plain strings for the CLI)
or `remote_text()` (a `rich.text.Text` for widgets) on its way to a screen; `clean_text()`
makes an already-built `Text` safe the same way (the widgets of `cockpit.ui.safe` apply it to
whatever they are given, so a renderer that forgets cannot leak), and `json_text()` is the
JSON counterpart (exact values, nothing a terminal would obey).

Made visible: C0 controls except tab (as Unicode control pictures, ␛ for ESC), DEL, C1
controls, lone surrogates (undecodable bytes kept by `surrogateescape`), and the bidi
embedding/override/isolate characters. Newlines are shown as ␊ only where the caller asks
for one line (`one_line=True`); a multi-line widget keeps them.

Every function here is idempotent: showing shown text again changes nothing, so a value may
pass a renderer and then a safe widget without being mangled twice.
"""

from __future__ import annotations

import json
import re
from itertools import pairwise
from typing import Any

from rich.text import Text

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff{_BIDI}]")
_UNSAFE_KEEP_NL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{_BIDI}]")
_JSON_UNSAFE = re.compile(f"[\x7f-\x9f\ud800-\udfff{_BIDI}]")

LINE_LIMIT = 2000
"""Characters of one remote line shown (a cell, a name, an excerpt): far wider than any
terminal. A 1 MB log line or queue entry would otherwise be laid out on every repaint of the
TUI and flood the user's terminal; the rest is counted, not shown."""

BLOCK_LIMIT = 256 * 1024
"""Characters of a multi-line remote block shown in one widget (a command's output in a
report): a few thousand screen lines, enough to scroll through; beyond it the widget's layout
cost grows with every character while nobody reads on."""

_CUT_SLACK = 40
"""Room for the cut marker: text at most this much over its limit is taken as already cut,
which keeps cutting idempotent (the marker itself must not trigger a second cut)."""


def _show(match: re.Match[str]) -> str:
    char = match[0]
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀ … ␟ (␛ for ESC, ␊ for LF, ␍ for CR)
    if code == 0x7F:
        return "\u2421"  # ␡
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def _limit(one_line: bool, limit: int | None) -> int:
    if limit is not None:
        return limit
    return LINE_LIMIT if one_line else BLOCK_LIMIT


def _marker(dropped: int) -> str:
    return f"… (+{dropped} chars)"


def visible(text: str, *, one_line: bool = True, limit: int | None = None) -> str:
    """`text` with every control character shown instead of obeyed (see the module doc).

    With `one_line=False`, newlines stay newlines (a log pane); carriage returns are still
    shown, since a bare CR lets a line overwrite what came before it. At most `limit`
    characters are kept (default `LINE_LIMIT` for one line, `BLOCK_LIMIT` for a block; 0 keeps
    everything), the cut counted at the end.
    """
    keep = _limit(one_line, limit)
    if keep and len(text) > keep + _CUT_SLACK:
        text = text[:keep] + _marker(len(text) - keep)
    pattern = _UNSAFE if one_line else _UNSAFE_KEEP_NL
    return pattern.sub(_show, text)


def remote_text(text: str, style: str = "", *, one_line: bool = True,
                limit: int | None = None) -> Text:
    """A `Text` for a widget: never parsed as markup, controls made visible."""
    return Text(visible(text, one_line=one_line, limit=limit), style=style, no_wrap=False)


def remote_bytes(data: bytes, *, one_line: bool = True) -> str:
    """Bytes from a box as a visible string (undecodable bytes shown as `\\xNN`)."""
    return visible(data.decode("utf-8", errors="surrogateescape"), one_line=one_line)


def clean_text(text: Text, *, one_line: bool = False, limit: int | None = None) -> Text:
    """`text` (a `Text` built by anyone) with its controls made visible, styles kept.

    A `Text` is never parsed as markup, but Rich passes ESC and most other controls through
    to the terminal untouched, so a `Text(f"… {remote} …")` still needs this. Returns `text`
    itself when there is nothing to change (the common case costs one regex search).
    """
    pattern = _UNSAFE if one_line else _UNSAFE_KEEP_NL
    plain = text.plain
    keep = _limit(one_line, limit)
    too_long = bool(keep) and len(plain) > keep + _CUT_SLACK
    if not too_long and pattern.search(plain) is None:
        return text
    if too_long:
        text = text[:keep]
        text.append(_marker(len(plain) - keep))
        plain = text.plain
    # Cut at every span boundary: each piece then lies wholly inside or outside each span,
    # so a piece keeps its styles whatever its shown length becomes.
    cuts = sorted({0, len(plain), *(s.start for s in text.spans), *(s.end for s in text.spans)})
    out = Text(style=text.style, justify=text.justify, overflow=text.overflow,
               no_wrap=text.no_wrap, end=text.end, tab_size=text.tab_size)
    for start, end in pairwise(cuts):
        styles = [s.style for s in text.spans if s.start <= start and s.end >= end]
        piece = pattern.sub(_show, plain[start:end])
        out.append(piece)
        for style in styles:
            out.stylize(style, len(out) - len(piece), len(out))
    return out


def json_text(document: Any, *, indent: int | None = 2) -> str:
    """`json.dumps(document, ensure_ascii=False)`, safe for a terminal and still exact.

    json.dumps escapes C0 controls but passes C1 controls, bidi overrides and lone surrogates
    (a non-UTF-8 file name) through; those become `\\uXXXX` escapes, which decode to the very
    same value, so the document stays exact and printing it cannot fail or be obeyed.
    """
    dumped = json.dumps(document, indent=indent, ensure_ascii=False)
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m[0]):04x}", dumped)
