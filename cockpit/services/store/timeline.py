"""A post-mortem timeline per box and cell, from the store's rows alone (no SSH).

`build_timeline` is pure: rows in (`BoxRows` per box), a `Timeline` out. `gather` is the one
function that reads (a `StoreReader`), and `to_json` / `render` give the two outputs of
`cockpit report`.

What a box's timeline says, each line dated:

- `started`, `progress` (an epoch of a running cell), `finished`, `failed` (with the cause: the
  newest classified failure of that cell, else its exit code), `interrupted`;
- `stalled`, `idle-burn`, `unreachable` (judgement episodes, with how long they lasted; one still
  true at the writer's last tick runs to that tick);
- `failure` (a classified failure), `alert` (with how each channel took it), `teardown`
  (mirrored audit entries).

Cost so far: the sweep's price per hour times the time the store watched the box (the
`price_h` samples, written at least once a minute while watched; a gap longer than
`BILL_GAP_S` is time nobody watched and is reported as such, not billed or guessed). Unknown
when the sweep gave no price.

JSON shape (`to_json`; times are epoch seconds, durations seconds, money in the sweep's
currency per hour as given)::

    {"sweep": str, "since": float|null, "until": float|null, "generated_at": float,
     "boxes": [{"instance": str, "first_seen": float|null, "last_seen": float|null,
                "price_per_hour": float|null, "watched_s": float, "unwatched_s": float,
                "cost": float|null, "unreachable_s": float, "idle_burn_s": float,
                "idle_cost": float|null, "alerts": int,
                "cells": [{"cell": str, "state": str, "started_at": float|null,
                           "ended_at": float|null, "epoch": int|null, "epochs": int|null,
                           "exit_code": int|null, "cause": str|null}],
                "timeline": [{"at": float, "until": float|null, "kind": str, "cell": str,
                              "text": str, "detail": str}]}]}

Every text in it may quote a box (cell names, log excerpts): `render` builds `rich.text.Text`
from `visible` strings, never markup, and `to_json` goes through `json_text`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text

from cockpit.models.durations import format_duration
from cockpit.models.text import json_text, visible
from cockpit.services.store.db import (
    HEARTBEAT_S,
    PRICE_H,
    AlertRow,
    AuditRow,
    CellChange,
    EventRow,
    JudgementRow,
    Point,
    StoreReader,
)

BILL_GAP_S = 2.5 * HEARTBEAT_S
"""A gap between two price samples longer than this is time nobody watched (the writer writes
the price at least every `HEARTBEAT_S` while it runs)."""
MAX_ENTRIES = 5000
"""Timeline lines per box at most (newest kept): a box whose cell printed 10 000 epochs still
gives a report one can read."""
MAX_SHOWN = 240
"""Characters of one timeline line's text in the text output (JSON keeps the stored text)."""
JUDGED = {"stalled": "stalled", "idle-burn": "idle burn", "stale": "unreachable",
          "disk-pressure": "disk pressure", "memory-pressure": "memory pressure",
          "thermal": "thermal", "hardware": "hardware", "zombie-vram": "zombie VRAM",
          "dead": "queue dead"}
"""Judgement kinds the timeline shows as episodes, and their name there (informational ones —
finished, buffered log — are already told by the cells' own lines)."""


@dataclass(frozen=True)
class Entry:
    """One line of a box's timeline."""

    at: float
    kind: str
    text: str
    cell: str = ""
    until: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class CellSummary:
    """Where a cell ended up, as of the store's last word."""

    cell: str
    state: str
    started_at: float | None
    ended_at: float | None
    epoch: int | None
    epochs: int | None
    exit_code: int | None
    cause: str | None


@dataclass(frozen=True)
class BoxTimeline:
    """One box: its money, its episodes, its cells and its lines."""

    instance: str
    first_seen: float | None
    last_seen: float | None
    price_per_hour: float | None
    watched_s: float
    unwatched_s: float
    cost: float | None
    unreachable_s: float
    idle_burn_s: float
    idle_cost: float | None
    alerts: int
    cells: tuple[CellSummary, ...]
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Timeline:
    """The whole report."""

    sweep: str
    since: float | None
    until: float | None
    generated_at: float
    boxes: tuple[BoxTimeline, ...]


