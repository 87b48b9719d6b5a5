"""Find the shipped `profiles/` and `themes/` folders in a wheel or an editable checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[2]


def shipped_dir(name: str) -> Path:
    """`profiles` or `themes`: inside the wheel as `cockpit/_<name>`, else the repo root."""
    packaged = _PACKAGE / f"_{name}"
    if packaged.is_dir():
        return packaged
    checkout = _PACKAGE.parent / name
    if checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"cannot find the shipped {name}/ folder next to {_PACKAGE}")
