"""Deliver alerts beyond the terminal: a desktop notification, a webhook, apprise channels.

`notify-send` is used when it is installed (no shell: the text is one argument). The webhook
gets one JSON POST per alert with a timeout and a bounded retry (3 attempts, backing off);
after that it gives up and says so. Delivery never raises into the UI.

The sweep's `alerts.notify` URLs go through apprise (Slack, Feishu/Lark, DingTalk, WeCom,
Telegram, Discord, ntfy, e-mail, plain JSON, ...). One object serves every channel:

    notifier = Notifier(loaded.sweep.alerts, loaded.sweep.sweep)
    results = await notifier.deliver(alert)      # list[ChannelResult], never raises

- **Message**: `Alert.message` — short plain text (box, cell, what happened, what to do),
  remote text made visible, sent with apprise's TEXT body format (never markup).
- **One per episode** is the caller's `AlertLatch`; on top of it each channel sends at most
  `RATE_LIMIT` messages per `RATE_WINDOW_S`. An alert over the limit is not sent on that
  channel (its result says `ok=None`, "rate limit"); the next message that goes out there says
  how many were held back ("+K more alerts held back by the rate limit").
- **Results**: one `ChannelResult` per channel: a label with every secret removed (`redact`:
  `slack://…`, `json://host:port/…`), ok, attempts and the error, itself scrubbed of the URL's
  secrets. Nothing here prints or logs a URL; apprise's and urllib3's own log records are
  scrubbed of every configured URL's secrets (apprise logs the DingTalk token in its debug
  lines, urllib3 every request's query string).
- apprise is synchronous: each send runs in a thread (no asyncssh object is touched there)
  under `NOTIFY_TIMEOUT`, `NOTIFY_ATTEMPTS` times at most; the channels of one alert go out
  concurrently, so a slow one delays no other.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import shutil
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from cockpit.models.alerts import Alert
from cockpit.models.sweep import AlertSettings
from cockpit.models.text import visible

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


# -- apprise channels ------------------------------------------------------------------------

NOTIFY_TIMEOUT = 15.0
"""Seconds one apprise send may take (its own call deadline). Chat webhooks answer in well
under a second; e-mail over a slow SMTP server takes a few."""
NOTIFY_ATTEMPTS = 2
"""Sends per alert and channel: one retry covers a dropped connection; more would only pile
up behind a channel that is down (the next alert tries again anyway)."""
NOTIFY_BACKOFF = 2.0
"""Seconds between the two attempts."""
RATE_LIMIT = 5
"""Messages one channel gets per `RATE_WINDOW_S`: a fleet that fails at once (a shared
volume fills, a region drops) must not send a phone thirty messages in a minute."""
RATE_WINDOW_S = 60.0
MAX_ERROR = 300
"""Characters kept of a channel's error (apprise's log lines quote server responses)."""
MIN_SECRET = 6
"""Shortest URL part scrubbed from errors and log records: tokens, passwords and webhook
ids are longer; scrubbing every short path word (`send`, `hook`) would garble the text."""
SCRUBBED_LOGGERS = ("apprise", "urllib3.connectionpool")
"""Loggers whose records may quote a URL: apprise's plugins log the URL they post to (the
DingTalk token in its query), urllib3 logs each request line."""

_HOST_SCHEMES = frozenset({"json", "jsons", "form", "forms", "xml", "xmls", "http", "https"})
"""Schemes whose host part is a server, safe to show; in most others (`slack://T…/B…/X…`,
`dingtalk://TOKEN`, `tgram://BOT_TOKEN/CHAT`) the 'host' is itself a token."""
_PIECES = re.compile(r"[/@:?&=#,;+\s]+")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,31}")
_HOST = re.compile(r"[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]")


@dataclass(frozen=True)
class ChannelResult:
    """How one alert went out on one channel."""

    channel: str
    """The channel's label with every secret removed (`slack://…`, `webhook https://host/…`)."""
    ok: bool | None
    """True delivered, False failed, None not sent (held back by the rate limit)."""
    attempts: int = 0
    error: str = ""
    """Why it failed or was not sent, scrubbed of the URL's secrets ("" when delivered)."""


def _pieces(url: str) -> list[str]:
    rest = url.partition("://")[2]
    found = []
    for piece in _PIECES.split(rest):
        found.append(piece)
        unquoted = urllib.parse.unquote(piece)
        if unquoted != piece:
            found.append(unquoted)
    return found


