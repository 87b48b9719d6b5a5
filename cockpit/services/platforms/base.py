"""What every read-only platform client shares: the key, the base URL, bounded HTTP, errors.

- **The key** comes from an environment variable or the platform CLI's own config file
  (each client names both). It lives in an `ApiKey`, whose `repr` and `str` are `***`, is
  sent only in an `Authorization` header (never in a URL, which httpx quotes in its
  exceptions), and is never logged, stored or shown. Any error text is scrubbed of it anyway.
- **The base URL** is the platform's, or `COCKPIT_<PLATFORM>_API` (tests, proxies).
- **Bounded**: per-phase timeouts (`TIMEOUT`), at most `MAX_RESPONSE_BYTES` of body read
  (streamed and cut, so a huge answer cannot fill memory), `MAX_INSTANCES` rows parsed,
  `MAX_PAGES` pages followed, and every text field cut to `MAX_FIELD` characters.
- **Errors are first-class**: 401/403, 429 (with Retry-After), 5xx, timeouts, connection
  errors, malformed JSON and a missing or renamed field all end in a `PlatformTruth` without an
  account and with the reason; never an exception out of `poll`, never a guessed value.

Nothing here mutates a platform: every request is a GET or a read-only GraphQL query.
"""

from __future__ import annotations

import json
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from cockpit.models.billing import Account, PlatformTruth
from cockpit.models.text import visible

TIMEOUT = httpx.Timeout(10.0, connect=5.0)
"""Seconds per phase (connect 5, read/write/pool 10): a platform API answers in well under a
second; longer means it is down, and the billing view must not wait on it."""
MAX_RESPONSE_BYTES = 4 * 1024 * 1024
"""Bytes of one response body read: an account with hundreds of instances is ~1 MB of JSON
(vast.ai rows are ~3 KB each); more is a broken or hostile server, cut and reported."""
MAX_INSTANCES = 500
"""Instances parsed per account: more than any sweep rents; the rest are counted, not parsed."""
MAX_PAGES = 20
"""Pages followed on a paginated list (vast.ai v1 pages by 25 by default; we ask for 100)."""
MAX_FIELD = 200
"""Characters kept of any text field from an API (names, labels, states, hosts)."""
MAX_KEY_FILE = 4096
"""Bytes read of a CLI's key/config file: a key is ~64 characters, a config a few lines."""
MAX_RETRY_AFTER_S = 3600.0
"""The longest Retry-After honoured: a larger value is shown as this (the next poll waits)."""
USER_AGENT = "cockpit-platform-truth (read-only)"


class ApiKey:
    """A secret that never prints: `repr`/`str` give `***`; `reveal()` is for the header only."""

    __slots__ = ("_secret", "source")

    def __init__(self, secret: str, source: str) -> None:
        self._secret = secret
        self.source = source
        """Where it came from (`VAST_API_KEY`, `~/.runpod/config.toml`): safe to show."""

    def reveal(self) -> str:
        """The secret itself, for the Authorization header and nothing else."""
        return self._secret

    def __repr__(self) -> str:
        return f"ApiKey(***, from {self.source})"

    __str__ = __repr__