@dataclass
class BoxRows:
    """Everything the store holds about one box that the timeline needs."""

    instance: str
    cell_changes: list[CellChange] = field(default_factory=list)
    """All of them (cells' states need their whole history), any order."""
    events: list[EventRow] = field(default_factory=list)
    judgements: list[JudgementRow] = field(default_factory=list)
    alerts: list[AlertRow] = field(default_factory=list)
    audit: list[AuditRow] = field(default_factory=list)
    price: list[Point] = field(default_factory=list)
    """The `price_h` series, oldest first (used when `billing` is None)."""
    billing: Billing | None = None
    """The same series already summed by SQL (`gather` does, for a month of points)."""
    seen: list[float] = field(default_factory=list)
    """Times of any sample of the box (first and last are enough)."""


def _overlap(start: float, end: float, since: float | None) -> float:
    lo = start if since is None else max(start, since)
    return max(0.0, end - lo)


Billing = tuple[float, float, float | None, float | None]
"""(watched seconds, unwatched seconds, cost, latest price per hour)."""


def _billing(price: Sequence[Point], since: float | None, until: float | None) -> Billing:
    """(watched seconds, unwatched seconds, cost, latest price) from the price series."""
    points = [p for p in price if (since is None or p.at + p.span >= since)]
    if not points:
        return 0.0, 0.0, None, None
    watched = unwatched = cost = 0.0
    for here, after in itertools.pairwise(points):
        gap = after.at - here.at
        if gap <= BILL_GAP_S:
            seconds = _overlap(here.at, after.at, since)
            watched += seconds
            cost += here.value * seconds / 3600.0
        else:
            counted = min(max(here.span, 0.0), gap)  # a bucket covers its own minute
            seconds = _overlap(here.at, here.at + counted, since)
            watched += seconds
            cost += here.value * seconds / 3600.0
            unwatched += _overlap(here.at + counted, after.at, since)
    last = points[-1]
    # The newest point holds until the store's last tick (a constant price is written again
    # only every HEARTBEAT_S), or a bucket for its own minute.
    tail = last.span or (min(until - last.at, BILL_GAP_S) if until is not None else 0.0)
    seconds = _overlap(last.at, last.at + max(tail, 0.0), since)
    watched += seconds
    cost += last.value * seconds / 3600.0
    return watched, unwatched, cost, last.value


def _cells(changes: Sequence[CellChange], events: Sequence[EventRow]) -> list[CellSummary]:
    causes: dict[str, EventRow] = {}
    for event in sorted(events, key=lambda e: e.at):
        causes[event.cell] = event
    out: dict[str, CellSummary] = {}
    for ch in sorted(changes, key=lambda c: c.at):
        old = out.get(ch.cell)
        started = old.started_at if old else None
        ended = old.ended_at if old else None
        if ch.to_state == "running" and ch.from_state != "running":
            started, ended = ch.at, None
        elif ch.to_state in ("finished ok", "failed", "interrupted", "finished earlier"):
            ended = ch.at
        cause = None
        if ch.to_state == "failed":
            found = causes.get(ch.cell)
            cause = (f"{found.title}: {found.message}" if found is not None
                     else f"exit {ch.exit_code}" if ch.exit_code is not None else "no cause recorded")
        out[ch.cell] = CellSummary(ch.cell, ch.to_state, started, ended,
                                   ch.epoch if ch.epoch is not None else (old.epoch if old else None),
                                   ch.epochs if ch.epochs is not None else (old.epochs if old else None),
                                   ch.exit_code, cause)
    return list(out.values())


