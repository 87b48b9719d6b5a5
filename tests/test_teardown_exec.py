"""The teardown executor: only an approved plan runs, never through a shell, always audited."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cockpit.models.custody import CellListing, CellStatus, CellVerdict, FileEntry, Manifest, Verification
from cockpit.models.gate import Gate, GateError, GateState, render_step
from cockpit.models.profile import TeardownAction
from cockpit.models.sweep import Instance
from cockpit.services.custody.audit import read_audit
from cockpit.services.custody.teardown import confirm_by_hand, execute

MANIFEST = Manifest("v1", "/durable", (CellListing("a", True, (FileEntry("a", "best.pth", 10, "d" * 64),)),))
DIGEST = MANIFEST.digest
DESTROY = TeardownAction(id="destroy", label="Destroy", stops_meter="yes", reversible=False,
                         command="vastai destroy instance {instance_id}")
RELEASE = TeardownAction(id="release", label="释放", stops_meter="yes", reversible=False,
                         manual_steps=("In the console choose 释放.",))


def fake_cli(tmp_path: Path) -> Path:
    """A `vastai` on a cli_path that records its argv, one JSON line per call."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "vastai"
    log = tmp_path / "calls.jsonl"
    script.write_text(f"#!/usr/bin/env python3\nimport json, sys\nopen({str(log)!r}, 'a').write("
                      f"json.dumps(sys.argv[1:]) + '\\n')\nprint('destroying instance', sys.argv[-1])\n")
    script.chmod(0o755)
    return bin_dir


def pwned(root: Path) -> bool:
    return any(root.rglob("PWNED")) or Path("PWNED").exists()


def verified_gate() -> Gate:
    gate = Gate("v1")
    gate.verified(Verification("v1", DIGEST, (CellVerdict("a", CellStatus.OK),), 10, 0.0))
    return gate


async def fresh() -> Manifest:
    return MANIFEST


async def changed() -> Manifest:
    return Manifest("v1", "/durable", (CellListing("a", True, (FileEntry("a", "best.pth", 11, "e" * 64),)),))


async def test_an_approved_destroy_runs_once_without_a_shell_and_is_audited(tmp_path: Path) -> None:
    bin_dir = fake_cli(tmp_path)
    hostile = Instance(name="v1", profile="vastai", host="h", instance_id="42; touch PWNED $(id)")
    gate = verified_gate()
    plan = gate.approve(render_step(hostile, DESTROY), "v1")
    result = await execute(gate, plan, fresh_state=fresh, cli_path=[bin_dir])
    assert result.ok and "destroying instance 42; touch PWNED $(id)" in result.output
    calls = [json.loads(x) for x in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert calls == [["destroy", "instance", "42; touch PWNED $(id)"]], "one literal argument"
    assert not pwned(tmp_path)
    assert gate.state is GateState.DONE
    (record,) = read_audit()
    assert record["action"] == "destroy" and record["exit_code"] == 0
    assert record["command"] == "vastai destroy instance '42; touch PWNED $(id)'"
    assert record["manifest_sha256"] == DIGEST and record["verified"] == "1/1 loaded"
    assert "destroying instance" in record["output_tail"]
    with pytest.raises(GateError):
        await execute(gate, plan, fresh_state=fresh, cli_path=[bin_dir])
    assert len(read_audit()) == 1


async def test_a_remote_change_relocks_and_nothing_runs(tmp_path: Path) -> None:
    bin_dir = fake_cli(tmp_path)
    gate = verified_gate()
    plan = gate.approve(render_step(Instance(name="v1", profile="vastai", host="h", instance_id="7"),
                                    DESTROY), "v1")
    with pytest.raises(GateError, match="remote changed"):
        await execute(gate, plan, fresh_state=changed, cli_path=[bin_dir])
    assert gate.state is GateState.LOCKED
    assert not (tmp_path / "calls.jsonl").exists()
    (record,) = read_audit()
    assert record["exit_code"] is None and "re-locked" in record["note"]


async def test_a_failing_command_fails_the_gate_and_is_audited(tmp_path: Path) -> None:
    gate = verified_gate()
    plan = gate.approve(render_step(Instance(name="v1", profile="vastai", host="h", instance_id="7"),
                                    DESTROY), "v1")
    result = await execute(gate, plan, fresh_state=fresh, cli_path=[tmp_path / "empty"])
    if result.exit_code is None:
        assert "could not start 'vastai'" in result.output
    assert not result.ok and gate.state is GateState.FAILED
    assert read_audit()[0]["exit_code"] == result.exit_code


async def test_manual_steps_are_recorded_only_when_confirmed(tmp_path: Path) -> None:
    gate = verified_gate()
    step = render_step(Instance(name="v1", profile="autodl", host="h"), RELEASE)
    plan = gate.approve(step, "v1")
    with pytest.raises(GateError, match="done by hand"):
        await execute(gate, plan, fresh_state=fresh)
    result = await confirm_by_hand(gate, plan, done=True, fresh_state=fresh)
    assert result.by_hand and gate.state is GateState.DONE
    (record,) = read_audit()
    assert record["by_hand"] is True and record["command"] == "(by hand)"
