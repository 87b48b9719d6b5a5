"""What the sweep costs, in which currency, and what the platforms themselves say.

Two sources, never mixed silently:

- **The cockpit's view**, from the profile (what a stopped box still bills: disks, volumes,
  NFS, static IPs, snapshots) and the sweep (`price_per_hour`, in the profile's `currency`
  unless the instance overrides it); "so far" is the price times the box's uptime, a lower
  bound for what this rental has billed. A box the cockpit cannot reach is assumed to still
  bill: silence is not a stopped meter.
- **Platform truth** (`PlatformTruth`), read by the clients in `cockpit.services.platforms`:
  each instance's state, price, uptime, disks and contract end, and the account balance. A
  failed read is `unknown since T (reason)`, never a guess and never the last good answer
  passed off as current.

Money always carries its currency: totals are per currency (a CNY price and a USD price are
never added), and every amount is shown with its unit. The danger clocks computed here
(balance runway, contract end, stopped-but-billing storage) feed the billing view, the
headless `cockpit billing` and the alerts (`cockpit.models.alerts.money_alerts`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from cockpit.models.durations import format_duration
from cockpit.models.profile import Profile, TeardownAction
from cockpit.models.snapshot import NA, Reachability

if TYPE_CHECKING:
    from cockpit.models.hostview import HostTracker
    from cockpit.models.sweep import Instance

NO_CURRENCY = "none"
"""A profile's currency where nothing is rented (local, Slurm, Kubernetes)."""

SYMBOLS = {"USD": "$", "CNY": "¥"}
"""How an amount is written before its number; the code follows it in every unit (`USD/h`)."""


def money(amount: float, currency: str, *, places: int = 2) -> str:
    """`$12.30`, `¥1.98`, or `12.30 EUR` for a currency without a symbol here."""
    sign = "-" if amount < 0 else ""
    symbol = SYMBOLS.get(currency)
    number = f"{abs(amount):,.{places}f}"
    if currency == NO_CURRENCY:
        return f"{sign}{number}"
    return f"{sign}{symbol}{number}" if symbol else f"{sign}{number} {currency}"


def per_hour_unit(currency: str) -> str:
    """The unit of an hourly price column cell: `USD/h`, `CNY/h` (never a bare `$/h`)."""
    return "/h" if currency == NO_CURRENCY else f"{currency}/h"


def instance_currency(instance: Instance, profile: Profile) -> str:
    """The currency of this box's `price_per_hour`: the sweep's override, else the profile's."""
    return instance.currency or profile.currency


def billing_after(action: TeardownAction, profile: Profile) -> str:
    """What keeps costing money after `action`."""
    bill = profile.billing
    if action.stops_meter == "no":
        return "the meter keeps running"
    if action.reversible and bill.stopped_still_bills:
        return f"still bills: {bill.while_stopped}"
    if action.stops_meter == "partial":
        return f"partly: {bill.while_stopped}"
    kept = ", ".join(action.keeps)
    return f"what it keeps may still bill ({kept})" if kept else "nothing of this instance"


# -- platform truth -----------------------------------------------------------------------------

PlatformState = Literal["running", "starting", "stopped", "gone", "unhealthy", "other"]
"""A platform's own state words, mapped by each client onto what matters for money:
running (GPU bills), starting (bills or soon will), stopped (storage bills), gone
(terminated or destroyed: nothing bills), unhealthy (Lambda's "unhealthy"/alert: still bills),
other (a word the client does not know: shown as-is, assumed to bill)."""

BILLS_GPU: frozenset[str] = frozenset({"running", "starting", "unhealthy", "other"})
"""States in which the instance's hourly price is being charged."""


@dataclass(frozen=True)
class PlatformInstance:
    """One instance as the platform's API reports it (units normalised: hours, GB, epoch s)."""

    platform: str
    instance_id: str
    name: str
    state: PlatformState
    raw_state: str
    """The platform's own word (`exited`, `EXITED`, `active`), shown beside the mapped one."""
    currency: str
    price_per_hour: float | None
    """What it bills per hour in its current state, as the API gives it (None: not given)."""
    uptime_s: float | None = None
    disk_gb: float | None = None
    """All disks the platform bills for this instance (container + volume)."""
    storage_per_hour: float | None = None
    """What it still bills per hour while stopped (its disk), when the API or the platform's
    published storage rate gives it."""
    contract_end: float | None = None
    """vast.ai's contract end (epoch s): the instance stops then."""
    network_volume: bool | None = None
    """RunPod: whether a network volume is attached (a pod without one is deleted at $0)."""
    ssh_host: str = ""
    ssh_port: int | None = None

    @property
    def bills_now(self) -> float | None:
        """What this instance costs per hour right now (storage only while stopped)."""
        if self.state in BILLS_GPU:
            return self.price_per_hour
        if self.state == "stopped":
            return self.storage_per_hour
        return 0.0


