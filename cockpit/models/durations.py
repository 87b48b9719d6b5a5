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


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B?|B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """Bytes in `500M`, `2G`, `1.5TiB`, `4096` (binary units); ValueError with a hint otherwise."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"expected a size like 500M, 2G or 1.5T, got {text!r}")
    unit = (match.group(2) or "").upper()[:1]
    return int(float(match.group(1)) * _SIZE_UNITS[unit])


def format_bytes(count: float) -> str:
    """`512 B`, `3.0 KiB`, `1.5 GiB` (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"
