"""Sub-commands that live in their own module (one per command, so the CLI grows without one
file collecting every subsystem's arguments).

Each module listed in `MODULES` provides `add_parser(subparsers) -> None`, which registers a
sub-command of the same name, and `run(args) -> int`, its exit status. Modules import their
subsystem lazily inside `run`, so `cockpit --help` stays fast and never loads Textual.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any, cast

MODULES: tuple[str, ...] = ("init", "add", "watch", "report", "billing", "mcp")
"""The command modules, in the order `cockpit --help` lists them."""
EXIT_INPUT = 2
"""Exit status for bad input (a missing or malformed file, a bad option value)."""
MESSAGE_LIMIT = 2000
"""Characters of an error message shown: it may quote a hostile file or a box's text."""


def fail(command: str, message: str) -> int:
    """Write `cockpit COMMAND: message` to stderr with control characters made visible (the
    message may quote a file or a path from a box) and return EXIT_INPUT."""
    from cockpit.models.text import visible

    sys.stderr.write(f"cockpit {command}: {visible(message, one_line=False, limit=MESSAGE_LIMIT)}\n")
    return EXIT_INPUT


def register(subparsers: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add every module's sub-command to `subparsers`; return name -> handler."""
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}
    for name in MODULES:
        module = importlib.import_module(f"cockpit.commands.{name}")
        module.add_parser(subparsers)
        handlers[name] = cast(Callable[[argparse.Namespace], int], module.run)
    return handlers