@dataclass(frozen=True)
class Account:
    """What one platform account holds: its instances and, where the API gives it, a balance."""

    platform: str
    currency: str
    instances: tuple[PlatformInstance, ...]
    balance: float | None = None
    """Credit left (RunPod `clientBalance`, vast.ai `credit`); None where the API has none."""
    spend_per_hour: float | None = None
    """The platform's own burn rate (RunPod `currentSpendPerHr`); else summed from instances."""

    @property
    def burn_per_hour(self) -> float | None:
        """The rate the balance drains at: the platform's figure, else the instances' sum."""
        if self.spend_per_hour is not None:
            return self.spend_per_hour
        rates = [i.bills_now for i in self.instances]
        if any(r is None for r in rates):
            return None
        return sum(r or 0.0 for r in rates)


@dataclass(frozen=True)
class PlatformTruth:
    """One poll of one platform: its account, or why it is unknown.

    `account` is None when the poll failed; `since` is then when the platform state last was
    known (the last good poll), or the first failure when it never was."""

    platform: str
    at: float
    """When this poll ended."""
    account: Account | None = None
    error: str = ""
    """Why the state is unknown: `401 unauthorized (check the key)`, `429 rate limited, retry
    after 30 s`, `timeout after 10 s`, `malformed JSON`, `field 'dph_total' missing`."""
    since: float | None = None
    retry_after: float | None = None
    """Seconds the platform asked us to wait (429 Retry-After): the next poll waits at least
    this long."""

    @property
    def known(self) -> bool:
        """True when this poll returned the account."""
        return self.account is not None

    def since_text(self) -> str:
        """`unknown since 12:03:04 UTC`: the short form for a table cell."""
        import time

        since = self.since if self.since is not None else self.at
        return f"unknown since {time.strftime('%H:%M:%S UTC', time.gmtime(since))}"

    def unknown_text(self) -> str:
        """`runpod: platform state unknown since 12:03:04 UTC (reason)`, for the views."""
        return f"{self.platform}: platform state {self.since_text()} ({self.error})"


def carry_since(previous: PlatformTruth | None, new: PlatformTruth) -> PlatformTruth:
    """A failed poll keeps the moment the state was last known (the previous good poll)."""
    if new.known:
        return new
    if previous is None:
        return new
    since = previous.at if previous.known else (previous.since or previous.at)
    return PlatformTruth(new.platform, new.at, None, new.error, since, new.retry_after)


# -- danger clocks from platform truth --------------------------------------------------------

RUNWAY_ALERT_HOURS = (24.0, 4.0)
"""Runway thresholds that raise an alert, loosest first: a day's notice to top up, and the
last few hours (the same episode escalates once, it does not repeat every tick)."""
CONTRACT_ALERT_HOURS = (24.0, 4.0)
"""vast.ai contract-end thresholds: the instance stops at its end date."""

AT_ZERO: Mapping[str, str] = {
    "runpod": "RunPod stops pods, then terminates those without a network volume (their "
              "data cannot be recovered)",
    "vastai": "vast.ai stops instances (their storage keeps billing) and then schedules "
              "instances, volumes and data for deletion",
    "lambda": "Lambda bills the card on file (no prepaid balance)",
}
"""What happens at a zero balance, per platform (platform-facts.md §2.9, §2.10)."""


@dataclass(frozen=True)
class MoneyClock:
    """One danger clock read from platform truth."""

    kind: Literal["runway", "contract-end", "stopped-billing"]
    platform: str
    instance: str
    """The sweep's instance name, `<platform> account` for the runway, or the orphan's id."""
    text: str
    seconds_left: float | None = None
    """Until the consequence (runway, contract end); None for a steady drain."""
    threshold_h: float | None = None
    """The tightest alert threshold crossed (RUNWAY_ALERT_HOURS / CONTRACT_ALERT_HOURS)."""


def _crossed(seconds: float, thresholds: Sequence[float]) -> float | None:
    crossed = [t for t in thresholds if seconds < t * 3600]
    return min(crossed) if crossed else None


