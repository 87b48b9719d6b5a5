"""The teardown gate as a pure state machine, and the roster/manifest rules it relies on."""

from __future__ import annotations

import dataclasses

import pytest

from cockpit.models.custody import (
    CellListing,
    CellStatus,
    CellVerdict,
    FileEntry,
    Manifest,
    RosterError,
    Verification,
    headline_metric,
    reconcile,
    roster,
)
from cockpit.models.gate import ApprovedPlan, Gate, GateError, GateState, NotRunnable, render_step
from cockpit.models.profile import TeardownAction
from cockpit.models.queue import parse_queue_file
from cockpit.models.sweep import Instance

DESTROY = TeardownAction(id="destroy", label="Destroy", stops_meter="yes", reversible=False,
                         command="vastai destroy instance {instance_id}")
STOP = TeardownAction(id="stop", label="Stop", stops_meter="partial", reversible=True,
                      command="vastai stop instance {instance_id}")
BY_HAND = TeardownAction(id="release", label="释放", stops_meter="yes", reversible=False,
                         manual_steps=("In the console choose 释放.",))
INSTANCE = Instance(name="v1", profile="vastai", host="h", instance_id="4242")


def manifest(size: int = 10, digest: str = "a" * 64) -> Manifest:
    files = (FileEntry("c1", "best.pth", size, digest), FileEntry("c1", "best_metrics.json", 5, "b" * 64))
    return Manifest("v1", "/durable", (CellListing("c1", True, files),))


def verification(ok: int = 1, total: int = 1, digest: str | None = None, excluded: int = 0) -> Verification:
    verdicts = [CellVerdict(f"c{i}", CellStatus.OK if i < ok else CellStatus.ERROR) for i in range(total)]
    verdicts += [CellVerdict(f"x{i}", CellStatus.EXCLUDED, ("excluded by user",)) for i in range(excluded)]
    return Verification("v1", digest or manifest().digest, tuple(verdicts), 15, 0.0)


def test_roster_from_queue_lines() -> None:
    lines = parse_queue_file("# c\ncfg/a.yaml t 3\ncfg/b.yaml t\n\nother/a.yaml t 5\n")
    with pytest.raises(RosterError, match=r"queue:5: cell 'a' again \(first on line 2\)"):
        roster(lines)
    assert roster(parse_queue_file("a.yaml t\nb.yaml t\n")) == ("a", "b")
    with pytest.raises(RosterError, match="zero expected cells"):
        roster(parse_queue_file("# nothing\n"))
    with pytest.raises(RosterError, match="not a safe folder name"):
        roster(parse_queue_file("x/$(reboot).yaml t\n"))


def test_reconcile_names_every_roster_problem() -> None:
    files = (FileEntry("b", "best.pth", 0, "0" * 64),)
    m = Manifest("v1", "/d", (CellListing("a", False), CellListing("b", True, files, ("link.pth",)),
                              CellListing("c", True, (FileEntry("c", "best_metrics.json", 3, "1" * 64),))),
                 extras=("stray",))
    problems = reconcile(["a", "b", "c"], m)
    assert problems["a"] == ["missing directory /d/a/"]
    assert problems["b"] == ["best.pth is zero bytes", "best_metrics.json missing",
                             "not a regular file (refused): link.pth"]
    assert problems["c"] == ["best.pth missing"]
    assert problems[""] == ["unexpected extra directory: stray/"]


def test_manifest_digest_names_the_exact_state() -> None:
    assert manifest().digest == manifest().digest
    assert manifest(size=11).digest != manifest().digest
    assert manifest(digest="c" * 64).digest != manifest().digest
    reordered = dataclasses.replace(manifest(), cells=(CellListing(
        "c1", True, tuple(reversed(manifest().cells[0].files))),))
    assert reordered.digest == manifest().digest, "order of listing does not matter"


def test_headline_metric() -> None:
    assert headline_metric({"epoch": 12, "psnr": 27.3123, "loss": 0.1}) == "epoch=12 psnr=27.31"
    assert headline_metric({"loss": 0.25}) == "loss=0.25"
    assert headline_metric([1, 2]) == ""


def test_cannot_reach_executing_without_n_of_n() -> None:
    gate = Gate("v1")
    step = render_step(INSTANCE, DESTROY)
    with pytest.raises(GateError, match=r"locked: needs N/N \(not verified yet\)"):
        gate.approve(step, "v1")
    gate.verified(verification(ok=2, total=3))
    assert gate.state is GateState.LOCKED and "2/3 loaded: not N/N" in gate.reason
    with pytest.raises(GateError, match="locked"):
        gate.approve(step, "v1")
    gate.verified(verification(ok=0, total=0))  # zero cells is never 0/0 OK
    assert gate.state is GateState.LOCKED and "no cells" in gate.reason
    with pytest.raises(GateError, match="only from the gate"):
        ApprovedPlan(step, None, "v1")


