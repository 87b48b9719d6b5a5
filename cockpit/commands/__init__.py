"""Sub-commands that live in their own module (one per command, so the CLI grows without one
file collecting every subsystem's arguments).

Each module listed in `MODULES` provides `add_parser(subparsers) -> None`, which registers a
sub-command of the same name, and `run(args) -> int`, its exit status. Modules import their
subsystem lazily inside `run`, so `cockpit --help` stays fast and never loads Textual.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any, cast

MODULES: tuple[str, ...] = ("init", "add", "watch", "report", "billing", "mcp")
"""The command modules, in the order `cockpit --help` lists them."""


def register(subparsers: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add every module's sub-command to `subparsers`; return name -> handler."""
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {}
    for name in MODULES:
        module = importlib.import_module(f"cockpit.commands.{name}")
        module.add_parser(subparsers)
        handlers[name] = cast(Callable[[argparse.Namespace], int], module.run)
    return handlers
