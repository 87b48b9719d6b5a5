"""`cockpit billing SWEEP [--json] [--offline]`: the billing view, headless.

Reads the sweep file and asks each platform it uses that has an API (vast.ai, RunPod,
Lambda) for its account, once, with the same bounded read-only clients as the TUI. No SSH:
the cockpit's own column says "not probed (headless)" and the platform's word stands beside
it. Prints per box the price with its unit, what the platform says, orphans (instances on the
account no sweep instance names), the money clocks (balance runway, contract end,
stopped-but-billing) and totals per currency. `--json` prints `cockpit.models.billing.bill_json`
(shape in the README). `--offline` skips the platforms.

Exit 0 (a platform that could not be read is reported in the output, "unknown since T"); 2 on
bad input (no such file, a sweep that does not validate).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cockpit.commands import fail

EXIT_OK = 0


def add_parser(subparsers: Any) -> None:
    """Register `billing`."""
    cmd = subparsers.add_parser(
        "billing", help="what the sweep bills, per currency, with the platforms' own word",
        description="The billing view without the TUI: per box its price (with the unit), "
                    "what the platform API says, orphans on the account, balance runway, "
                    "contract ends, stopped-but-billing storage, and totals per currency.")
    cmd.add_argument("sweep", help="the sweep file")
    cmd.add_argument("--json", action="store_true", help="print JSON (shape in the README)")
    cmd.add_argument("--offline", action="store_true",
                     help="do not ask the platforms' APIs (the sweep's prices only)")


def run(args: argparse.Namespace) -> int:
    """Print the bill; 2 on bad input."""
    import asyncio
    import json
    from pathlib import Path

    from cockpit.models.billing import bill_json
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError
    from cockpit.services.platforms import headless_bill

    path = Path(args.sweep)
    if not path.is_file():
        return fail("billing", f"no sweep file at {path}")
    try:
        loaded = load_sweep(path)
    except ConfigError as exc:
        return fail("billing", str(exc))
    bill = asyncio.run(headless_bill(loaded, offline=args.offline))
    if args.json:
        sys.stdout.write(json.dumps(bill_json(bill), indent=2, ensure_ascii=False) + "\n")
        return EXIT_OK
    _print(loaded.sweep.sweep, bill)
    return EXIT_OK


def _print(sweep: str, bill: Any) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from cockpit.models.billing import per_hour_unit, totals_text
    from cockpit.models.durations import format_duration
    from cockpit.models.text import visible

    console = Console(file=sys.stdout, highlight=False, soft_wrap=True)
    table = Table(title=visible(f"billing: {sweep}"), title_justify="left")
    for column in ("instance", "platform", "now", "platform says", "per hour", "uptime", "so far"):
        table.add_column(column)
    for row in bill.rows:
        rate = row.rate_now
        table.add_row(
            Text(visible(row.instance) + (" (orphan)" if row.orphan else "")),
            Text(visible(row.platform)), Text(visible(row.now)),
            Text(visible(row.platform_says or "-")),
            f"{rate:.2f} {per_hour_unit(row.currency)}" if rate is not None
            else f"- {per_hour_unit(row.currency)}",
            format_duration(row.uptime_s) if row.uptime_s is not None else "-",
            f"{row.so_far:.2f} {row.currency}" if row.so_far is not None else "-")
    console.print(table)
    for clock in bill.clocks:
        console.print(Text(visible(clock.text)))
    for line in bill.unknown:
        console.print(Text(visible(line)))
    for row in bill.rows:
        if row.disagree:
            console.print(Text(visible(f"{row.instance}: {row.disagree}")))
    console.print(Text(f"per hour now: {totals_text(bill.per_hour, '/h')}"))
    if bill.orphans:
        console.print(Text(visible(f"billing, not watched: {', '.join(r.instance for r in bill.orphans)}")))
    if bill.unpriced:
        console.print(Text(visible(f"no price_per_hour in the sweep for: {', '.join(bill.unpriced)}")))


if __name__ == "__main__":  # `python -m cockpit.commands.billing SWEEP ...`
    _parser = argparse.ArgumentParser(prog="cockpit")
    add_parser(_parser.add_subparsers(dest="command", required=True))
    sys.exit(run(_parser.parse_args(["billing", *sys.argv[1:]])))
