"""Read-only platform clients: what vast.ai, RunPod and Lambda themselves say.

- `base`: `PlatformClient` (key, base URL, bounded HTTP, error classes), `ApiKey` (never
  printed), the bounds (`TIMEOUT`, `MAX_RESPONSE_BYTES`, ...).
- `vastai.VastClient`, `runpod.RunPodClient`, `lambda_cloud.LambdaClient`.
- `CLIENTS`: profile `platform` -> client class; `clients_for(platforms)`,
  `clients_for_sweep(boxes, api=sweep.platform_api)` (the demo fleet's made-up instances get
  `DEMO_KEY` at a stand-in, never a real key); `poll_all`.

Paperspace is left out: its Gradient/Core v1 API is being retired for the new paperspace.com
API (DigitalOcean), whose machine list and billing fields are not yet documented stably.
AutoDL and the Chinese rentals have no official instance API. Nothing here mutates a platform.
Imports only downward (models); never Textual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from cockpit.models.billing import PlatformTruth, SweepBill, carry_since
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.services.platforms.base import ApiKey, PlatformClient
from cockpit.services.platforms.lambda_cloud import LambdaClient
from cockpit.services.platforms.runpod import RunPodClient
from cockpit.services.platforms.vastai import VastClient

CLIENTS: dict[str, type[PlatformClient]] = {
    "vastai": VastClient, "runpod": RunPodClient, "lambda": LambdaClient,
}
"""Profile `platform` -> its client."""

POLL_INTERVAL_S = 120.0
"""Seconds between polls of one platform in the TUI: prices and states change on the scale of
minutes, balances drain by cents; each platform rate-limits its API (vast.ai answers 429 to
bursts), and a poll every two minutes is far inside every published limit."""


def clients_for(platforms: Iterable[str]) -> list[PlatformClient]:
    """A client per platform that has one, with the user's key (or none: it reports why)."""
    out: list[PlatformClient] = []
    for platform in sorted(set(platforms)):
        kind = CLIENTS.get(platform)
        if kind is not None:
            out.append(kind(kind.find_key()))
    return out


DEMO_PREFIX = "demo-"
"""Instance ids of the demo fleet (`cockpit demo`): a platform whose sweep instances all carry
it is never asked with the user's real key: it is skipped, or, when its base URL is overridden
(the sweep's `platform_api`, the demo's stand-in, or `COCKPIT_<PLATFORM>_API`), asked with
`DEMO_KEY`."""

DEMO_KEY = "cockpit-demo-key-not-a-secret"
"""The fixed key sent for demo-only platforms; the demo's stand-in accepts only this one."""


def _client(kind: type[PlatformClient], key: ApiKey | None, base: str | None) -> PlatformClient:
    if base is None:
        return kind(key)
    if kind is RunPodClient:  # RunPod answers balances on GraphQL, beside its REST base
        return RunPodClient(key, base=base, graphql=f"{base.rstrip('/')}/graphql")
    return kind(key, base=base)


def clients_for_sweep(boxes: Iterable[tuple[str, str | None]],
                      environ: Mapping[str, str] | None = None,
                      api: Mapping[str, str] | None = None) -> list[PlatformClient]:
    """The clients for a sweep's (platform, instance_id) pairs.

    `api` is the sweep's `platform_api` (platform -> loopback base URL, validated by the sweep
    model), which wins over `COCKPIT_<PLATFORM>_API`. A platform whose instances are all the
    demo fleet's made-up ones is skipped unless a base URL is overridden, and then gets
    `DEMO_KEY`, never the user's key (the demo must not send a real key anywhere)."""
    import os

    env = os.environ if environ is None else environ
    bases = dict(api or {})
    ids: dict[str, list[str | None]] = {}
    for platform, iid in boxes:
        ids.setdefault(platform, []).append(iid)
    out: list[PlatformClient] = []
    for platform in sorted(ids):
        kind = CLIENTS.get(platform)
        if kind is None:
            continue
        base = bases.get(platform)
        demo_only = all(i and i.startswith(DEMO_PREFIX) for i in ids[platform])
        if not demo_only:
            out.append(_client(kind, kind.find_key(environ), base))
        elif base is not None or env.get(kind.env_base):
            out.append(_client(kind, ApiKey(DEMO_KEY, "the demo fleet's fixed key"), base))
    return out


def next_poll_s(truths: Mapping[str, PlatformTruth]) -> float:
    """Seconds until the next poll: POLL_INTERVAL_S, or longer when a platform's 429 asked."""
    waits = [t.retry_after for t in truths.values() if t.retry_after is not None]
    return max([POLL_INTERVAL_S, *waits])


async def poll_all(clients: Iterable[PlatformClient], previous: Mapping[str, PlatformTruth],
                   now: float | None = None) -> dict[str, PlatformTruth]:
    """Every client at once; each failure carries the moment its state was last known."""
    polled = list(clients)
    results = await asyncio.gather(*(c.poll(now) for c in polled))
    return {t.platform: carry_since(previous.get(t.platform), t) for t in results}


def sweep_clients(loaded: LoadedSweep) -> list[PlatformClient]:
    """The clients for a loaded sweep's boxes, with its loopback `platform_api` overrides."""
    return clients_for_sweep(((loaded.profiles[i.profile].platform, i.instance_id)
                              for i in loaded.sweep.instances), api=loaded.sweep.platform_api)


async def headless_bill(loaded: LoadedSweep, *, offline: bool = False,
                        now: float | None = None) -> SweepBill:
    """The sweep's bill without any SSH (`cockpit billing`, the MCP `billing` tool): every box
    assumed to bill at its price, reconciled with what its platform says unless `offline`."""
    import time

    from cockpit.models.billing import BillingRow, billing_after, build_bill, instance_currency

    when = time.time() if now is None else now
    rows: list[BillingRow] = []
    ids: dict[str, tuple[str, str | None]] = {}
    for inst in loaded.sweep.instances:
        profile = loaded.profiles[inst.profile]
        after = tuple((a.label, billing_after(a, profile)) for a in profile.teardown.actions)
        rows.append(BillingRow(inst.name, profile.platform, "not probed (headless): assume it bills",
                               inst.price_per_hour, None, "", after,
                               currency=instance_currency(inst, profile)))
        ids[inst.name] = (profile.platform, inst.instance_id)
    truths: dict[str, PlatformTruth] = {}
    if not offline:
        truths = await poll_all(sweep_clients(loaded), {}, when)
    return build_bill(rows, ids, truths, when)