def _change_entries(changes: Sequence[CellChange], cells: dict[str, CellSummary]) -> list[Entry]:
    out = []
    for ch in changes:
        of = f"/{ch.epochs}" if ch.epochs else ""
        if ch.to_state == "running" and ch.from_state == "running":
            out.append(Entry(ch.at, "progress", f"epoch {ch.epoch}{of}", ch.cell))
        elif ch.to_state == "running":
            out.append(Entry(ch.at, "started", "started" + (f" ({ch.epochs} epochs)" if ch.epochs
                                                             else ""), ch.cell, detail=ch.evidence))
        elif ch.to_state == "failed":
            summary = cells.get(ch.cell)
            cause = summary.cause if summary is not None and summary.cause else ""
            code = f" exit {ch.exit_code}" if ch.exit_code is not None else ""
            out.append(Entry(ch.at, "failed", f"failed{code}" + (f": {cause}" if cause else ""),
                             ch.cell, detail=ch.evidence))
        elif ch.to_state == "finished ok":
            out.append(Entry(ch.at, "finished", "finished ok", ch.cell, detail=ch.evidence))
        else:
            out.append(Entry(ch.at, ch.to_state.replace(" ", "-"), ch.to_state, ch.cell,
                             detail=ch.evidence))
    return out


def box_timeline(rows: BoxRows, since: float | None, until: float | None) -> BoxTimeline:
    """One box's timeline from its rows (pure)."""
    cells = _cells(rows.cell_changes, rows.events)
    by_cell = {c.cell: c for c in cells}
    entries = [e for e in _change_entries(rows.cell_changes, by_cell)
               if since is None or e.at >= since]
    unreachable = idle = 0.0
    for j in rows.judgements:
        name = JUDGED.get(j.kind)
        if name is None:
            continue
        end = j.ended_at if j.ended_at is not None else (until if until is not None else j.started_at)
        if since is not None and end < since:
            continue
        lasted = _overlap(j.started_at, end, since)
        if j.kind == "stale":
            unreachable += lasted
        elif j.kind == "idle-burn":
            idle += lasted
        open_ = " (still at the last tick)" if j.ended_at is None else ""
        entries.append(Entry(j.started_at, j.kind, f"{name} for {format_duration(end - j.started_at)}"
                             f"{open_}: {j.text}", j.cell, end, j.detail))
    for e in rows.events:
        if since is None or e.at >= since:
            code = f" (exit {e.exit_code})" if e.exit_code is not None else ""
            entries.append(Entry(e.at, "failure", f"{e.title}{code}: {e.message}", e.cell,
                                 detail=f"rule {e.rule}, class {e.klass}"))
    for a in rows.alerts:
        if since is None or a.fired_at >= since:
            sent = "; ".join(d.describe() for d in a.deliveries) or "not sent"
            entries.append(Entry(a.fired_at, "alert", f"ALERT {a.kind}: {a.text} [{sent}]",
                                 a.cell, detail=a.detail))
    for entry in rows.audit:
        if since is None or entry.at >= since:
            what = entry.entry.get("action") or entry.entry.get("cell") or ""
            entries.append(Entry(entry.at, "teardown", f"audit: {entry.event} {what}".rstrip(),
                                 str(entry.entry.get("cell") or ""),
                                 detail=str(entry.entry.get("note") or "")))
    entries.sort(key=lambda e: (e.at, e.kind))
    entries = entries[-MAX_ENTRIES:]
    watched, unwatched, cost, price = (rows.billing if rows.billing is not None
                                       else _billing(rows.price, since, until))
    if price is None:
        cost = None
    idle_cost = price * idle / 3600.0 if price is not None else None
    seen = [t for t in rows.seen if since is None or t >= since]
    if price is None and seen:
        watched = max(seen) - min(seen)  # no price series: the span of any samples
    return BoxTimeline(rows.instance, min(seen) if seen else None, max(seen) if seen else None,
                       price, watched, unwatched, cost, unreachable, idle, idle_cost,
                       sum(1 for a in rows.alerts if since is None or a.fired_at >= since),
                       tuple(cells), tuple(entries))


def build_timeline(sweep: str, boxes: Iterable[BoxRows], *, since: float | None,
                   until: float | None, generated_at: float | None = None) -> Timeline:
    """The report from rows (pure): boxes in the order given."""
    made = time.time() if generated_at is None else generated_at
    return Timeline(sweep, since, until, made,
                    tuple(box_timeline(rows, since, until) for rows in boxes))


