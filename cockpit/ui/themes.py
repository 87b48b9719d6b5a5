"""The shipped themes (`themes/*.yaml`), registered with Textual's Theme API.

A theme file names the base colours; Textual derives every `$variable` the TCSS and the
widgets use from them, so no literal colour appears in TCSS or widget code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from textual.theme import Theme

from cockpit.services.config.resources import shipped_dir

DEFAULT_THEME = "cockpit-dark"
_FIELDS = {"name", "primary", "secondary", "warning", "error", "success", "accent", "foreground",
           "background", "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha",
           "variables"}


def load_theme(path: Path) -> Theme:
    """One theme file; a bad one raises ValueError naming the file and the key."""
    data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or "name" not in data or "primary" not in data:
        raise ValueError(f"{path}: a theme needs at least `name` and `primary`")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ValueError(f"{path}: unknown theme key(s): {', '.join(unknown)}")
    return Theme(**data)


def shipped_themes() -> list[Theme]:
    """Every theme in the shipped themes folder, sorted by name."""
    return [load_theme(p) for p in sorted(shipped_dir("themes").glob("*.yaml"))]
