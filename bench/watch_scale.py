"""Benchmark: `cockpit watch` at 200 cheap hosts, with the store, the feed and the metrics
endpoint on, against the fleet service alone.

The hosts are bench.scale's: asyncssh servers in one separate process answering the probe
protocol with a canned real record (tests/data/records/gpu-box.rec), so the figures are the
cockpit's own. In one run, each side in its own process for --seconds after every host
delivered a record:

  a) baseline: the fleet service alone, consuming the events (bench.scale.measure_fleet);
  b) the watcher: the same fleet plus the monitor (trackers, judgements, alert latch), the
     SQLite store (samples, events, the latest record), the follower feed and the OpenMetrics
     endpoint, scraped every 15 s over HTTP as Prometheus would.

Prints CPU % of one core and RSS for both and the ratio, the store's size at the end, and
the scrape's median time. Asserts nothing; never part of the tests.

Run: .venv/bin/python -m bench.watch_scale [--hosts 200] [--seconds 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from bench.scale import cpu, measure_fleet, rss_mb, until

SCRAPE_EVERY_S = 15.0
"""Prometheus' default scrape interval."""


async def measure_watch(sweep: Path, seconds: float, sink: TextIO) -> dict[str, Any]:
    """The watcher in this process, as `cockpit watch SWEEP --metrics 127.0.0.1:0` runs it."""
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.watch import daemon, wiring
    from cockpit.services.watch.feed import feed_path

    loaded = load_sweep(sweep)
    db = sweep.parent / "store" / "bench.db"
    options = daemon.WatchOptions(sweep, db_path=db, metrics=("127.0.0.1", 0),
                                  feed_path=feed_path(db))
    log = daemon.JsonLog(sink)
    watch = daemon.Watch(options, loaded, log, open_store=wiring.open_store,
                         deliver_for=lambda _loaded: None, serve_metrics=wiring.serve_metrics)
    runner = asyncio.create_task(watch.forever())
    trackers = watch.monitor.trackers
    await until(lambda: all(t.snapshot for t in trackers.values()), 180)
    out: dict[str, Any] = {"reported": sum(1 for t in trackers.values() if t.snapshot)}
    url = wiring.metrics_url(watch)
    scrapes: list[float] = []
    start_cpu, start = cpu(), time.perf_counter()
    next_scrape = time.monotonic()
    while time.perf_counter() - start < seconds:
        if url and time.monotonic() >= next_scrape:
            began = time.perf_counter()
            body = await asyncio.to_thread(lambda: urllib.request.urlopen(url, timeout=10).read())
            scrapes.append(1000 * (time.perf_counter() - began))
            out["scrape_bytes"] = len(body)
            next_scrape = time.monotonic() + SCRAPE_EVERY_S
        await asyncio.sleep(0.5)
    elapsed = time.perf_counter() - start
    out["cpu_pct"] = 100 * (cpu() - start_cpu) / elapsed
    out["rss_mb"] = rss_mb()
    out["scrape_ms"] = statistics.median(scrapes) if scrapes else None
    watch.stopping.set()
    await runner
    out["db_bytes"] = sum(p.stat().st_size for p in db.parent.iterdir() if p.is_file())
    return out


def child(kind: str, root: Path, seconds: float) -> None:
    sweep = root / "sweep.yaml"
    with open(os.devnull, "w") as sink:
        work = measure_watch(sweep, seconds, sink) if kind == "watch" else measure_fleet(sweep, seconds)
        (root / f"{kind}.json").write_text(json.dumps(asyncio.run(work)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=600.0)
    parser.add_argument("--child", choices=("watch", "fleet"), help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root, args.seconds)
        return 0
    with tempfile.TemporaryDirectory(prefix="cockpit-watch-scale-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "COCKPIT_STATE_DIR": str(root / "state"),
               "COCKPIT_DATA_DIR": str(root / "data")}
        hosts = subprocess.Popen([sys.executable, "-m", "bench.scale", "--child", "hosts",
                                  "--root", str(root), "--hosts", str(args.hosts)], env=env)
        try:
            deadline = time.monotonic() + 120
            while not (root / "READY").exists():
                if time.monotonic() > deadline or hosts.poll() is not None:
                    raise RuntimeError("the fake hosts did not start")
                time.sleep(0.2)
            results = {}
            for kind in ("fleet", "watch"):
                subprocess.run([sys.executable, "-m", "bench.watch_scale", "--child", kind,
                                "--root", str(root), "--seconds", str(args.seconds)],
                               env=env, check=True)
                results[kind] = json.loads((root / f"{kind}.json").read_text())
        finally:
            hosts.terminate()
            hosts.wait(10)
    watch, fleet = results["watch"], results["fleet"]
    print(f"{args.hosts} cheap hosts (asyncssh, canned real records) at 2 s, {args.seconds:.0f} s "
          f"window, {os.cpu_count()} cores")
    print(f"  reported: watcher {watch['reported']}, fleet service {fleet['reported']}")
    print(f"  CPU % of one core: watcher (store + feed + metrics) {watch['cpu_pct']:.1f}%, "
          f"fleet service alone {fleet['cpu_pct']:.1f}% "
          f"({watch['cpu_pct'] / max(fleet['cpu_pct'], 0.01):.2f}x)")
    print(f"  RSS MB (now, peak): watcher {watch['rss_mb'][0]:.0f}, {watch['rss_mb'][1]:.0f}; "
          f"fleet {fleet['rss_mb'][0]:.0f}, {fleet['rss_mb'][1]:.0f} "
          f"({watch['rss_mb'][0] / max(fleet['rss_mb'][0], 0.01):.2f}x)")
    print(f"  store + feed on disk after the window: {watch['db_bytes'] / 1e6:.1f} MB")
    if watch.get("scrape_ms") is not None:
        print(f"  metrics scrape: median {watch['scrape_ms']:.1f} ms, "
              f"{watch.get('scrape_bytes', 0) / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
