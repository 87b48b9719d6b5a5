"""`cockpit report` on a 30-day store, against a plain `SELECT count(*)` over the rows it reads.

Builds the file a month-long sweep leaves behind under the retention policy: `--hosts` boxes
with 13 series each (2 GPUs' util and memory, two mounts' bytes and inodes, queue counts,
reachability, price), one-minute buckets for days 2-30 and the last 24 h at full resolution
(the share of probes a change-filtered writer keeps, as `bench.store_size` measured it), plus
a month of history per box: 40 cells each started, 6 epochs, finished or failed with a
classified cause, a stall and an unreachable episode a day, one alert a day with two
deliveries. Rows are inserted in bulk (the writer's own path is what `store_size` times).

Then times, best of `--repeat`, in this process:

- `report --json` and the text report over the whole month (`cockpit.commands.report.run`);
- `report --since 24h`;
- baseline: `SELECT count(*)` over exactly the rows the report reads (each box's price series,
  raw and bucketed, and every history row) — the floor of touching them at all.

    .venv/bin/python -m bench.report_30d [--hosts 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from cockpit.services.store.db import (
    BUCKET_S,
    CELLS_DONE,
    CELLS_FAILED,
    CELLS_TOTAL,
    PRICE_H,
    REACHABLE,
    Store,
    metric_disk,
    metric_gpu_mem,
    metric_gpu_util,
    metric_inodes,
)

DAY = 86400.0
NOW = 1_790_000_000.0
RAW_SHARE = 0.175
"""Share of offered values a change-filtered writer stores (bench.store_size: 17.5%)."""
CELLS = 40


def series_names() -> list[str]:
    names = [metric_gpu_util(0), metric_gpu_util(1), metric_gpu_mem(0), metric_gpu_mem(1)]
    for mount in ("/root/autodl-tmp", "/root/autodl-fs"):
        names += [metric_disk(mount), metric_inodes(mount)]
    return [*names, CELLS_DONE, CELLS_FAILED, CELLS_TOTAL, REACHABLE, PRICE_H]


def build(path: Path, hosts: int) -> int:
    """The month-old store; how many rows it holds in all."""
    rng = random.Random(30)
    store = Store.open(path, sweep="month", role="bench")
    start = NOW - 30 * DAY
    raw_from = NOW - DAY
    total = 0
    for h in range(hosts):
        box = f"h{h:02d}"
        with store.batch():
            for metric in series_names():
                sid = store.series_id(box, metric)
                value = 1.98 if metric == PRICE_H else 50.0
                minutes = range(int(start // BUCKET_S) * BUCKET_S, int(raw_from), BUCKET_S)
                store.conn.executemany("INSERT INTO buckets VALUES (?, ?, ?, ?, ?)",
                                       ((sid, m, value, value + 3, 30) for m in minutes))
                total += len(minutes)
                step = 2.0 / RAW_SHARE if metric != PRICE_H else 60.0
                count = int(DAY / step)
                store.conn.executemany("INSERT INTO samples VALUES (?, ?, ?)",
                                       ((sid, raw_from + i * step, value) for i in range(count)))
                total += count
            at = start
            for c in range(CELLS):
                cell = f"cfg_{c:03d}"
                run_s = 30 * DAY / CELLS
                store.cell_change(box, cell, "pending", "running", at, epochs=6)
                for e in range(1, 6):
                    store.cell_change(box, cell, "running", "running", at + e * run_s / 6,
                                      epoch=e, epochs=6)
                if rng.random() < 0.2:
                    store.event(box, cell, "cuda-oom", "resource", "CUDA out of memory",
                                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
                                "2.00 GiB", at + run_s - 10)
                    store.cell_change(box, cell, "running", "failed", at + run_s, exit_code=1)
                else:
                    store.cell_change(box, cell, "running", "finished ok", at + run_s,
                                      epoch=6, epochs=6, exit_code=0)
                at += run_s
                total += 8
            for d in range(30):
                day = start + d * DAY
                j = store.judgement_started(box, "stalled", "stalled 25m", day + 3600,
                                            cell="cfg_000")
                store.judgement_ended(j, day + 5400)
                j = store.judgement_started(box, "stale", "stale 5m", day + 7200)
                store.judgement_ended(j, day + 7800)
                a = store.alert(("stale", box, str(d)), box, "stale",
                                f"{box}: unreachable for 10m", day + 7500)
                store.delivery(a, "slack://…", True, 1, "", day + 7501)
                store.delivery(a, "webhook", False, 3, "HTTP 502", day + 7502)
                total += 5
        store.touch(NOW)
    store.close()
    return total


def timed(fn: object, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        began = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - began)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from cockpit.commands import report

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "month.db"
        began = time.perf_counter()
        rows = build(path, args.hosts)
        print(f"built a 30-day store: {args.hosts} hosts, {rows} rows, "
              f"{path.stat().st_size / 1e6:.0f} MB, in {time.perf_counter() - began:.0f} s")

        def run_report(*extra: str) -> None:
            cli = argparse.ArgumentParser()
            report.add_parser(cli.add_subparsers(dest="command"))
            with contextlib.redirect_stdout(io.StringIO()) as out:
                code = report.run(cli.parse_args(["report", "month", "--db", str(path), *extra]))
            assert code == 0 and out.getvalue()

        def baseline() -> None:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            ids = [r[0] for r in conn.execute("SELECT id FROM series WHERE metric = ?",
                                              (PRICE_H,))]
            for sid in ids:
                conn.execute("SELECT count(*) FROM samples WHERE series = ?", (sid,)).fetchone()
                conn.execute("SELECT count(*) FROM buckets WHERE series = ?", (sid,)).fetchone()
            for table in ("cell_changes", "events", "judgements", "alerts", "deliveries", "audit"):
                conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            conn.close()

        def whole() -> None:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            for table in ("samples", "buckets"):
                conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            conn.close()

        t_json = timed(lambda: run_report("--json"), args.repeat)
        t_text = timed(lambda: run_report(), args.repeat)
        t_day = timed(lambda: run_report("--json", "--since", "24h"), args.repeat)
        t_base = timed(baseline, args.repeat)
        t_whole = timed(whole, args.repeat)
    print(f"report --json, 30 days       : {t_json * 1000:8.0f} ms")
    print(f"report (text), 30 days       : {t_text * 1000:8.0f} ms")
    print(f"report --json --since 24h    : {t_day * 1000:8.0f} ms")
    print(f"baseline count(*) same rows  : {t_base * 1000:8.0f} ms")
    print(f"count(*) of every sample row : {t_whole * 1000:8.0f} ms")
    print(f"ratio report/baseline        : {t_json / t_base:8.1f}x (json), "
          f"{t_text / t_base:.1f}x (text)")


if __name__ == "__main__":
    main()
