"""`cockpit watch SWEEP`: alerts and history with no terminal open (see services/watch/daemon)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def parse_listen(text: str) -> tuple[str, int]:
    """`--metrics HOST:PORT` (loopback unless a host is named), as argparse's type."""
    from cockpit.services.metrics.endpoint import BindError, parse_bind

    try:
        return parse_bind(text)
    except BindError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_parser(subparsers: Any) -> None:
    """Register `watch`."""
    cmd = subparsers.add_parser(
        "watch", help="watch a sweep headless for weeks: store history, send alerts",
        description="Run the fleet service with no TUI: one JSON log line per event on stdout, "
                    "history in the sweep's store, alerts through the configured channels. "
                    "SIGTERM/SIGINT stop it; SIGHUP re-reads the sweep file.")
    cmd.add_argument("sweep", type=Path, help="the sweep file")
    cmd.add_argument("--once", action="store_true",
                     help="one round (a record from every box, alerts sent) then exit: for cron; "
                          "exit 1 while any alert is open")
    cmd.add_argument("--db", type=Path, default=None,
                     help="the store (default: $XDG_DATA_HOME/cockpit/<sweep>.db)")
    cmd.add_argument("--metrics", type=parse_listen, default=None, metavar="HOST:PORT",
                     help="serve OpenMetrics for Prometheus here (loopback unless a host is given)")
    cmd.add_argument("--print-systemd-unit", action="store_true",
                     help="print a systemd --user unit that runs this watcher, and exit")


def run(args: argparse.Namespace) -> int:
    """Run the watcher (or print its unit); 2 on an invalid sweep, with file, line and field."""
    import asyncio

    from cockpit.models.text import visible
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError
    from cockpit.services.watch import daemon, wiring

    try:
        loaded = load_sweep(args.sweep)
    except ConfigError as exc:
        sys.stderr.write(visible(str(exc), one_line=False, limit=0) + "\n")
        return daemon.EXIT_INPUT
    if args.print_systemd_unit:
        extra: list[str] = []
        if args.db is not None:
            extra += ["--db", str(args.db.resolve())]
        if args.metrics is not None:
            extra += ["--metrics", f"{args.metrics[0]}:{args.metrics[1]}"]
        sys.stdout.write(daemon.systemd_unit(args.sweep, extra=extra))
        return daemon.EXIT_OK
    from cockpit.services.watch.feed import feed_path

    db = wiring.store_path(loaded, args.db)
    options = daemon.WatchOptions(args.sweep, once=args.once, db_path=db, metrics=args.metrics,
                                  feed_path=None if args.once else feed_path(db))
    log = daemon.JsonLog(sys.stdout)
    watch = daemon.Watch(options, loaded, log, open_store=wiring.open_store,
                         deliver_for=wiring.deliver_for, serve_metrics=wiring.serve_metrics)
    try:
        if args.once:
            return asyncio.run(watch.once())
        return asyncio.run(watch.forever())
    except daemon.WatcherRunning as exc:
        log("error", what="another watcher already writes this sweep's store", reason=str(exc))
        return daemon.EXIT_INPUT
