"""Money carries its currency; danger clocks and reconciliation read from platform truth (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from cockpit.models.alerts import AlertLatch, money_alerts
from cockpit.models.billing import (
    Account,
    BillingRow,
    PlatformInstance,
    PlatformTruth,
    SweepBill,
    build_bill,
    instance_clocks,
    instance_currency,
    money,
    orphan_rows,
    per_hour_unit,
    reconcile,
    runway_clock,
    totals_text,
)
from cockpit.services.config.profiles import load_named
from tests.test_hostview import instance

NOW = 1_795_000_000.0


def pod(iid: str = "p1", state: str = "running", raw: str = "RUNNING", price: float | None = 0.69,
        **kw: object) -> PlatformInstance:
    return PlatformInstance("runpod", iid, "", state, raw, "USD", price, **kw)  # type: ignore[arg-type]


def row(name: str = "r1", now: str = "running: GPU and storage bill", price: float | None = 0.69,
        currency: str = "USD") -> BillingRow:
    return BillingRow(name, "runpod", now, price, 3600.0, "", (), currency=currency)


def truth(*instances: PlatformInstance, balance: float | None = 12.3,
          spend: float | None = None) -> PlatformTruth:
    return PlatformTruth("runpod", NOW, Account("runpod", "USD", instances, balance, spend))


def test_money_and_units_name_the_currency() -> None:
    assert money(12.3, "USD") == "$12.30" and money(1.98, "CNY") == "¥1.98"
    assert money(-3, "USD") == "-$3.00" and money(5, "EUR") == "5.00 EUR"
    assert per_hour_unit("CNY") == "CNY/h" and per_hour_unit("USD") == "USD/h"
    assert totals_text({"USD": 3.09, "CNY": 1.98}, "/h") == "¥1.98/h + $3.09/h"
    assert totals_text({}) == "nothing priced"


def test_the_instance_overrides_the_profile_currency() -> None:
    generic = load_named("generic-ssh")
    assert generic.currency == "USD"
    assert instance_currency(instance(name="g", profile="generic-ssh"), generic) == "USD"
    cny = instance(name="g", profile="generic-ssh").model_copy(update={"currency": "CNY"})
    assert instance_currency(cny, generic) == "CNY"
    assert load_named("autodl").currency == "CNY" and load_named("runpod").currency == "USD"


def test_totals_are_per_currency_never_summed_across() -> None:
    bill = SweepBill((row("a1", price=1.98, currency="CNY"), row("r1"), row("v1", price=2.4),
                      row("gone", now="gone: the platform says it no longer exists", price=5.0)))
    assert bill.per_hour == {"CNY": pytest.approx(1.98), "USD": pytest.approx(3.09)}
    assert bill.so_far == {"CNY": pytest.approx(1.98), "USD": pytest.approx(3.09 + 5.0)}


def test_runway_names_the_consequence_and_crosses_thresholds() -> None:
    clock = runway_clock(Account("runpod", "USD", (pod(),), balance=12.30, spend_per_hour=3.09))
    assert clock is not None and clock.threshold_h == 4  # 3h58m: under both thresholds
    assert clock.text.startswith("balance $12.30 at $3.09/h: about 3h58m until RunPod stops pods, "
                                 "then terminates those without a network volume")
    day = runway_clock(Account("runpod", "USD", (pod(),), balance=20.0, spend_per_hour=1.0))
    assert day is not None and day.threshold_h == 24
    calm = runway_clock(Account("vastai", "USD", (pod(price=0.5),), balance=100.0))
    assert calm is not None and calm.threshold_h is None and "vast.ai stops instances" in calm.text
    idle = runway_clock(Account("vastai", "USD", (pod(state="gone", raw="destroyed"),), balance=1.0))
    assert idle is not None and "nothing billing now" in idle.text
    assert runway_clock(Account("lambda", "USD", (pod(),))) is None  # no prepaid balance


def test_contract_end_and_stopped_storage() -> None:
    vast = PlatformInstance("vastai", "312", "", "running", "running", "USD", 0.4,
                            contract_end=NOW + 3 * 3600)
    (end,) = instance_clocks(vast, "v1", NOW)
    assert end.text == "v1: contract ends in 3h: the instance stops then" and end.threshold_h == 4
    (past,) = instance_clocks(dataclasses.replace(vast, contract_end=NOW - 60), "v1", NOW)
    assert past.text == "v1: contract ended 1m ago"
    stopped = dataclasses.replace(vast, state="stopped", raw_state="exited", storage_per_hour=0.0411,
                                  contract_end=None)
    (clock,) = instance_clocks(stopped, "v1", NOW)
    assert clock.text == "v1: stopped but still billing storage $0.99/day"


def test_reconcile_unreachable_but_billing_gone_and_price() -> None:
    unreachable = row(now="unreachable: assume it still bills")
    out = reconcile(unreachable, truth(pod()), "p1")
    assert out.now == "unreachable: still billing 0.69 USD/h (platform)" and out.disagree
    gone = reconcile(unreachable, truth(), "p1")
    assert gone.now.startswith("gone") and gone.rate_now is None and not gone.disagree
    reached_but_gone = reconcile(row(), truth(), "p1")
    assert "check instance_id" in reached_but_gone.disagree
    repriced = reconcile(row(price=0.50), truth(pod()), "p1")
    assert repriced.price_per_hour == 0.69 and "the sweep says 0.50 USD/h" in repriced.disagree
    stopped = reconcile(unreachable, truth(pod(state="stopped", raw="EXITED", storage_per_hour=0.1)), "p1")
    assert stopped.now == "stopped: storage still bills $2.40/day" and stopped.rate_now == 0.1
    failed = PlatformTruth("runpod", NOW, None, "429 rate limited", NOW - 120)
    unknown = reconcile(row(), failed, "p1")
    assert unknown.now == row().now and unknown.platform_says.startswith("unknown since")
    assert reconcile(row(), truth(pod()), None) == row()  # no instance_id: nothing to compare


def test_orphans_bill_and_gone_ones_do_not() -> None:
    t = truth(pod("p1"), pod("p2", price=1.5), pod("p3", state="gone", raw="TERMINATED"))
    (orphan,) = orphan_rows(t, ["p1"])
    assert orphan.instance == "runpod:p2" and orphan.orphan and orphan.rate_now == 1.5
    bill = build_bill([row()], {"r1": ("runpod", "p1")}, {"runpod": t}, NOW)
    assert [r.instance for r in bill.orphans] == ["runpod:p2"]
    assert bill.per_hour == {"USD": pytest.approx(0.69 + 1.5)}  # the watched pod and the orphan
    assert bill.clocks[0].kind == "runway" and bill.balances == (("runpod", 12.3, "USD"),)


def test_money_alerts_fire_once_per_threshold() -> None:
    latch = AlertLatch()
    day = runway_clock(Account("runpod", "USD", (pod(),), balance=12.0, spend_per_hour=1.0))
    hours = runway_clock(Account("runpod", "USD", (pod(),), balance=3.0, spend_per_hour=1.0))
    assert day is not None and hours is not None
    first = latch.update("platform:runpod", money_alerts("runpod", [day]))
    assert [a.kind for a in first] == ["balance-runway"] and first[0].instance == "runpod account"
    assert latch.update("platform:runpod", money_alerts("runpod", [day])) == []  # same episode
    assert len(latch.update("platform:runpod", money_alerts("runpod", [hours]))) == 1  # escalates
    # A box's own tick (keyed by its name) never clears the platform's episodes.
    latch.update("r1", [])
    assert latch.update("platform:runpod", money_alerts("runpod", [hours])) == []
    assert money_alerts("vastai", [day]) == []  # another platform's clock