BILLING_SQL = """
WITH pts AS (
    SELECT minute AS at, avg AS value, :bucket AS span FROM buckets
    WHERE series = :s AND minute + :bucket >= :since
    UNION ALL
    SELECT at, value, 0.0 FROM samples WHERE series = :s AND at >= :since
), seq AS (
    SELECT at, value, span, LEAD(at) OVER (ORDER BY at) AS next FROM pts
), seg AS (
    SELECT value,
           CASE WHEN next - at <= :gap THEN next ELSE at + MIN(span, next - at) END AS hi,
           MAX(at, :since) AS lo,
           CASE WHEN next - at > :gap THEN next ELSE NULL END AS gap_end,
           MAX(at + MIN(span, next - at), :since) AS gap_lo
    FROM seq WHERE next IS NOT NULL
)
SELECT COALESCE(SUM(MAX(hi - lo, 0)), 0), COALESCE(SUM(MAX(gap_end - gap_lo, 0)), 0),
       COALESCE(SUM(value * MAX(hi - lo, 0)), 0) / 3600.0
FROM seg
"""
"""`_billing` in SQL: a month of per-minute price points summed where they lie."""


def billing_sql(reader: StoreReader, instance: str, since: float | None,
                until: float | None) -> Billing:
    """`_billing` over the box's stored price series, summed by SQLite (same result)."""
    from cockpit.services.store.db import BUCKET_S

    row = reader.conn.execute("SELECT id FROM series WHERE instance = ? AND metric = ?",
                              (instance, PRICE_H)).fetchone()
    if row is None:
        return 0.0, 0.0, None, None
    sid = int(row[0])
    lo = -1e18 if since is None else since
    args = {"s": sid, "since": lo, "gap": BILL_GAP_S, "bucket": float(BUCKET_S)}
    reader.conn.execute("BEGIN")  # one snapshot: the body and the last point agree
    try:
        watched, unwatched, cost = reader.conn.execute(BILLING_SQL, args).fetchone()
        # The newest point: an index seek in each table, never a sort of the month.
        candidates = [r for r in (
            reader.conn.execute("SELECT minute, avg, :bucket FROM buckets WHERE series = :s "
                                "ORDER BY minute DESC LIMIT 1", args).fetchone(),
            reader.conn.execute("SELECT at, value, 0.0 FROM samples WHERE series = :s "
                                "ORDER BY at DESC LIMIT 1", args).fetchone(),
        ) if r is not None and float(r[0]) + float(r[2]) >= lo]
        last = max(candidates, key=lambda r: float(r[0])) if candidates else None
    finally:
        reader.conn.execute("COMMIT")
    if last is None:
        return 0.0, 0.0, None, None
    at, value, span = float(last[0]), float(last[1]), float(last[2])
    tail = span or (min(until - at, BILL_GAP_S) if until is not None else 0.0)
    seconds = _overlap(at, at + max(tail, 0.0), since)
    return (float(watched) + seconds, float(unwatched),
            float(cost) + value * seconds / 3600.0, value)


def gather(reader: StoreReader, instances: Sequence[str] | None = None, *,
           since: float | None = None, until: float | None = None) -> list[BoxRows]:
    """Read every box's rows (all boxes the store knows, or `instances` in that order)."""
    names = list(instances) if instances is not None else reader.instances()
    out = []
    unlimited = 1 << 62
    for name in names:
        rows = BoxRows(name)
        rows.cell_changes = reader.cell_changes(instance=name, limit=unlimited,
                                                newest_first=False)
        rows.events = reader.events(instance=name, limit=unlimited)
        rows.judgements = reader.judgements(instance=name, since=since, limit=unlimited)
        rows.alerts = reader.alerts(instance=name, since=since, limit=unlimited)
        rows.audit = reader.audit(instance=name, since=since, limit=unlimited)
        rows.billing = billing_sql(reader, name, since, until)
        rows.seen = reader.seen(name, since=since)
        out.append(rows)
    return out


