"""A typed face for RE2 (`google-re2`), the regex engine of the failure rulebook.

Why RE2 and not `re`: `re` backtracks and tries every alternative at every position, so a
rulebook of 50 alternatives scans a log at ~15 MB/s here and a pathological pattern can take
exponential time; RE2 compiles all of them into one automaton and scans at ~600 MB/s with a
linear-time guarantee. Everything here works on bytes: logs are bytes, a non-UTF-8 byte must
not stop the scan, and a newline byte is never part of a multi-byte character.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol, cast

import re2  # type: ignore[import-untyped]

MAX_MEM = 64 << 20
"""RE2's automaton budget: generous, so the whole rulebook stays a DFA (no NFA fallback)."""


class Match(Protocol):
    """The part of an RE2 match object the cockpit uses."""

    def start(self) -> int: ...

    def end(self) -> int: ...


class Regex(Protocol):
    """The part of a compiled RE2 pattern the cockpit uses."""

    def search(self, text: bytes, pos: int = ..., endpos: int = ...) -> Match | None: ...

    def finditer(self, text: bytes, pos: int = ..., endpos: int = ...) -> Iterator[Match]: ...


def _options() -> object:
    options = re2.Options()
    options.log_errors = False  # errors are raised and reported by us, not printed by absl
    options.max_mem = MAX_MEM
    return options


def compile_one(pattern: str, *, multiline: bool = False) -> Regex:
    """Compile one pattern for bytes; raises `re2.error` on bad syntax."""
    text = f"(?m){pattern}" if multiline else pattern
    return cast(Regex, re2.compile(text.encode(), _options()))


def compile_any(patterns: Sequence[str], *, multiline: bool = False) -> Regex:
    """One automaton that matches where any of `patterns` matches."""
    return compile_one("|".join(f"(?:{p})" for p in patterns), multiline=multiline)


def syntax_error(pattern: str) -> str | None:
    """Why `pattern` is not valid RE2 syntax, or None when it is."""
    try:
        compile_one(pattern)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        return detail.decode(errors="replace") if isinstance(detail, bytes) else str(detail)
    return None
