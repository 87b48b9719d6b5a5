"""A series over the whole run, resampled to the columns of a sparkline, with its time axis.

The store keeps a sweep's samples for 30 days (raw for a day, then one-minute buckets); a
sparkline has a few dozen columns. `resample` puts each point in its column by time (so the
axis is linear: the left edge is `start`, the right edge is now) and keeps each column's
maximum (a 3-minute spike must not vanish into an hour's average). The store writes a value
only when it changed or once a minute, so a point holds until the next one for at most
`HOLD_S`; a column with no point held is a gap, drawn blank (never as a false 0: an idle GPU
and a box that did not answer are different things).

`bars` draws on a fixed scale (0 to 100 for a percentage): a sparkline scaled to its own
minimum and maximum draws a GPU pinned at 97% as a flat floor and 5%→6% as a cliff.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.models.durations import format_duration

HOLD_S = 65.0
"""How long a written value stands for the series (the store's heartbeat is 60 s)."""
MIN_COLUMN_S = 2.0
"""The narrowest column (the probe's default interval): a series seconds old gets as many
columns as it has seconds to show, not a wide line of empty ones."""


@dataclass(frozen=True)
class Trend:
    """One series ready for a sparkline."""

    values: list[float | None]
    """Each column's maximum; None where there was no data."""
    start: float
    end: float
    gaps: int
    """Columns with no data (drawn blank)."""

    @property
    def column_s(self) -> float:
        """Seconds one column covers."""
        return (self.end - self.start) / max(1, len(self.values))

    def axis(self) -> tuple[str, str, str]:
        """Left, middle and right labels of the time axis (`-14h`, `-7h`, `now`)."""
        span = self.end - self.start
        return f"-{format_duration(span)}", f"-{format_duration(span / 2)}", "now"


def resample(points: Sequence[tuple[float, float]], end: float, columns: int,
             start: float | None = None) -> Trend:
    """`points` (time, value), oldest first, as `columns` maxima from `start` (default: the
    first point) to `end`."""
    first = points[0][0] if points else end
    begin = min(first if start is None else start, end - MIN_COLUMN_S)
    columns = max(1, min(columns, int((end - begin) / MIN_COLUMN_S)))
    width = (end - begin) / columns
    values: list[float | None] = [None] * columns
    for at, value in points:
        if at < begin or at > end:
            continue
        index = min(columns - 1, int((at - begin) / width))
        current = values[index]
        values[index] = value if current is None else max(current, value)
    # A value stands until the next one, for at most HOLD_S (the store skips unchanged values).
    last: tuple[float, float] | None = None
    it = iter(points)
    pending = next(it, None)
    out: list[float | None] = []
    gaps = 0
    for index in range(columns):
        left = begin + index * width
        while pending is not None and pending[0] <= left:
            last = pending
            pending = next(it, None)
        column = values[index]
        if column is None and last is not None and left - last[0] <= HOLD_S:
            column = last[1]
        if column is None:
            gaps += 1
        out.append(column)
    return Trend(out, begin, end, gaps)


BARS = "▁▂▃▄▅▆▇█"


def bars(values: Sequence[float | None], low: float = 0.0, high: float = 100.0) -> str:
    """One character per column on the fixed scale [low, high]; a gap is a space."""
    span = high - low
    out = []
    for value in values:
        if value is None:
            out.append(" ")
            continue
        ratio = min(1.0, max(0.0, (value - low) / span)) if span > 0 else 0.0
        out.append(BARS[min(len(BARS) - 1, int(ratio * len(BARS)))])
    return "".join(out)


def axis_line(width: int, left: str, middle: str, right: str) -> str:
    """A time axis exactly `width` columns wide (the line above it): `left` at its start,
    `right` ending at its end, `middle` centred when it fits between them."""
    if width < len(left) + len(right) + 1:
        return f"{left} {right}"  # too narrow for an axis: both ends, past the line's width
    cells = [" "] * width
    cells[: len(left)] = left
    cells[width - len(right):] = right
    start = (width - len(middle)) // 2
    if start > len(left) and start + len(middle) < width - len(right):
        cells[start: start + len(middle)] = middle
    return "".join(cells)
