"""`cockpit init SWEEP`: write a commented starter sweep file (never over an existing one)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_INVALID = 0, 2


def add_parser(subparsers: Any) -> None:
    """Register `init`."""
    cmd = subparsers.add_parser(
        "init", help="write a commented starter sweep file",
        description="Write SWEEP: a sweep file with every common key commented and no instance "
                    "yet; add boxes with `cockpit add`. Refuses to overwrite (exit 2).")
    cmd.add_argument("sweep", type=Path, help="the sweep file to create")
    cmd.add_argument("--name", default=None,
                     help="the sweep's name (default: from the file name)")
    cmd.add_argument("--json", action="store_true", help="print a JSON document")


def run(args: argparse.Namespace) -> int:
    """Create the file; 2 when it exists, the folder is missing, or the name is invalid."""
    from cockpit.models.text import json_text, visible
    from cockpit.services.config.sweepwrite import starter_text, sweep_name_for, write_new

    path: Path = args.sweep
    name = args.name or sweep_name_for(path)
    try:
        write_new(path, starter_text(name, str(path)))
    except FileExistsError:
        sys.stderr.write(visible(f"{path} already exists: nothing written (init never "
                                 "overwrites; use `cockpit add` to add to it)", limit=0) + "\n")
        return EXIT_INVALID
    except (ValueError, OSError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        sys.stderr.write(visible(f"{path}: {reason}", limit=0) + "\n")
        return EXIT_INVALID
    if args.json:
        sys.stdout.write(json_text({"sweep": str(path), "name": name, "created": True}) + "\n")
    else:
        sys.stdout.write(visible(
            f"wrote {path} (sweep {name!r}); next: cockpit add {path} 'ssh -p PORT USER@HOST' "
            "--profile PROFILE --name NAME", limit=0) + "\n")
    return EXIT_OK