def runway_clock(account: Account) -> MoneyClock | None:
    """`balance $12.30 at $3.09/h: about 4h until ...`, when the account has a balance."""
    if account.balance is None:
        return None
    burn = account.burn_per_hour
    label = f"{account.platform} account"
    cur = account.currency
    consequence = AT_ZERO.get(account.platform, "the platform acts at zero balance")
    if burn is None:
        return MoneyClock("runway", account.platform, label,
                          f"balance {money(account.balance, cur)}; burn rate unknown")
    if burn <= 0:
        return MoneyClock("runway", account.platform, label,
                          f"balance {money(account.balance, cur)}, nothing billing now")
    seconds = max(0.0, account.balance / burn * 3600)
    return MoneyClock("runway", account.platform, label,
                      f"balance {money(account.balance, cur)} at {money(burn, cur)}/h: about "
                      f"{format_duration(seconds // 60 * 60)} until {consequence}",  # whole minutes, down
                      seconds, _crossed(seconds, RUNWAY_ALERT_HOURS))


def instance_clocks(inst: PlatformInstance, name: str, now: float) -> list[MoneyClock]:
    """Contract end and stopped-but-billing for one platform instance shown as `name`."""
    out: list[MoneyClock] = []
    if inst.contract_end is not None and inst.state not in ("gone",):
        left = inst.contract_end - now
        out.append(MoneyClock(
            "contract-end", inst.platform, name,
            f"{name}: contract ends in {format_duration(max(0.0, left))}: the instance stops then"
            if left > 0 else f"{name}: contract ended {format_duration(-left)} ago",
            left, _crossed(left, CONTRACT_ALERT_HOURS)))
    if inst.state == "stopped":
        rate = inst.storage_per_hour
        text = (f"{name}: stopped but still billing storage {money(rate * 24, inst.currency)}/day"
                if rate is not None else f"{name}: stopped but still billing storage (rate unknown)")
        out.append(MoneyClock("stopped-billing", inst.platform, name, text))
    return out


# -- the billing view ---------------------------------------------------------------------------

@dataclass(frozen=True)
class BillingRow:
    """One box's money: the cockpit's view and, when polled, the platform's."""

    instance: str
    platform: str
    now: str
    """What bills right now, as the cockpit sees it."""
    price_per_hour: float | None
    uptime_s: float | None
    idle: str
    """The idle-burn judgement's text, or empty."""
    after: tuple[tuple[str, str], ...]
    """(action label, what still bills after it), safest first as the profile lists them."""
    currency: str = "USD"
    platform_says: str = ""
    """The platform's state for this box (`running 0.69 USD/h`, `gone`, `unknown since ...`);
    empty where the platform has no API client or the box has no instance_id."""
    disagree: str = ""
    """Why the cockpit and the platform disagree (highlighted), or empty."""
    orphan: bool = False
    """An instance on the account that the sweep does not list: it bills, nobody watches it."""
    stopped_rate: float | None = None
    """What a stopped box still bills per hour (its storage), from the platform."""

    @property
    def so_far(self) -> float | None:
        """Price times uptime, when both are known."""
        if self.price_per_hour is None or self.uptime_s is None:
            return None
        return self.price_per_hour * self.uptime_s / 3600

    @property
    def bills_now(self) -> bool:
        """False only when the cockpit or the platform knows the meter is off."""
        return not self.now.startswith(("stopped", "gone"))

    @property
    def rate_now(self) -> float | None:
        """What this box costs per hour right now: its price while it bills, its storage
        while stopped (when the platform gave the rate), nothing once gone."""
        if self.bills_now:
            return self.price_per_hour
        return self.stopped_rate if self.now.startswith("stopped") else None


def billing_row(tracker: HostTracker, now: float) -> BillingRow:
    """The billing view of one box (the cockpit's own view; see `reconcile` for the platform)."""
    profile = tracker.profile
    reach = tracker.state.reachability
    snap = tracker.snapshot
    if reach is Reachability.CONNECTED:
        state = "running: GPU and storage bill"
    elif snap is None:
        state = "never reached: unknown (assume it bills)"
    else:
        state = "unreachable: assume it still bills"
    uptime = None if snap is None or isinstance(snap.uptime_s, NA) else float(snap.uptime_s)
    idle = next((j.text for j in tracker.judgements(now) if j.kind == "idle-burn"), "")
    after = tuple((a.label, billing_after(a, profile)) for a in profile.teardown.actions)
    return BillingRow(tracker.instance.name, profile.platform, state,
                      tracker.instance.price_per_hour, uptime, idle, after,
                      currency=instance_currency(tracker.instance, profile))


