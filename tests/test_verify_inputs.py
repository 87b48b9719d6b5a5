"""Verification inputs, each refused with its own reason (and the gate stays locked):
a good checkpoint, a truncated one, a zero-byte one, a hash that differs from the manifest,
a malicious pickle whose unpickling would create a file, a corrupt `.safetensors` header,
and invalid metrics JSON. Real `torch.save`d files; the manifest comes from the real
manifest script run on this machine."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
import torch

from cockpit.models.custody import CellStatus, FailureCause, Verification
from cockpit.models.gate import Gate, GateState
from cockpit.models.sweep import Instance
from cockpit.services.custody.loadcheck import check_file, check_safetensors
from cockpit.services.custody.verify import (
    make_pool,
    marker_path,
    read_marker,
    run_verification,
    verify_pulled,
)
from cockpit.services.transport.remote import LocalBox

CELLS = ("good", "truncated", "zero", "tampered", "pickle", "safet", "badjson", "failed")


class Pwn:
    """Unpickling this would create a file (what a hostile checkpoint does)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (self.target, "w"))


def state_dict(value: float = 1.0) -> dict[str, dict[str, torch.Tensor]]:
    return {"model_state_dict": {"w": torch.full((32, 32), value), "b": torch.zeros(32)}}


def safetensors_bytes(header: bytes, data: bytes) -> bytes:
    return struct.pack("<Q", len(header)) + header + data


def build(root: Path, canary: Path) -> Path:
    durable = root / "durable"
    for cell in CELLS[:-1]:
        (durable / cell).mkdir(parents=True)
        torch.save(state_dict(), durable / cell / "best.pth")
        (durable / cell / "best_metrics.json").write_text(json.dumps({"epoch": 5, "dice": 0.8}))
    whole = (durable / "truncated" / "best.pth").read_bytes()
    (durable / "truncated" / "best.pth").write_bytes(whole[: len(whole) // 2])
    (durable / "zero" / "best.pth").write_bytes(b"")
    torch.save({"model_state_dict": {"w": torch.zeros(2)}, "hook": Pwn(str(canary))},
               durable / "pickle" / "best.pth")
    good_header = json.dumps({"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}}).encode()
    (durable / "good" / "ema.safetensors").write_bytes(safetensors_bytes(good_header, bytes(16)))
    bad_header = b'{"w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]'  # cut JSON
    (durable / "safet" / "ema.safetensors").write_bytes(safetensors_bytes(bad_header, bytes(16)))
    (durable / "badjson" / "best_metrics.json").write_text('{"epoch": 5, "dice": ')
    (root / "queue.txt").write_text("".join(f"cfg/{c}.yaml t 5\n" for c in CELLS))
    (root / "master.log").write_text(
        "".join(f"[2026-11-21 10:00:00] [1/8] FINISHED {c} (exit=0)\n" for c in CELLS[:-1])
        + "[2026-11-21 10:00:00] [8/8] FINISHED failed (exit=1)\n")
    return durable


OOM = FailureCause("M2", "probabilistic", "CUDA out of memory", "torch.OutOfMemoryError: CUDA out of memory.")


@pytest.fixture
def verified(tmp_path: Path) -> tuple[Verification, Path, Path]:
    canary = tmp_path / "PWNED-by-unpickling"
    durable = build(tmp_path / "box", canary)
    inst = Instance(name="l1", profile="local", host="local", queue=str(tmp_path / "box" / "queue.txt"),
                    queue_log=str(tmp_path / "box" / "master.log"), durable_root=str(durable))
    dest = tmp_path / "pulled" / "l1"
    import asyncio

    async def go() -> Verification:
        with make_pool(2) as pool:
            report = await run_verification(LocalBox(), inst, dest, "s", pool,
                                            causes={"failed": OOM})
        assert report.verification is not None, report.error
        # The tampered copy: changed after the pull, so its hash no longer matches.
        tampered = dest / "tampered" / "best.pth"
        data = bytearray(tampered.read_bytes())
        data[-10] ^= 0xFF
        tampered.write_bytes(bytes(data))
        # Verified again without a new pull (a new pull would fetch the right bytes again).
        assert report.state is not None
        with make_pool(2) as pool:
            return await verify_pulled("l1", report.expected, report.state, dest, pool,
                                       causes={"failed": OOM})

    return asyncio.run(go()), dest, canary


def test_each_hostile_input_has_its_own_reason_and_the_gate_stays_locked(
        verified: tuple[Verification, Path, Path]) -> None:
    verification, dest, canary = verified
    verdicts = {v.cell: v for v in verification.verdicts}
    assert verdicts["good"].status is CellStatus.OK and verdicts["good"].metric == "epoch=5 dice=0.8"
    assert "does not load" in verdicts["truncated"].reason
    assert verdicts["zero"].reason == "best.pth is zero bytes"
    assert verdicts["tampered"].reason == "best.pth: SHA-256 differs from the manifest"
    assert "refused by weights_only=True: it would load only unsafely" in verdicts["pickle"].reason
    assert not canary.exists(), "the malicious pickle was never executed"
    assert "ema.safetensors: corrupt header" in verdicts["safet"].reason
    assert "best_metrics.json is not valid JSON" in verdicts["badjson"].reason
    failed = verdicts["failed"]
    assert failed.status is CellStatus.FAILED_ON_BOX
    assert "exit=1, CUDA out of memory [M2]" in failed.reason and failed.cause == OOM
    assert len({v.reason for v in verification.verdicts if v.status is not CellStatus.OK}) == 7
    assert verification.summary == "1/8 loaded"
    gate = Gate("l1")
    gate.verified(verification)
    assert gate.state is GateState.LOCKED
    assert not marker_path(dest).exists() and read_marker(dest) is None


def test_safetensors_header_checks(tmp_path: Path) -> None:
    path = tmp_path / "x.safetensors"
    header = json.dumps({"a": {"dtype": "F16", "shape": [4], "data_offsets": [0, 8]},
                         "__metadata__": {"format": "pt"}}).encode()
    path.write_bytes(safetensors_bytes(header, bytes(8)))
    assert check_safetensors(str(path)) == (True, "")
    path.write_bytes(safetensors_bytes(header, bytes(7)))
    assert "points outside the data" in check_safetensors(str(path))[1]
    path.write_bytes(struct.pack("<Q", 1 << 40) + b"{}")
    assert "exceeds the file" in check_safetensors(str(path))[1]
    wrong = json.dumps({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8]}}).encode()
    path.write_bytes(safetensors_bytes(wrong, bytes(8)))
    assert "8 bytes for shape [4] F32" in check_safetensors(str(path))[1]


def test_a_checkpoint_without_tensors_does_not_count(tmp_path: Path) -> None:
    path = tmp_path / "best.pth"
    torch.save({"epoch": 3, "note": "no weights here"}, path)
    check = check_file(str(path))
    assert check.loaded is False and "holds no tensors" in check.reason
    torch.save({"w": torch.ones(3)}, path)  # a bare state dict is fine
    assert check_file(str(path)).loaded is True
    os.truncate(path, 0)
    assert check_file(str(path)).reason == "empty file (0 bytes)"
