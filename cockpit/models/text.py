"""Text that came from a box: the one place where it is made safe to show.

A rented box is untrusted. Its log lines, file and cell names, GPU fields and command output
are *data*: they must never be parsed as Rich markup (`[/bold]` crashes, `[@click=…]` becomes
an action, `[link=…]` a hyperlink) and must never reach the user's terminal as control
sequences (OSC 52 writes the clipboard, CSI 2J clears the screen, a bidi override reorders
what the user reads). Everything remote goes through `visible()` (plain strings for the CLI)
or `remote_text()` (a `rich.text.Text` for widgets) on its way to a screen.

Made visible: C0 controls except tab (as Unicode control pictures, ␛ for ESC), DEL, C1
controls, lone surrogates (undecodable bytes kept by `surrogateescape`), and the bidi
embedding/override/isolate characters. Newlines are shown as ␊ only where the caller asks
for one line (`one_line=True`); a multi-line widget keeps them.
"""

from __future__ import annotations

import re

from rich.text import Text

_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff{_BIDI}]")
_UNSAFE_KEEP_NL = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff{_BIDI}]")


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


def visible(text: str, *, one_line: bool = True) -> str:
    """`text` with every control character shown instead of obeyed (see the module doc).

    With `one_line=False`, newlines stay newlines (a log pane); carriage returns are still
    shown, since a bare CR lets a line overwrite what came before it.
    """
    pattern = _UNSAFE if one_line else _UNSAFE_KEEP_NL
    return pattern.sub(_show, text)


def remote_text(text: str, style: str = "", *, one_line: bool = True) -> Text:
    """A `Text` for a widget: never parsed as markup, controls made visible."""
    return Text(visible(text, one_line=one_line), style=style, no_wrap=False)


def remote_bytes(data: bytes, *, one_line: bool = True) -> str:
    """Bytes from a box as a visible string (undecodable bytes shown as `\\xNN`)."""
    return visible(data.decode("utf-8", errors="surrogateescape"), one_line=one_line)