def _price_text(price: float | None, currency: str) -> str:
    return "price unknown" if price is None else f"{price:.2f} {per_hour_unit(currency)}"


def reconcile(row: BillingRow, truth: PlatformTruth | None, instance_id: str | None) -> BillingRow:
    """The row with the platform's word beside the cockpit's, and any disagreement named.

    - the poll failed: `unknown since T (reason)`; the cockpit's view stands, unconfirmed.
    - the platform lists the instance: its state and price; a box the cockpit cannot reach
      that bills is "unreachable: still billing X/h"; a stopped one bills its storage.
    - the platform does not list it: gone (nothing bills, nothing to tear down); a box the
      cockpit still reaches is a disagreement (wrong instance_id, or a stale list).
    """
    if truth is None or not instance_id:
        return row
    if truth.account is None:
        return _replace(row, platform_says=f"{truth.since_text()} (reason below)")
    inst = next((i for i in truth.account.instances if i.instance_id == instance_id), None)
    reachable = row.now.startswith("running")
    if inst is None or inst.state == "gone":
        says = "gone (the platform no longer lists it)" if inst is None else f"gone ({inst.raw_state})"
        disagree = ("the cockpit reaches this box but the platform says it is gone: check "
                    "instance_id" if reachable else "")
        return _replace(row, now="gone: the platform says it no longer exists; nothing bills",
                        platform_says=says, disagree=disagree)
    price = inst.price_per_hour
    says = f"{inst.state} ({inst.raw_state}) {_price_text(price, inst.currency)}"
    now_text = row.now
    disagree = ""
    if inst.state == "stopped":
        rate = inst.storage_per_hour
        now_text = (f"stopped: storage still bills {money(rate * 24, inst.currency)}/day"
                    if rate is not None else "stopped: storage still bills")
        if reachable:
            disagree = "the cockpit reaches this box but the platform says it is stopped"
    elif inst.state in BILLS_GPU and not reachable:
        now_text = f"unreachable: still billing {_price_text(price, inst.currency)} (platform)"
        disagree = "the cockpit cannot reach it, the platform says it is billing"
    if row.price_per_hour is not None and price is not None and inst.state in BILLS_GPU and \
            inst.currency == row.currency and abs(price - row.price_per_hour) > 0.005 and not disagree:
        disagree = (f"the sweep says {_price_text(row.price_per_hour, row.currency)}, the "
                    f"platform {_price_text(price, inst.currency)}")
    uptime = row.uptime_s if row.uptime_s is not None else inst.uptime_s
    return _replace(row, now=now_text, platform_says=says, disagree=disagree,
                    price_per_hour=price if price is not None else row.price_per_hour,
                    currency=inst.currency if price is not None else row.currency, uptime_s=uptime,
                    stopped_rate=inst.storage_per_hour)


def _replace(row: BillingRow, **changes: object) -> BillingRow:
    import dataclasses

    return dataclasses.replace(row, **changes)  # type: ignore[arg-type]


def orphan_rows(truth: PlatformTruth, watched_ids: Iterable[str]) -> list[BillingRow]:
    """Instances on the account that no sweep instance names (by instance_id): they bill too."""
    if truth.account is None:
        return []
    watched = set(watched_ids)
    rows: list[BillingRow] = []
    for inst in truth.account.instances:
        if inst.instance_id in watched or inst.state == "gone":
            continue
        label = f"{inst.platform}:{inst.instance_id}"
        now_text = ("billing, not watched" if inst.state != "stopped" else
                    "stopped, storage billing, not watched")
        rows.append(BillingRow(
            label, inst.platform, now_text, inst.price_per_hour, inst.uptime_s, "", (),
            currency=inst.currency, stopped_rate=inst.storage_per_hour,
            platform_says=f"{inst.state} ({inst.raw_state}) {_price_text(inst.price_per_hour, inst.currency)}"
                          + (f" {inst.name}" if inst.name else ""),
            orphan=True))
    return rows