def test_excluded_cells_leave_n_and_n_of_n_unlocks() -> None:
    gate = Gate("v1")
    v = verification(ok=2, total=2, excluded=1)
    assert (v.expected, v.loaded, v.summary) == (2, 2, "2/2 loaded (1 excluded)")
    gate.verified(v)
    assert gate.state is GateState.VERIFIED


def test_a_mistyped_name_does_not_approve_and_the_right_one_runs_once() -> None:
    gate = Gate("v1")
    gate.verified(verification())
    step = render_step(INSTANCE, DESTROY)
    for typed in ("v", "V1", " v1", "v1 ", "vastai", ""):
        with pytest.raises(GateError, match="not approved"):
            gate.approve(step, typed)
        assert gate.state is GateState.VERIFIED
    plan = gate.approve(step, "v1")
    assert gate.state is GateState.APPROVED
    gate.check_fresh(plan, manifest())
    gate.start(plan)
    with pytest.raises(GateError):
        gate.start(plan)  # not twice
    gate.finish(plan, ok=True)
    assert gate.state is GateState.DONE
    with pytest.raises(GateError, match="already torn down"):
        gate.approve(step, "v1")


def test_a_remote_change_after_verification_relocks() -> None:
    gate = Gate("v1")
    gate.verified(verification())
    plan = gate.approve(render_step(INSTANCE, DESTROY), "v1")
    with pytest.raises(GateError, match="remote changed"):
        gate.check_fresh(plan, manifest(size=999))
    assert gate.state is GateState.LOCKED
    with pytest.raises(GateError, match="not the gate's current approval"):
        gate.start(plan)


def test_a_stale_plan_from_an_earlier_approval_is_refused() -> None:
    gate = Gate("v1")
    gate.verified(verification())
    first = gate.approve(render_step(INSTANCE, DESTROY), "v1")
    gate.cancel()
    assert gate.state is GateState.VERIFIED
    second = gate.approve(render_step(INSTANCE, DESTROY), "v1")
    with pytest.raises(GateError):
        gate.start(first)
    gate.start(second)


def test_a_reversible_action_needs_only_the_typed_name_and_returns() -> None:
    gate = Gate("v1")
    plan = gate.approve(render_step(INSTANCE, STOP), "v1")
    gate.start(plan)
    gate.finish(plan, ok=True)
    assert gate.state is GateState.LOCKED, "stopping the meter verifies nothing"
    assert gate.history[-2][0] is GateState.DONE


def test_render_keeps_hostile_values_literal() -> None:
    hostile = Instance(name="v1", profile="vastai", host="h", instance_id="1; touch /tmp/pwned $(id)")
    step = render_step(hostile, DESTROY)
    assert step.argv == ("vastai", "destroy", "instance", "1; touch /tmp/pwned $(id)")
    assert step.command_text == "vastai destroy instance '1; touch /tmp/pwned $(id)'"
    shell = DESTROY.model_copy(update={"command": "sh -c 'curl -X DELETE api/{instance_id}'"})
    assert render_step(hostile, shell).argv == (
        "sh", "-c", "curl -X DELETE api/'1; touch /tmp/pwned $(id)'")
    with pytest.raises(NotRunnable, match="no instance_id"):
        render_step(Instance(name="v1", profile="vastai", host="h"), DESTROY)
    manual = render_step(INSTANCE, BY_HAND)
    assert manual.argv is None and manual.command_text == "(by hand)"


def test_env_vars_stay_literal_and_reach_the_command_only_through_its_environment() -> None:
    from pydantic import ValidationError

    from cockpit.models.gate import child_env

    with pytest.raises(ValidationError, match=r"outside a shell script.*`ps` shows"):
        TeardownAction(id="terminate", label="t", stops_meter="yes", reversible=False,
                       command='curl -u "$API_KEY:" -d \'{{"ids":["{instance_id}"]}}\' https://x/api')
    api = TeardownAction(id="terminate", label="t", stops_meter="yes", reversible=False,
                         command='sh -c \'printf "%s" "$API_KEY" | curl -K - -d "$1" https://x/api\' '
                                 'cockpit \'{{"ids":["{instance_id}"]}}\'')
    step = render_step(INSTANCE, api)
    assert step.env_vars == ("API_KEY",)
    assert "$API_KEY" in step.argv[2] and step.argv[4] == '{"ids":["4242"]}'
    assert "s3cret" not in step.command_text
    assert child_env(step, {"API_KEY": "s3cret"})["API_KEY"] == "s3cret"
    with pytest.raises(NotRunnable, match=r"needs \$API_KEY"):
        child_env(step, {})
