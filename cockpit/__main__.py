"""`python -m cockpit` entry point."""

from __future__ import annotations

from cockpit.cli import main

raise SystemExit(main())
