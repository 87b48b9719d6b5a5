"""What the sweep costs: per box now, so far, and after each teardown action.

From the profile (what a stopped box still bills: disks, volumes, NFS, static IPs,
snapshots) and the sweep (`price_per_hour`); "so far" is the price times the box's uptime,
a lower bound for what this rental has billed (a box may have been rented before it booted).
A box the cockpit cannot reach is assumed to still bill: silence is not a stopped meter.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cockpit.models.profile import Profile, TeardownAction
from cockpit.models.snapshot import NA, Reachability

if TYPE_CHECKING:
    from cockpit.models.hostview import HostTracker


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


@dataclass(frozen=True)
class BillingRow:
    """One box's money."""

    instance: str
    platform: str
    now: str
    """What bills right now."""
    price_per_hour: float | None
    uptime_s: float | None
    idle: str
    """The idle-burn judgement's text, or empty."""
    after: tuple[tuple[str, str], ...]
    """(action label, what still bills after it), safest first as the profile lists them."""

    @property
    def so_far(self) -> float | None:
        """Price times uptime, when both are known."""
        if self.price_per_hour is None or self.uptime_s is None:
            return None
        return self.price_per_hour * self.uptime_s / 3600


def billing_row(tracker: HostTracker, now: float) -> BillingRow:
    """The billing view of one box."""
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
                      tracker.instance.price_per_hour, uptime, idle, after)


@dataclass(frozen=True)
class SweepBill:
    """Every box plus the sweep's totals."""

    rows: tuple[BillingRow, ...]

    @property
    def per_hour(self) -> float:
        """What the boxes that bill now cost per hour (priced ones only)."""
        return sum(r.price_per_hour or 0.0 for r in self.rows if not r.now.startswith("stopped"))

    @property
    def so_far(self) -> float:
        """The sum of the known so-far figures."""
        return sum(r.so_far or 0.0 for r in self.rows)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Boxes the sweep gives no price for."""
        return tuple(r.instance for r in self.rows if r.price_per_hour is None)
