"""`cockpit mcp SWEEP [--db PATH]`: serve the sweep to an AI agent over MCP (stdio).

The agent can read everything, verify and launch/resume/rerun queues, and *request* a
teardown; only a person approves one, on the TUI's teardown screen (see the README's
"Agents (MCP)"). stdout carries the protocol, so every message of ours goes to stderr.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from cockpit.commands import fail


def add_parser(subparsers: Any) -> None:
    """Register `mcp`."""
    cmd = subparsers.add_parser(
        "mcp", help="serve the sweep to an AI agent over MCP (stdio); it can request, never run, a teardown",
        description="A Model Context Protocol server over stdin/stdout. Tools: fleet_status, "
                    "box_detail, failures, log_slice, preflight, billing, teardown_plan, verify, "
                    "launch, resume, rerun, request_teardown, get_request, list_requests. Every "
                    "call is audited in the sweep's store.")
    cmd.add_argument("sweep", type=Path, help="the sweep file")
    cmd.add_argument("--db", type=Path, default=None,
                     help="the store (default: $XDG_DATA_HOME/cockpit/<sweep>.db)")


def run(args: argparse.Namespace) -> int:
    """Serve until the client closes stdin; 2 on a bad sweep file."""
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.config.yamlfile import ConfigError

    try:
        loaded = load_sweep(args.sweep)
    except ConfigError as exc:
        return fail("mcp", str(exc))
    from cockpit.services.agent.server import serve_stdio
    from cockpit.services.watch.wiring import store_path

    serve_stdio(loaded, store_path(loaded, args.db))
    return 0