def _shown_host(url: str) -> str | None:
    """The server of a host scheme's URL, when it can be shown without any secret in it."""
    try:
        parts = urllib.parse.urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not host or not _HOST.fullmatch(host):
        return None
    if "." not in host and ":" not in host and host != "localhost":
        return None  # a bare word where the host goes (`json://00000001/…`) may be a token
    secrets = [p for p in (parts.username, parts.password, *_PIECES.split(parts.path),
                           *_PIECES.split(parts.query), *_PIECES.split(parts.fragment)) if p]
    # A URL odd enough to confuse the parser (a password holding '/' or '@') could put a
    # secret where the host goes: show the host only if it shares nothing with the rest.
    if any(host in s or s in host for s in secrets):
        return None
    return f"{host}:{port}" if port else host


def redact(url: str) -> str:
    """A label for `url` that holds none of its secrets: the scheme, plus the server for
    schemes whose host is a server (`json://127.0.0.1:8080/…`); `slack://…` otherwise."""
    scheme, sep, _ = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        return "(not a URL)"
    scheme = scheme.lower()
    if scheme in _HOST_SCHEMES:
        host = _shown_host(url)
        if host is not None:
            return f"{scheme}://{host}/…"
    return f"{scheme}://…"


def secrets_of(url: str) -> tuple[str, ...]:
    """The parts of `url` that may be secret (user, password, tokens in host, path, query),
    longest first, `MIN_SECRET` characters or more; the shown server and scheme excluded."""
    scheme = url.partition("://")[0].lower()
    host = _shown_host(url) if scheme in _HOST_SCHEMES else None
    shown = set(host.split(":")) if host else set()
    found = {p for p in _pieces(url) if len(p) >= MIN_SECRET and p not in shown}
    return tuple(sorted(found, key=len, reverse=True))


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret replaced by `…`."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "…")
    return text