@dataclass(frozen=True)
class SweepBill:
    """Every box, the orphans, the platforms' clocks, and totals per currency."""

    rows: tuple[BillingRow, ...]
    clocks: tuple[MoneyClock, ...] = ()
    unknown: tuple[str, ...] = ()
    """One `platform state unknown since T (reason)` line per platform whose poll failed."""
    balances: tuple[tuple[str, float, str], ...] = field(default=())
    """(platform, balance, currency) of each account with a balance."""

    @property
    def per_hour(self) -> dict[str, float]:
        """Currency -> what the boxes that bill now cost per hour (priced ones only)."""
        totals: dict[str, float] = {}
        for r in self.rows:
            rate = r.rate_now
            if rate is not None:
                totals[r.currency] = totals.get(r.currency, 0.0) + rate
        return totals

    @property
    def so_far(self) -> dict[str, float]:
        """Currency -> the sum of the known so-far figures."""
        totals: dict[str, float] = {}
        for r in self.rows:
            if r.so_far is not None:
                totals[r.currency] = totals.get(r.currency, 0.0) + r.so_far
        return totals

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Boxes the sweep gives no price for (and the platform did not either)."""
        return tuple(r.instance for r in self.rows if r.price_per_hour is None and not r.orphan)

    @property
    def orphans(self) -> tuple[BillingRow, ...]:
        """Account instances no sweep instance watches."""
        return tuple(r for r in self.rows if r.orphan)


def totals_text(totals: Mapping[str, float], suffix: str = "") -> str:
    """`¥1.98/h + $3.09/h` style: one figure per currency, joined, never summed across."""
    if not totals:
        return "nothing priced"
    return " + ".join(f"{money(v, c)}{suffix}" + (f" {c}" if c not in SYMBOLS and c != NO_CURRENCY
                                                   else "") for c, v in sorted(totals.items()))


def build_bill(rows: Sequence[BillingRow], instance_ids: Mapping[str, tuple[str, str | None]],
               truths: Mapping[str, PlatformTruth], now: float) -> SweepBill:
    """Reconcile the cockpit's rows with each platform's truth; add orphans and clocks.

    `instance_ids` maps a row's instance name to (platform, instance_id). `truths` holds the
    latest poll per platform (only platforms that were polled)."""
    out: list[BillingRow] = []
    clocks: list[MoneyClock] = []
    watched: dict[str, list[str]] = {}
    for row in rows:
        platform, iid = instance_ids.get(row.instance, (row.platform, None))
        truth = truths.get(platform)
        reconciled = reconcile(row, truth, iid)
        out.append(reconciled)
        if iid:
            watched.setdefault(platform, []).append(iid)
        if truth is not None and truth.account is not None and iid:
            inst = next((i for i in truth.account.instances if i.instance_id == iid), None)
            if inst is not None:
                clocks.extend(instance_clocks(inst, row.instance, now))
    unknown: list[str] = []
    balances: list[tuple[str, float, str]] = []
    for platform, truth in sorted(truths.items()):
        if truth.account is None:
            unknown.append(truth.unknown_text())
            continue
        orphans = orphan_rows(truth, watched.get(platform, ()))
        out.extend(orphans)
        for o in orphans:
            inst = next(i for i in truth.account.instances
                        if f"{i.platform}:{i.instance_id}" == o.instance)
            clocks.extend(instance_clocks(inst, o.instance, now))
        runway = runway_clock(truth.account)
        if runway is not None:
            clocks.insert(0, runway)
        if truth.account.balance is not None:
            balances.append((platform, truth.account.balance, truth.account.currency))
    return SweepBill(tuple(out), tuple(clocks), tuple(unknown), tuple(balances))


def bill_json(bill: SweepBill) -> dict[str, object]:
    """The shape `cockpit billing --json` prints (documented in the README)."""
    return {
        "per_hour": {c: round(v, 4) for c, v in bill.per_hour.items()},
        "so_far": {c: round(v, 4) for c, v in bill.so_far.items()},
        "rows": [{
            "instance": r.instance, "platform": r.platform, "now": r.now,
            "price_per_hour": r.price_per_hour, "currency": r.currency,
            "unit": per_hour_unit(r.currency), "uptime_s": r.uptime_s, "so_far": r.so_far,
            "platform_says": r.platform_says, "disagree": r.disagree, "orphan": r.orphan,
        } for r in bill.rows],
        "orphans": [r.instance for r in bill.orphans],
        "clocks": [{"kind": c.kind, "platform": c.platform, "instance": c.instance,
                    "text": c.text, "seconds_left": c.seconds_left,
                    "threshold_h": c.threshold_h} for c in bill.clocks],
        "balances": [{"platform": p, "balance": b, "currency": c} for p, b, c in bill.balances],
        "unknown": list(bill.unknown),
        "unpriced": list(bill.unpriced),
    }