def to_json(timeline: Timeline) -> str:
    """The documented JSON shape (see the module docstring), safe for a terminal."""
    def cell(c: CellSummary) -> dict[str, Any]:
        return {"cell": c.cell, "state": c.state, "started_at": c.started_at,
                "ended_at": c.ended_at, "epoch": c.epoch, "epochs": c.epochs,
                "exit_code": c.exit_code, "cause": c.cause}

    def entry(e: Entry) -> dict[str, Any]:
        return {"at": e.at, "until": e.until, "kind": e.kind, "cell": e.cell, "text": e.text,
                "detail": e.detail}

    doc = {"sweep": timeline.sweep, "since": timeline.since, "until": timeline.until,
           "generated_at": timeline.generated_at,
           "boxes": [{"instance": b.instance, "first_seen": b.first_seen,
                      "last_seen": b.last_seen, "price_per_hour": b.price_per_hour,
                      "watched_s": round(b.watched_s, 1), "unwatched_s": round(b.unwatched_s, 1),
                      "cost": None if b.cost is None else round(b.cost, 4),
                      "unreachable_s": round(b.unreachable_s, 1),
                      "idle_burn_s": round(b.idle_burn_s, 1),
                      "idle_cost": None if b.idle_cost is None else round(b.idle_cost, 4),
                      "alerts": b.alerts, "cells": [cell(c) for c in b.cells],
                      "timeline": [entry(e) for e in b.entries]} for b in timeline.boxes]}
    return json_text(doc)


def _when(at: float | None) -> str:
    return "—" if at is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at))


def _money(value: float | None) -> str:
    return "unknown (no price in the sweep)" if value is None else f"{value:.2f}"


def render(timeline: Timeline) -> Text:
    """The text report: plain `Text` (box text shown with `visible`, never as markup)."""
    out = Text()
    since = _when(timeline.since) if timeline.since is not None else "the start"
    out.append(f"cockpit report {visible(timeline.sweep)}", style="bold")
    until = (f"{_when(timeline.until)} UTC (the store's last tick)" if timeline.until is not None
             else "the newest row (no tick recorded)")
    out.append(f"  from {since} to {until}\n")
    if not timeline.boxes:
        out.append("No box has anything recorded in this store.\n")
    for box in timeline.boxes:
        out.append("\n")
        out.append(visible(box.instance), style="bold")
        price = f"{box.price_per_hour:.2f}/h" if box.price_per_hour is not None else "no price"
        out.append(f"  {price}  watched {format_duration(box.watched_s)}")
        if box.unwatched_s:
            out.append(f" (+{format_duration(box.unwatched_s)} unwatched)")
        out.append(f"  cost so far {_money(box.cost)}")
        if box.unreachable_s:
            out.append(f"  unreachable {format_duration(box.unreachable_s)}", style="yellow")
        if box.idle_burn_s:
            idle_money = f" ({box.idle_cost:.2f})" if box.idle_cost is not None else ""
            out.append(f"  idle burn {format_duration(box.idle_burn_s)}{idle_money}",
                       style="yellow")
        out.append(f"  alerts {box.alerts}\n")
        if box.cells:
            counts: dict[str, int] = {}
            for c in box.cells:
                counts[c.state] = counts.get(c.state, 0) + 1
            out.append("  cells: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
                       + "\n")
        for c in box.cells:
            if c.cause:
                out.append(f"    {visible(c.cell)}: ", style="red")
                out.append(visible(c.cause, limit=MAX_SHOWN) + "\n")
        if not box.entries:
            out.append("  nothing happened in this window\n", style="dim")
        for e in box.entries:
            style = {"failed": "red", "alert": "bold red", "failure": "red",
                     "finished": "green", "stalled": "yellow", "idle-burn": "yellow",
                     "stale": "yellow"}.get(e.kind, "")
            out.append(f"  {_when(e.at)}  ")
            if e.cell:
                out.append(visible(e.cell, limit=80) + "  ", style="cyan")
            out.append(visible(e.text, limit=MAX_SHOWN) + "\n", style=style)
    return out
