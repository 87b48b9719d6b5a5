"""The store's size per host per day under the retention policy, against keeping every sample.

Simulates `--hosts` boxes probed every `--interval` seconds (the sweep's default, 2 s, as
`Fleet` uses it) for `--days` simulated days, written the way `TrackerRecorder` writes: one
transaction per tick, `compact` once a simulated minute. Each box has `--gpus` GPUs (util
noisy every probe, memory nearly constant), two mounts (bytes and inodes creeping up), queue
counts, reachability and a price — the series `recorder._box` writes.

After the run the raw table holds exactly the last 24 h and the buckets table the days before,
so (with SQLite's `dbstat` page sizes):

- raw window per host  = samples pages / hosts                 (a rolling day, constant)
- buckets per host-day = buckets pages / hosts / (days - 1)
- steady state per host = every page but the buckets' / hosts + 30 x buckets per host-day
  (what the file settles at)

Baseline: every metric of every probe kept at full resolution for the same 30 days (no change
filter, no buckets), priced at the bytes per raw row measured here.

    .venv/bin/python -m bench.store_size [--hosts 4] [--days 2] [--gpus 2]
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import tempfile
import time
from pathlib import Path

from cockpit.services.store.db import (
    BUCKET_KEEP_S,
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

T0 = 1_790_000_000.0
DAY = 86400.0


def table_bytes(path: Path) -> dict[str, int]:
    """Bytes of pages per table and index (SQLite's dbstat)."""
    conn = sqlite3.connect(path)
    try:
        return {str(n): int(b) for n, b in
                conn.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name")}
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--days", type=float, default=2.0)
    parser.add_argument("--gpus", type=int, default=2)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    rng = random.Random(15)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "size.db"
        store = Store.open(path, sweep="bench", role="bench")
        ticks = int(args.days * DAY / args.interval)
        disk = {h: 40.0 for h in range(args.hosts)}
        rows = calls = 0
        started = time.perf_counter()
        cpu = time.process_time()
        next_compact = T0 + 60
        for tick in range(ticks):
            now = T0 + tick * args.interval
            with store.batch():
                for host in range(args.hosts):
                    disk[host] += rng.random() * 0.0004
                    values: dict[str, float | None] = {
                        metric_disk("/root/autodl-tmp"): disk[host],
                        metric_inodes("/root/autodl-tmp"): disk[host] / 3,
                        metric_disk("/root/autodl-fs"): 12.0,
                        metric_inodes("/root/autodl-fs"): 1.0,
                        CELLS_DONE: float(tick * 12 // ticks), CELLS_FAILED: 1.0,
                        CELLS_TOTAL: 12.0, REACHABLE: 1.0, PRICE_H: 1.98,
                    }
                    for gpu in range(args.gpus):
                        values[metric_gpu_util(gpu)] = float(rng.randint(85, 100))
                        values[metric_gpu_mem(gpu)] = 71.3 if rng.random() < 0.99 else 71.4
                    rows += store.sample(f"h{host}", now, values)
                    calls += len(values)
            if now >= next_compact:
                store.compact(now)
                next_compact = now + 60
        store.compact(T0 + ticks * args.interval)  # the last minute's fold
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
        store.close()
        sizes = table_bytes(path)
        conn = sqlite3.connect(path)
        raw_rows = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
        bucket_rows = conn.execute("SELECT count(*) FROM buckets").fetchone()[0]
        conn.close()
    metrics = 9 + 2 * args.gpus
    bucket_b = sizes.get("buckets", 0)
    raw_b = sizes.get("samples", 0)
    rest_b = sum(sizes.values()) - bucket_b  # the raw day plus every other page (series, meta)
    raw_host = raw_b / args.hosts
    bucket_host_day = bucket_b / args.hosts / max(args.days - 1, 1e-9)
    keep_days = BUCKET_KEEP_S / DAY
    steady = rest_b / args.hosts + keep_days * bucket_host_day
    per_row = raw_b / max(raw_rows, 1)
    naive_day = metrics * DAY / args.interval * per_row
    naive = naive_day * (keep_days + 1)
    print(f"simulated {args.hosts} hosts x {args.days:g} days at 1 probe/{args.interval:g} s, "
          f"{args.gpus} GPUs, {metrics} series per host: {ticks} ticks in {elapsed:.1f} s "
          f"({calls / elapsed / 1000:.0f}k values/s offered, {rows} rows written = "
          f"{100 * rows / max(calls, 1):.1f}%)")
    print(f"writer CPU (samples + compaction): {1e6 * cpu / (ticks * args.hosts):.0f} us per host "
          f"per tick = {200e3 * cpu / (ticks * args.hosts):.1f} ms per tick at 200 hosts")
    print(f"raw rows kept {raw_rows} ({per_row:.1f} B/row), bucket rows {bucket_rows}")
    print(f"raw window (24 h) per host        : {raw_host / 1e6:8.2f} MB")
    print(f"buckets per host per day          : {bucket_host_day / 1e3:8.1f} KB")
    print(f"steady state per host (24h + 30 d): {steady / 1e6:8.2f} MB  "
          f"= {steady / (keep_days + 1) / 1e3:.0f} KB per host per retained day")
    print(f"baseline: every value, 31 days    : {naive / 1e6:8.2f} MB per host "
          f"({naive_day / 1e6:.2f} MB per host per day)")
    print(f"ratio baseline / store            : {naive / steady:8.1f}x")
    print(f"200 hosts at steady state          : {200 * steady / 1e9:8.2f} GB")


if __name__ == "__main__":
    main()
