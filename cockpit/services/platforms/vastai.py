"""vast.ai, read-only: the account's instances and its credit.

Endpoints and fields from vast-ai/vast-cli (`vast.py`: `_fetch_all_instances_v1`,
`show__user`, `instance_fields`) and docs.vast.ai ("show instances v1", "show user"):

- `GET /api/v1/instances/?limit=..&order_by=..[&after_token=..]` -> `{"instances": [...],
  "next_token": ...}`; per instance `id`, `actual_status` (null while provisioning;
  `running`, `loading`, `stopped`, `exited`, `frozen`, `offline`, ...), `intended_status`,
  `label`, `dph_total` ($/h in its current contract), `storage_total_cost` ($/h its disk bills,
  stopped or not), `disk_space` (GB), `start_date` (epoch s), `end_date` (contract end, epoch
  s), `ssh_host`, `ssh_port`.
- `GET /api/v0/users/current/` -> the user, with `credit` (prepaid credit left, USD).

Key: `VAST_API_KEY`, else `~/.config/vastai/vast_api_key` (what `vastai set api-key` writes),
else the legacy `~/.vast_api_key`. Base URL `https://console.vast.ai`, or `COCKPIT_VASTAI_API`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from cockpit.models.billing import Account, PlatformInstance, PlatformState
from cockpit.services.platforms.base import (
    MAX_INSTANCES,
    MAX_PAGES,
    KeyLookup,
    PlatformClient,
    PlatformError,
    number,
    require,
    rows_of,
    text_field,
)

PAGE_SIZE = 100
"""Rows per page asked of `/api/v1/instances/` (the CLI asks for 25)."""

STATES: dict[str, PlatformState] = {
    "running": "running", "loading": "starting", "created": "starting", "rebooting": "starting",
    "frozen": "running",  # paused with memory kept: GPU charges apply (docs.vast.ai)
    "stopped": "stopped", "exited": "stopped", "inactive": "stopped",
    "offline": "other", "unknown": "other",
    "destroyed": "gone", "deleted": "gone",
}
"""`actual_status` -> what it means for money (docs.vast.ai "show instances")."""


class VastClient(PlatformClient):
    """The vast.ai account: instances (paged) and the prepaid credit."""

    platform = "vastai"
    env_base = "COCKPIT_VASTAI_API"
    default_base = "https://console.vast.ai"

    @classmethod
    def key_lookup(cls) -> KeyLookup:
        return KeyLookup("VAST_API_KEY", (Path(".config/vastai/vast_api_key"),
                                          Path(".vast_api_key")))

    async def _fetch(self, client: httpx.AsyncClient, now: float) -> Account:
        rows: list[Any] = []
        token: str | None = None
        for _ in range(MAX_PAGES):
            params = {"limit": str(PAGE_SIZE), "select_filters": "{}",
                      "order_by": json.dumps([{"col": "id", "dir": "asc"}])}
            if token:
                params["after_token"] = token
            page = await self.request_json(client, "GET", f"{self.base}/api/v1/instances/",
                                           params=params)
            rows.extend(rows_of(page, "instances", "the instance list"))
            token = page.get("next_token") if isinstance(page, dict) else None
            if not token or len(rows) >= MAX_INSTANCES:
                break
        user = await self.request_json(client, "GET", f"{self.base}/api/v0/users/current/")
        if not isinstance(user, dict):
            raise PlatformError("the user record is not an object")
        credit = number(user, "credit", required=True, where=" in the user record")
        instances = tuple(self._instance(row, now) for row in rows[:MAX_INSTANCES])
        return Account(self.platform, self.currency, instances, balance=credit)

    def _instance(self, row: dict[str, Any], now: float) -> PlatformInstance:
        iid = text_field(require(row, "id", " in an instance"))
        where = f" in instance {iid}"
        if "actual_status" not in row:
            raise PlatformError(f"field 'actual_status' missing{where} (the API changed?)")
        raw = text_field(row["actual_status"] or "provisioning")
        state: PlatformState = STATES.get(raw.lower(), "starting" if raw == "provisioning" else "other")
        price = number(row, "dph_total", required=True, where=where)
        storage = number(row, "storage_total_cost", where=where)
        disk = number(row, "disk_space", where=where)
        if storage is None:
            per_gb_month = number(row, "storage_cost", where=where)
            if per_gb_month is not None and disk is not None:
                storage = per_gb_month * disk / 730.0  # $/GB/month -> $/h (730 h a month)
        start = number(row, "start_date", where=where)
        end = number(row, "end_date", where=where)
        port = number(row, "ssh_port", where=where)
        return PlatformInstance(
            self.platform, iid, text_field(row.get("label") or ""), state, raw, self.currency,
            price, uptime_s=max(0.0, now - start) if start and state in ("running",) else None,
            disk_gb=disk, storage_per_hour=storage, contract_end=end or None,
            ssh_host=text_field(row.get("ssh_host") or ""),
            ssh_port=int(port) if port else None)
