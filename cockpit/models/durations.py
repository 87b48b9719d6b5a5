"""Human durations (`15d`, `24h`, `30s`, `90m`) used by profiles and sweep files."""

from __future__ import annotations

import re

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")


def parse_duration(text: str) -> float:
    """Seconds in `text`; raises ValueError with a hint on anything else."""
    match = _RE.match(text)
    if not match:
        raise ValueError(f"expected a duration like 30s, 90m, 24h, 15d or 1w, got {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2)]


def format_duration(seconds: float) -> str:
    """Compact rendering: 1296000 -> '15d', 5400 -> '1h30m', 42 -> '42s'."""
    seconds = round(seconds)
    if seconds < 0:
        return "-" + format_duration(-seconds)
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size or (unit == "s" and not parts):
            count, seconds = divmod(seconds, size)
            parts.append(f"{count}{unit}")
        if len(parts) == 2:
            break
    return "".join(parts)
