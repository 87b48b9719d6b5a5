"""The custody flow on real files (LocalBox runs the real manifest script on this machine):
N/N unlocks, a change on the remote after verification re-locks before anything runs, and a
bad roster stops verification before any byte moves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from cockpit.models.gate import GateError, GateState, render_step
from cockpit.models.profile import TeardownAction
from cockpit.models.sweep import Instance
from cockpit.services.config.profiles import load_named
from cockpit.services.custody.audit import read_audit
from cockpit.services.custody.flow import Custody
from cockpit.services.custody.verify import make_pool
from cockpit.services.transport.remote import Box, LocalBox

DESTROY = TeardownAction(id="destroy", label="Destroy", stops_meter="yes", reversible=False,
                         command="vastai destroy instance {instance_id}")


def mark(i: int, what: str, name: str, rc: int | None = None) -> str:
    """One master-log line exactly as run_queue.sh prints it."""
    tail = f" (exit={rc})" if what == "FINISHED" else " (t, 1ep)"
    return f"[2026-11-21 10:00:{i:02d}] [{i}/2] {what} {name}{tail}\n"


FINISHED_BOTH = (mark(1, "STARTING", "a") + mark(1, "FINISHED", "a", 0)
                 + mark(2, "STARTING", "b") + mark(2, "FINISHED", "b", 0))


def box_tree(root: Path, queue: str = "a.yaml t 1\nb.yaml t 1\n",
             log: str | None = FINISHED_BOTH) -> Instance:
    """Two finished cells on a local 'box'; `log` is the master log (None: no queue_log)."""
    durable = root / "durable"
    for cell in ("a", "b"):
        (durable / cell).mkdir(parents=True)
        torch.save({"w": torch.ones(4)}, durable / cell / "best.pth")
        (durable / cell / "best_metrics.json").write_text(json.dumps({"epoch": 1, "loss": 0.5}))
    (root / "queue.txt").write_text(queue)
    if log is not None:
        (root / "master.log").write_text(log)
    return Instance(name="v1", profile="vastai", host="local", instance_id="9",
                    queue=str(root / "queue.txt"), durable_root=str(durable),
                    queue_log=str(root / "master.log") if log is not None else None)


async def local_factory() -> tuple[Box, bool]:
    return LocalBox(), False


def custody_for(inst: Instance, tmp_path: Path, bin_dir: Path) -> Custody:
    return Custody(inst, load_named("vastai"), "s", tmp_path / "pulled" / "v1", (bin_dir,), local_factory)


def recording_cli(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "vastai").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'calls'}\n")
    (bin_dir / "vastai").chmod(0o755)
    return bin_dir


async def test_a_remote_change_after_verification_relocks_before_anything_runs(tmp_path: Path) -> None:
    inst = box_tree(tmp_path / "box")
    bin_dir = recording_cli(tmp_path)
    custody = custody_for(inst, tmp_path, bin_dir)
    with make_pool(1) as pool:
        report = await custody.verify(pool, {})
    assert report.verification is not None and report.verification.summary == "2/2 loaded"
    assert custody.gate.state is GateState.VERIFIED
    plan = custody.gate.approve(render_step(inst, DESTROY), "v1")
    # The trainer (or a person) writes to a verified cell after the pull.
    torch.save({"w": torch.zeros(4)}, tmp_path / "box" / "durable" / "b" / "best.pth")
    with pytest.raises(GateError, match="remote changed"):
        await custody.run(plan)
    assert custody.gate.state is GateState.LOCKED
    assert not (tmp_path / "calls").exists(), "nothing ran"
    assert "re-locked" in read_audit()[-1]["note"]
    # Verified again (the new bytes pulled), it may run.
    with pytest.raises(GateError):
        custody.gate.approve(render_step(inst, DESTROY), "v1")
    with make_pool(1) as pool:
        await custody.verify(pool, {})
    plan = custody.gate.approve(render_step(inst, DESTROY), "v1")
    result = await custody.run(plan)
    assert result.ok and (tmp_path / "calls").read_text() == "destroy instance 9\n"
    assert custody.gate.state is GateState.DONE


@pytest.mark.parametrize(("queue", "message"), [
    ("a.yaml t 1\nother/a.yaml t 1\n", "two queue lines would write one folder"),
    ("# nothing queued\n", "zero expected cells is a failure"),
])
async def test_a_bad_roster_stops_verification(tmp_path: Path, queue: str, message: str) -> None:
    inst = box_tree(tmp_path / "box", queue)
    custody = custody_for(inst, tmp_path, tmp_path)
    with make_pool(1) as pool:
        report = await custody.verify(pool, {})
    assert message in report.error and report.verification is None
    assert custody.gate.state is GateState.LOCKED
    assert not (tmp_path / "pulled").exists(), "nothing pulled"
