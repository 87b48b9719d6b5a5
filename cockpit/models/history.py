"""What happened, as the events list shows it: alerts and events from the store or the session.

The store keeps rows of several kinds (alerts with their deliveries, classified failures, cell
state changes, reachability changes); the events screen and `cockpit report` only need one
shape. A `HistoryItem` is that shape; `merge` orders them newest first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

MAX_ITEMS = 2000
"""Rows the events list shows at most: newest first, so older ones are what is cut."""


@dataclass(frozen=True)
class HistoryItem:
    """One thing that happened on one box (text from a box: shown only as plain `Text`)."""

    at: float
    instance: str
    kind: str
    """`cell-failed`, `disk-pressure`, `idle-burn`, `stale`, `queue-done`, `gpu-failed`, ..."""
    text: str
    cell: str = ""
    detail: str = ""
    delivery: str = ""
    """How it went out: `webhook ok`, `slack://… failed: HTTP 500`, or "" if not sent."""
    source: str = "session"
    """`store` (recorded by a watcher or an earlier session) or `session` (this TUI only)."""


def merge(*groups: Iterable[HistoryItem], limit: int = MAX_ITEMS) -> list[HistoryItem]:
    """Items of every group, newest first, each (time, box, kind, text) once."""
    seen: set[tuple[int, str, str, str]] = set()
    out: list[HistoryItem] = []
    for item in sorted((i for g in groups for i in g), key=lambda i: i.at, reverse=True):
        key = (round(item.at), item.instance, item.kind, item.text)
        if key in seen:
            continue
        seen.add(key)
        out.append(item)
        if len(out) >= limit:
            break
    return out