class PlatformError(Exception):
    """Why a poll produced no account (the text the views show after "unknown since T")."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


def read_bounded(path: Path) -> str | None:
    """The first MAX_KEY_FILE bytes of a file as text, or None when it cannot be read."""
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_KEY_FILE).decode("utf-8", "replace")
    except OSError:
        return None


def text_field(value: object) -> str:
    """A text field from an API, made visible and cut to MAX_FIELD (it is untrusted data)."""
    return visible("" if value is None else str(value), limit=MAX_FIELD)


def number(row: Mapping[str, Any], key: str, *, required: bool = False,
           where: str = "") -> float | None:
    """A numeric field (RunPod's REST gives some prices as strings: "0.74").

    Missing or null: None, or a PlatformError when `required` (a renamed field must say so,
    not read as zero). Present but not a number: always a PlatformError."""
    if key not in row or row[key] is None:
        if required:
            raise PlatformError(f"field {key!r} missing{where} (the API changed?)")
        return None
    value = row[key]
    if isinstance(value, bool):
        raise PlatformError(f"field {key!r} is not a number{where}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise PlatformError(f"field {key!r} is not a number{where}")


def require(row: Mapping[str, Any], key: str, where: str = "") -> Any:
    """A field that must be there (an id, a state): its absence is a PlatformError."""
    if key not in row or row[key] is None:
        raise PlatformError(f"field {key!r} missing{where} (the API changed?)")
    return row[key]


def retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), capped."""
    if not value:
        return None
    value = value.strip()[:64]
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return max(0.0, min(seconds, MAX_RETRY_AFTER_S))


@dataclass(frozen=True)
class KeyLookup:
    """Where a platform's key is looked for, in order (documented in the README)."""

    env: str
    files: tuple[Path, ...]


class PlatformClient(ABC):
    """One platform's read-only client. Subclasses set the names and implement `_fetch`."""

    platform: str = ""
    """The profile `platform` this client serves (`vastai`, `runpod`, `lambda`)."""
    env_base: str = ""
    """`COCKPIT_<PLATFORM>_API`: overrides `default_base`."""
    default_base: str = ""
    currency: str = "USD"
    """Every one of these platforms bills in US dollars."""

    def __init__(self, key: ApiKey | None, *, base: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.key = key
        self.base = (base or os.environ.get(self.env_base) or self.default_base).rstrip("/")
        self._transport = transport

    @classmethod
    @abstractmethod
    def key_lookup(cls) -> KeyLookup:
        """Where this platform's CLI keeps the key."""

    @classmethod
    def find_key(cls, environ: Mapping[str, str] | None = None,
                 home: Path | None = None) -> ApiKey | None:
        """The user's key from the environment variable, else the CLI's config file."""
        env = os.environ if environ is None else environ
        lookup = cls.key_lookup()
        value = env.get(lookup.env, "").strip()
        if value:
            return ApiKey(value, lookup.env)
        home = home or Path.home()
        for path in lookup.files:
            full = path if path.is_absolute() else home / path
            text = read_bounded(full)
            if text is None:
                continue
            secret = cls.parse_key_file(text)
            if secret:
                return ApiKey(secret, f"~/{path}" if not path.is_absolute() else str(path))
        return None

    @classmethod
    def parse_key_file(cls, text: str) -> str | None:
        """The key in the CLI's file (default: the whole file is the key)."""
        secret = text.strip()
        return secret if secret and "\n" not in secret else None

    def _headers(self) -> dict[str, str]:
        assert self.key is not None
        return {"Authorization": f"Bearer {self.key.reveal()}", "Accept": "application/json",
                "User-Agent": USER_AGENT}

    def _scrub(self, text: str) -> str:
        if self.key is not None and self.key.reveal():
            text = text.replace(self.key.reveal(), "***")
        return visible(text, limit=300)

    async def request_json(self, client: httpx.AsyncClient, method: str, url: str, *,
                           params: Mapping[str, str] | None = None,
                           body: Mapping[str, Any] | None = None) -> Any:
        """One request, its body read up to MAX_RESPONSE_BYTES, parsed as JSON.

        Raises PlatformError naming the class of failure (never the key)."""
        try:
            async with client.stream(method, url, params=params, json=body,
                                     headers=self._headers()) as response:
                status = response.status_code
                if status in (401, 403):
                    raise PlatformError(f"{status} unauthorized: check the API key "
                                        f"({self.key.source if self.key else 'none'})")
                if status == 429:
                    wait = retry_after(response.headers.get("Retry-After"))
                    after = f", retry after {wait:.0f} s" if wait is not None else ""
                    raise PlatformError(f"429 rate limited{after}", wait)
                if status >= 500:
                    raise PlatformError(f"{status} server error at the platform")
                if status >= 400:
                    raise PlatformError(f"{status} refused")
                chunks: list[bytes] = []
                size = 0
                async for chunk in response.aiter_bytes():
                    size += len(chunk)
                    if size > MAX_RESPONSE_BYTES:
                        raise PlatformError(f"response over {MAX_RESPONSE_BYTES} bytes: cut")
                    chunks.append(chunk)
        except httpx.TimeoutException:
            raise PlatformError(f"timeout after {TIMEOUT.read:.0f} s") from None
        except httpx.HTTPError as exc:
            raise PlatformError(self._scrub(f"connection failed: {type(exc).__name__}")) from None
        try:
            return json.loads(b"".join(chunks))
        except (ValueError, UnicodeDecodeError):
            raise PlatformError("malformed JSON in the response") from None

    def client(self) -> httpx.AsyncClient:
        """An httpx client with the bounded timeouts (and a test transport when given)."""
        return httpx.AsyncClient(timeout=TIMEOUT, transport=self._transport,
                                 follow_redirects=False)

    async def poll(self, now: float | None = None) -> PlatformTruth:
        """The account now, or why it is unknown. Never raises; never blocks past TIMEOUT
        per request."""
        at = time.time() if now is None else now
        if self.key is None:
            lookup = self.key_lookup()
            files = ", ".join(f"~/{p}" for p in lookup.files)
            return PlatformTruth(self.platform, at, None,
                                 f"no API key: set {lookup.env} or run the CLI's login "
                                 f"({files})", at)
        try:
            async with self.client() as client:
                account = await self._fetch(client, at)
        except PlatformError as exc:
            return PlatformTruth(self.platform, at, None, self._scrub(exc.reason), at,
                                 exc.retry_after)
        except Exception as exc:  # a parser bug must say so, not end the poller
            return PlatformTruth(self.platform, at, None,
                                 self._scrub(f"client error: {type(exc).__name__}"), at)
        return PlatformTruth(self.platform, at, account)

    @abstractmethod
    async def _fetch(self, client: httpx.AsyncClient, now: float) -> Account:
        """Read the account (raise PlatformError on anything unexpected)."""


def rows_of(document: Any, key: str | None, where: str) -> list[dict[str, Any]]:
    """The list of row objects at `document[key]` (or the document itself), checked."""
    rows = document if key is None else (document.get(key) if isinstance(document, dict) else None)
    if key is not None and isinstance(document, dict) and key in document and rows is None:
        return []  # vast.ai answers {"instances": null} for none
    if not isinstance(rows, list):
        raise PlatformError(f"field {key!r} missing in {where} (the API changed?)" if key
                            else f"{where}: expected a list")
    out = [r for r in rows[:MAX_INSTANCES] if isinstance(r, dict)]
    if len(out) != len(rows[:MAX_INSTANCES]):
        raise PlatformError(f"{where}: a row is not an object")
    return out
