"""`cockpit report SWEEP [--since 24h] [--json] [--db PATH]`: a post-mortem from the store.

Reads only the sweep's store (no SSH, never the boxes): per box its cost so far, time
unreachable and idle, and a dated timeline of its cells (started, progress, finished, failed
with the cause), its episodes (stalled, idle burn, unreachable) and its alerts with how each
channel took them. `--json` prints the shape documented in `cockpit.services.store.timeline`.

SWEEP is the sweep file, or only the sweep's name when the file is not at hand (on the
always-on machine the store may be all there is). Exit 0; 2 on bad input: no such store (the
path is named), a sweep file that does not validate, a `--since` that is no duration.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from cockpit.commands import fail

EXIT_OK = 0


def add_parser(subparsers: Any) -> None:
    """Register `report`."""
    cmd = subparsers.add_parser(
        "report", help="post-mortem timeline per box and cell, from the sweep's store",
        description="A dated timeline per box and cell from the sweep's store alone (no SSH): "
                    "started, progress, failed with cause, stalled, idle burn, unreachable, "
                    "alerts and the cost so far.")
    cmd.add_argument("sweep", help="the sweep file, or the sweep's name")
    cmd.add_argument("--since", default=None, metavar="DURATION",
                     help="only the last DURATION before the store's last tick (e.g. 24h, 7d; default: all)")
    cmd.add_argument("--json", action="store_true", help="print JSON (shape in the README)")
    cmd.add_argument("--db", type=Path, default=None,
                     help="the store (default: $XDG_DATA_HOME/cockpit/<sweep>.db)")


def run(args: argparse.Namespace) -> int:
    """Print the report; 2 on bad input (one line naming what is wrong)."""
    import time

    from rich.console import Console

    from cockpit.models.durations import parse_duration
    from cockpit.services.store.db import StoreReader, default_db_path
    from cockpit.services.store.schema import SchemaError
    from cockpit.services.store.timeline import build_timeline, gather, render, to_json

    since_s: float | None = None
    if args.since is not None:
        try:
            since_s = parse_duration(args.since)
        except ValueError as exc:
            return fail("report", f"--since: {exc}")
    names: list[str] | None = None
    sweep_name = str(args.sweep)
    sweep_file = Path(args.sweep)
    if sweep_file.is_file():
        from cockpit.services.config.sweepfile import load_sweep  # pydantic: only when needed
        from cockpit.services.config.yamlfile import ConfigError

        try:
            loaded = load_sweep(sweep_file)
        except ConfigError as exc:
            return fail("report", str(exc))
        sweep_name = loaded.sweep.sweep
        names = [inst.name for inst in loaded.sweep.instances]
    elif args.db is None and ("/" in sweep_name or sweep_name.endswith((".yaml", ".yml"))):
        return fail("report", f"no sweep file at {sweep_file}")
    db = args.db if args.db is not None else default_db_path(sweep_name)
    if not db.is_file():
        return fail("report", f"no store at {db} (run `cockpit watch` or attach to record one, or pass "
                     "--db)")
    try:
        with StoreReader(db) as reader:
            now = time.time()
            last_tick = reader.meta().get("last_tick")
            until = float(last_tick) if last_tick else None
            since = (until if until is not None else now) - since_s if since_s else None
            if names is not None:
                names += [n for n in reader.instances() if n not in names]
            timeline = build_timeline(sweep_name, gather(reader, names, since=since, until=until),
                                      since=since, until=until, generated_at=now)
    except (SchemaError, OSError) as exc:
        return fail("report", str(exc))
    except Exception as exc:  # a damaged file: say so in one line, not a traceback
        return fail("report", f"the store {db} could not be read: {type(exc).__name__}: {exc}")
    if args.json:
        sys.stdout.write(to_json(timeline) + "\n")
    else:
        Console(file=sys.stdout, highlight=False, soft_wrap=True).print(render(timeline), end="")
    return EXIT_OK


if __name__ == "__main__":  # `python -m cockpit.commands.report SWEEP ...`
    _parser = argparse.ArgumentParser(prog="cockpit")
    add_parser(_parser.add_subparsers(dest="command", required=True))
    sys.exit(run(_parser.parse_args(["report", *sys.argv[1:]])))
