"""Lambda Cloud, read-only: the account's instances (Lambda has no prepaid balance).

Endpoint and fields from Lambda's Cloud API reference (docs.lambda.ai, "List running
instances", API v1):

- `GET /api/v1/instances` -> `{"data": [...]}`; per instance `id`, `name`, `status`
  (`booting`, `active`, `unhealthy`, `terminating`, `terminated`, `preempted`), `ip`,
  `instance_type.name`, `instance_type.price_cents_per_hour`,
  `instance_type.specs.storage_gib`, `file_system_names`.

Lambda has no stop state: every listed instance bills until terminated (an "unhealthy" or
Alert instance still bills, platform-facts §2.7). The API gives no balance or credit.

Key: `LAMBDA_API_KEY`, else `api_key = <KEY>` in `~/.lambda_cloud/lambda_keys` (the file
SkyPilot and Lambda's own tooling read). Base URL `https://cloud.lambda.ai`, or
`COCKPIT_LAMBDA_API`.
"""

from __future__ import annotations

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

STATES: dict[str, PlatformState] = {
    "active": "running", "booting": "starting", "unhealthy": "unhealthy",
    "terminating": "running", "terminated": "gone", "preempted": "gone",
}
"""`status` -> what it means for money (terminating still bills until it is gone)."""


class LambdaClient(PlatformClient):
    """The Lambda Cloud account's instances."""

    platform = "lambda"
    env_base = "COCKPIT_LAMBDA_API"
    default_base = "https://cloud.lambda.ai"

    @classmethod
    def key_lookup(cls) -> KeyLookup:
        return KeyLookup("LAMBDA_API_KEY", (Path(".lambda_cloud/lambda_keys"),))

    @classmethod
    def parse_key_file(cls, text: str) -> str | None:
        for line in text.splitlines():
            name, sep, value = line.partition("=")
            if sep and name.strip() == "api_key" and value.strip():
                return value.strip()
        return None

    async def _fetch(self, client: httpx.AsyncClient, now: float) -> Account:
        rows = rows_of(await self.request_json(client, "GET", f"{self.base}/api/v1/instances"),
                       "data", "the instance list")
        return Account(self.platform, self.currency, tuple(self._instance(r) for r in rows))

    def _instance(self, row: dict[str, Any]) -> PlatformInstance:
        iid = text_field(require(row, "id", " in an instance"))
        where = f" in instance {iid}"
        raw = text_field(require(row, "status", where))
        kind = require(row, "instance_type", where)
        if not isinstance(kind, dict):
            raise PlatformError(f"field 'instance_type' is not an object{where}")
        cents = number(kind, "price_cents_per_hour", required=True, where=where)
        raw_specs = kind.get("specs")
        specs: dict[str, Any] = raw_specs if isinstance(raw_specs, dict) else {}
        return PlatformInstance(
            self.platform, iid, text_field(row.get("name") or ""),
            STATES.get(raw.lower(), "other"), raw, self.currency,
            None if cents is None else cents / 100.0,
            disk_gb=number(specs, "storage_gib", where=where),
            ssh_host=text_field(row.get("ip") or ""), ssh_port=22 if row.get("ip") else None)
