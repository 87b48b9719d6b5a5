"""Deliver alerts beyond the terminal: a desktop notification and a webhook.

`notify-send` is used when it is installed (no shell: the text is one argument). The webhook
gets one JSON POST per alert with a timeout and a bounded retry (3 attempts, backing off);
after that it gives up and says so. Delivery never raises into the UI.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.models.alerts import Alert

WEBHOOK_TIMEOUT = 5.0
WEBHOOK_ATTEMPTS = 3
WEBHOOK_BACKOFF = (0.5, 1.0)


@dataclass(frozen=True)
class Delivery:
    """How sending one alert went."""

    desktop: bool | None
    """True sent, False failed, None not configured / not installed."""
    webhook: bool | None
    attempts: int = 0
    error: str = ""


async def desktop(alert: Alert) -> bool | None:
    """`notify-send` when present; None when it is not installed."""
    tool = shutil.which("notify-send")
    if tool is None:
        return None
    try:
        proc = await asyncio.create_subprocess_exec(
            tool, "--app-name=cockpit", alert.text, alert.detail,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL)
        return await asyncio.wait_for(proc.wait(), 5) == 0
    except (OSError, TimeoutError):
        return False


def _post(url: str, body: bytes, timeout: float) -> int:
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "User-Agent": "cockpit"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return int(response.status)


async def webhook(url: str, payload: dict[str, str], *, attempts: int = WEBHOOK_ATTEMPTS,
                  backoff: Sequence[float] = WEBHOOK_BACKOFF,
                  timeout: float = WEBHOOK_TIMEOUT) -> tuple[bool, int, str]:
    """POST `payload` as JSON; (delivered, attempts made, last error)."""
    body = json.dumps(payload, ensure_ascii=False).encode()
    error = ""
    for attempt in range(1, attempts + 1):
        try:
            # Plain blocking HTTP in a thread: no asyncssh object is touched there.
            status = await asyncio.to_thread(_post, url, body, timeout)
            if 200 <= status < 300:
                return True, attempt, ""
            error = f"HTTP {status}"
        except urllib.error.HTTPError as exc:
            error = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError, TimeoutError, ValueError) as exc:
            error = str(getattr(exc, "reason", exc))
        if attempt < attempts:
            await asyncio.sleep(backoff[min(attempt - 1, len(backoff) - 1)])
    return False, attempts, error


async def deliver(alert: Alert, sweep: str, *, webhook_url: str | None,
                  desktop_enabled: bool) -> Delivery:
    """Send one alert everywhere it is configured to go."""
    sent_desktop = await desktop(alert) if desktop_enabled else None
    if not webhook_url:
        return Delivery(sent_desktop, None)
    ok, attempts, error = await webhook(webhook_url, alert.payload(sweep))
    return Delivery(sent_desktop, ok, attempts, error)
