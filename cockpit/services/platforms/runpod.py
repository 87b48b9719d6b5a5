"""RunPod, read-only: the account's pods (REST) and its balance (GraphQL).

Endpoints and fields from runpod/runpodctl (`internal/api/pods.go` `ListPods`,
`internal/api/gpu.go` `GetUser`, `internal/configenv`) and docs.runpod.io (REST "List Pods",
GraphQL "myself"):

- `GET {rest}/pods` -> a list of pods; per pod `id`, `name`, `desiredStatus` (`RUNNING`,
  `EXITED`, `TERMINATED`), `costPerHr` (a number, or a string such as "0.74"),
  `containerDiskInGb`, `volumeInGb`, `networkVolumeId`, `lastStartedAt` (ISO time).
- `POST {graphql}` `query { myself { clientBalance currentSpendPerHr } }` -> the balance
  and the account's own burn rate, USD.

A stopped (EXITED) pod bills its volume disk at $0.20/GB/month (twice the running rate,
platform-facts §2.9): `STOPPED_VOLUME_USD_PER_GB_MONTH`.

Key: `RUNPOD_API_KEY`, else `apiKey` in `~/.runpod/config.toml` (what `runpodctl config` /
`runpodctl doctor` writes). Base URLs `https://rest.runpod.io/v1` (`COCKPIT_RUNPOD_API`) and
`https://api.runpod.io/graphql` (`COCKPIT_RUNPOD_GRAPHQL_API`).
"""

from __future__ import annotations

import datetime as dt
import os
import tomllib
from pathlib import Path
from typing import Any

import httpx

from cockpit.models.billing import Account, PlatformInstance, PlatformState
from cockpit.services.platforms.base import (
    KeyLookup,
    PlatformClient,
    PlatformError,
    number,
    require,
    rows_of,
    text_field,
)

STOPPED_VOLUME_USD_PER_GB_MONTH = 0.20
"""What a stopped pod's volume disk bills (platform-facts §2.9, verified 2026-06)."""
HOURS_PER_MONTH = 730.0

BALANCE_QUERY = "query cockpitBalance { myself { clientBalance currentSpendPerHr } }"
"""Read-only: the fields runpodctl's `GetUser` reads for the balance."""

STATES: dict[str, PlatformState] = {
    "RUNNING": "running", "CREATED": "starting", "RESTARTING": "starting",
    "EXITED": "stopped", "PAUSED": "stopped", "DEAD": "stopped",
    "TERMINATED": "gone",
}
"""`desiredStatus` -> what it means for money."""


def _epoch(value: object) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")[:40]).timestamp()
    except ValueError:
        return None


class RunPodClient(PlatformClient):
    """The RunPod account: pods and the client balance."""

    platform = "runpod"
    env_base = "COCKPIT_RUNPOD_API"
    default_base = "https://rest.runpod.io/v1"
    env_graphql = "COCKPIT_RUNPOD_GRAPHQL_API"
    default_graphql = "https://api.runpod.io/graphql"

    def __init__(self, key: Any, *, base: str | None = None, graphql: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(key, base=base, transport=transport)
        self.graphql = graphql or os.environ.get(self.env_graphql) or self.default_graphql

    @classmethod
    def key_lookup(cls) -> KeyLookup:
        return KeyLookup("RUNPOD_API_KEY", (Path(".runpod/config.toml"),))

    @classmethod
    def parse_key_file(cls, text: str) -> str | None:
        try:
            value = tomllib.loads(text).get("apiKey")
        except tomllib.TOMLDecodeError:
            return None
        return value.strip() if isinstance(value, str) and value.strip() else None

    async def _fetch(self, client: httpx.AsyncClient, now: float) -> Account:
        pods = rows_of(await self.request_json(client, "GET", f"{self.base}/pods"), None,
                       "the pod list")
        instances = tuple(self._pod(pod, now) for pod in pods)  # a bad pod fails before the 2nd call
        answer = await self.request_json(client, "POST", self.graphql, body={"query": BALANCE_QUERY})
        if not isinstance(answer, dict):
            raise PlatformError("the GraphQL answer is not an object")
        if answer.get("errors"):
            first = answer["errors"][0] if isinstance(answer["errors"], list) else answer["errors"]
            message = first.get("message") if isinstance(first, dict) else first
            raise PlatformError(f"GraphQL error: {text_field(message)}")
        me = (answer.get("data") or {}).get("myself") if isinstance(answer.get("data"), dict) else None
        if not isinstance(me, dict):
            raise PlatformError("field 'data.myself' missing in the GraphQL answer (the key's "
                                "scope, or the API changed?)")
        balance = number(me, "clientBalance", required=True, where=" in myself")
        spend = number(me, "currentSpendPerHr", where=" in myself")
        return Account(self.platform, self.currency, instances, balance=balance,
                       spend_per_hour=spend)

    def _pod(self, pod: dict[str, Any], now: float) -> PlatformInstance:
        iid = text_field(require(pod, "id", " in a pod"))
        where = f" in pod {iid}"
        raw = text_field(require(pod, "desiredStatus", where))
        state: PlatformState = STATES.get(raw.upper(), "other")
        price = number(pod, "costPerHr", required=True, where=where)
        container = number(pod, "containerDiskInGb", where=where) or 0.0
        volume = number(pod, "volumeInGb", where=where) or 0.0
        started = _epoch(pod.get("lastStartedAt"))
        return PlatformInstance(
            self.platform, iid, text_field(pod.get("name") or ""), state, raw, self.currency,
            price, uptime_s=max(0.0, now - started) if started and state == "running" else None,
            disk_gb=container + volume,
            storage_per_hour=volume * STOPPED_VOLUME_USD_PER_GB_MONTH / HOURS_PER_MONTH,
            network_volume=bool(pod.get("networkVolumeId")))
