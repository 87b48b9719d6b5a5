"""Waiting on live systems in tests: poll a condition, fail naming what never happened."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(what: str, done: Callable[[], bool], seconds: float, step: float = 0.05) -> None:
    """Poll `done` until it is true; after `seconds` fail with `what` (a deadline, not a timing
    assertion: it only bounds how long a broken run hangs)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while not done():
        assert loop.time() < deadline, what
        await asyncio.sleep(step)