class _Scrubber(logging.Filter):
    """Rewrites a log record with every registered secret removed (message, args, traceback)."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: tuple[str, ...] = ()

    def add(self, secrets: Iterable[str]) -> None:
        with self._lock:
            merged = set(self._secrets) | set(secrets)
            self._secrets = tuple(sorted(merged, key=len, reverse=True))

    @property
    def secrets(self) -> tuple[str, ...]:
        return self._secrets

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self._secrets
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not fit its format: drop the args
            message = str(record.msg)
        record.msg, record.args = scrub(message, secrets), ()
        if record.exc_info:
            record.exc_text = scrub(logging.Formatter().formatException(record.exc_info), secrets)
            record.exc_info = None
        return True


_SCRUBBER = _Scrubber()
for _name in SCRUBBED_LOGGERS:
    logging.getLogger(_name).addFilter(_SCRUBBER)
# A library without a handler of its own falls back to Python's last-resort handler, which
# prints WARNING lines on stderr (over the TUI); the watcher's results carry the errors.
logging.getLogger("apprise").addHandler(logging.NullHandler())


class RateLimit:
    """At most `limit` sends per `window` seconds; counts what it held back."""

    def __init__(self, limit: int = RATE_LIMIT, window: float = RATE_WINDOW_S) -> None:
        self.window = window
        self.sent: deque[float] = deque(maxlen=limit)
        self.held = 0
        """Alerts not sent since the last message that went out."""

    def take(self, now: float) -> bool:
        """Reserve a send now (True), or count one more held back (False)."""
        if len(self.sent) == self.sent.maxlen and now - self.sent[0] < self.window:
            self.held += 1
            return False
        self.sent.append(now)
        return True


def _held_note(held: int) -> str:
    return (f"\n(+{held} more alert{'s' if held != 1 else ''} held back by the rate limit: "
            f"see the cockpit)") if held else ""


def _apprise_send(url: str, body: str, timeout: float) -> tuple[bool, str]:
    """One apprise send, blocking: (delivered, error). Run in a thread."""
    import apprise  # ~0.2 s to load its plugins: only a sweep with `notify` URLs pays

    hub = apprise.Apprise()
    if not hub.add(url):
        return False, "apprise could not load this URL"
    result = hub.notify(body=body, title="", body_format=apprise.NotifyFormat.TEXT,
                        timeout=timeout)
    try:
        if result:
            return True, ""
        lines = [entry.message for entry in result.logs()]
        return False, "; ".join(lines) or result.status.name.lower()
    finally:
        result.close()


SendOnce = Callable[[str], Awaitable[tuple[bool, str]]]
"""Sends one message body on one channel: (delivered, error)."""


@dataclass
class _Channel:
    label: str
    secrets: tuple[str, ...]
    limit: RateLimit


class Notifier:
    """Every channel of one sweep (desktop, webhook, apprise URLs) with its rate limit.

    Holds state across alerts (the rate limits), so the watcher and the TUI keep one per
    sweep; build a new one when the sweep is re-read.
    """

    def __init__(self, settings: AlertSettings, sweep: str, *,
                 clock: Callable[[], float] = time.monotonic,
                 timeout: float = NOTIFY_TIMEOUT, attempts: int = NOTIFY_ATTEMPTS,
                 backoff: float = NOTIFY_BACKOFF, rate_limit: int = RATE_LIMIT,
                 rate_window: float = RATE_WINDOW_S) -> None:
        self.settings = settings
        self.sweep = sweep
        self.clock = clock
        self.timeout = timeout
        self.attempts = max(1, attempts)
        self.backoff = backoff
        self._urls = list(settings.notify)
        self._channels = [_Channel(f"{redact(u)} #{i + 1}" if self._twin(u) else redact(u),
                                   secrets_of(u), RateLimit(rate_limit, rate_window))
                          for i, u in enumerate(self._urls)]
        self._webhook = (_Channel(f"webhook {redact(settings.webhook)}", secrets_of(settings.webhook),
                                  RateLimit(rate_limit, rate_window)) if settings.webhook else None)
        self._desktop = _Channel("desktop", (), RateLimit(rate_limit, rate_window))
        for channel in [*self._channels, *([self._webhook] if self._webhook else [])]:
            _SCRUBBER.add(channel.secrets)

    def _twin(self, url: str) -> bool:
        return sum(redact(u) == redact(url) for u in self._urls) > 1

    @property
    def labels(self) -> list[str]:
        """The configured channels' labels (no secrets), for a status line."""
        out = ["desktop"] if self.settings.desktop else []
        out += [self._webhook.label] if self._webhook else []
        return out + [c.label for c in self._channels]

    async def deliver(self, alert: Alert) -> list[ChannelResult]:
        """Send `alert` on every channel, concurrently; one result per channel tried.

        Never raises. The desktop channel gives no result where `notify-send` is missing."""
        jobs: list[Awaitable[ChannelResult | None]] = []
        if self.settings.desktop:
            jobs.append(self._desktop_job(alert))
        if self._webhook is not None and self.settings.webhook:
            jobs.append(self._webhook_job(alert, self._webhook, self.settings.webhook))
        for channel, url in zip(self._channels, self._urls, strict=True):
            jobs.append(self._apprise_job(alert, channel, url))
        done = await asyncio.gather(*jobs, return_exceptions=True)
        out: list[ChannelResult] = []
        for result in done:
            if isinstance(result, ChannelResult):
                out.append(result)
            elif isinstance(result, BaseException):  # a bug here must not stop the caller
                out.append(ChannelResult("(internal)", False, 0,
                                         visible(f"{type(result).__name__}: {result}"[:MAX_ERROR])))
        return out

    def _held(self, channel: _Channel) -> ChannelResult:
        return ChannelResult(channel.label, None, 0,
                             f"rate limit: at most {channel.limit.sent.maxlen} messages per "
                             f"{channel.limit.window:.0f}s on this channel; "
                             f"{channel.limit.held} held back")

    async def _desktop_job(self, alert: Alert) -> ChannelResult | None:
        if not self._desktop.limit.take(self.clock()):
            return self._held(self._desktop)
        self._desktop.limit.held = 0
        sent = await desktop(alert)
        return None if sent is None else ChannelResult("desktop", sent, 1,
                                                       "" if sent else "notify-send failed")

    async def _webhook_job(self, alert: Alert, channel: _Channel, url: str) -> ChannelResult:
        if not channel.limit.take(self.clock()):
            return self._held(channel)
        held, channel.limit.held = channel.limit.held, 0
        payload = alert.payload(self.sweep)
        if held:
            payload["held_back"] = str(held)
        ok, attempts, error = await webhook(url, payload)
        if not ok:
            channel.limit.held += held
        return ChannelResult(channel.label, ok, attempts, self._clean(error, channel))

    async def _apprise_job(self, alert: Alert, channel: _Channel, url: str) -> ChannelResult:
        if not channel.limit.take(self.clock()):
            return self._held(channel)
        held, channel.limit.held = channel.limit.held, 0
        body = alert.message(self.sweep) + _held_note(held)
        error = ""
        for attempt in range(1, self.attempts + 1):
            try:
                # Plain blocking HTTP in a thread: no asyncssh object is touched there. The
                # outer deadline guards against a plugin that ignores apprise's own.
                ok, error = await asyncio.wait_for(
                    asyncio.to_thread(_apprise_send, url, body, self.timeout), self.timeout + 5)
            except TimeoutError:
                ok, error = False, f"no answer in {self.timeout:.0f}s"
            except Exception as exc:  # apprise or a plugin raised: a failed send, not a crash
                ok, error = False, f"{type(exc).__name__}: {exc}"
            if ok:
                return ChannelResult(channel.label, True, attempt)
            if attempt < self.attempts:
                await asyncio.sleep(self.backoff)
        channel.limit.held += held
        return ChannelResult(channel.label, False, self.attempts, self._clean(error, channel))

    @staticmethod
    def _clean(error: str, channel: _Channel) -> str:
        return visible(scrub(error, channel.secrets), limit=MAX_ERROR)
