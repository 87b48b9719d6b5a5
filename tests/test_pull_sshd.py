"""Manifest and pull against a real OpenSSH sshd on loopback: SFTP, resume after a killed
server at random points, and nothing ever under its final name with the wrong content."""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import pytest
import torch

from cockpit.models.sweep import Instance
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.custody.pull import (
    PART_SUFFIX,
    PULL_IN_FLIGHT,
    PullProgress,
    pull,
    remote_manifest,
)
from cockpit.services.custody.verify import make_pool, marker_path, run_verification
from cockpit.services.transport import ssh
from cockpit.services.transport.remote import SshBox
from tests.sshd import Sshd
from tests.test_status_sshd import write_sweep

pytestmark = pytest.mark.sshd
BIG = 300 << 20


def write_durable(root: Path) -> Path:
    """A durable root with three finished cells (one with a 300 MB file) and a queue."""
    box = root / "box with space"
    durable = box / "durable"
    for index, cell in enumerate(("cellA", "cellB", "cellC")):
        folder = durable / cell
        folder.mkdir(parents=True)
        torch.save({"model_state_dict": {"w": torch.full((64, 64), float(index))}}, folder / "best.pth")
        (folder / "best_metrics.json").write_text(json.dumps({"epoch": 2, "psnr": 20.0 + index}))
        (folder / f"{cell}.log").write_text("Epoch 2/2 | loss 0.1\n")
    # File names are data, whatever they hold: spaces, quotes, $(...), unicode. (A newline or
    # a dot-folder is not an ordinary name: refused, see test_custody_evidence.py.)
    (durable / "cellA" / "eval out $(touch PWNED);'q' next 显存.json").write_text("{}")
    big = bytearray(BIG)
    big[::4096] = os.urandom(len(big[::4096]))  # not all zeros, still quick to make
    (durable / "cellC" / "latest.pth.data").write_bytes(bytes(big))
    (box / "queue_1.txt").write_text("cfg/cellA.yaml t 2\ncfg/cellB.yaml t 2\ncfg/cellC.yaml t 2\n")
    (box / "q1_master.log").write_text("".join(
        f"[2026-11-21 10:00:0{i}] [{i + 1}/3] FINISHED {c} (exit=0)\n"
        for i, c in enumerate(("cellA", "cellB", "cellC"))))
    return box


def instance_for(tmp_path: Path, sshd: Sshd, box: Path) -> tuple[Instance, ssh.Target]:
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep_file = write_sweep(tmp_path, config, box)
    text = sweep_file.read_text().replace(f'durable_root: "{box}"', f'durable_root: "{box}/durable"')
    sweep_file.write_text(text)
    loaded = load_sweep(sweep_file)
    inst = loaded.sweep.instances[0]
    return inst, ssh.build_target(inst, loaded.sweep.ssh, loaded.directory)


def pwned(root: Path) -> bool:
    return any(root.rglob("PWNED"))


def finals_are_right(dest: Path, expected: dict[str, str]) -> None:
    """Every file under a final name has the manifest's content; parts are the only partials."""
    for path in dest.rglob("*"):
        if path.is_file() and not path.name.endswith(PART_SUFFIX):
            rel = str(path.relative_to(dest))
            assert rel in expected, f"unexpected final file {rel}"
            assert hashlib.sha256(path.read_bytes()).hexdigest() == expected[rel], rel


async def test_manifest_and_pull_over_sftp(sshd: Sshd, tmp_path: Path) -> None:
    box = write_durable(tmp_path)
    inst, target = instance_for(tmp_path, sshd, box)
    remote = SshBox(await ssh.connect(target), owns=True)
    try:
        state = await remote_manifest(remote, inst.name, str(box / "durable"), inst.queue_log,
                                      ["cellA", "cellB", "cellC", "missing"])
        manifest = state.manifest
        assert state.hasher in ("openssl", "sha256sum")
        big = next(f for f in manifest.files if f.path == "latest.pth.data")
        assert big.size == BIG
        assert big.sha256 == hashlib.sha256((box / "durable/cellC/latest.pth.data").read_bytes()).hexdigest()
        assert manifest.cell("missing") is not None and not manifest.cell("missing").exists  # type: ignore[union-attr]
        assert len(state.finished_lines) == 3
        assert all(manifest.evidence_of(c).proven_ok for c in ("cellA", "cellB", "cellC"))
        dest = tmp_path / "pulled"
        assert any("$(touch PWNED)" in f.path and "显存" in f.path for f in manifest.files)
        result = await pull(remote, manifest, dest)
        assert result.ok and result.bytes_moved == manifest.total_bytes
        assert not pwned(tmp_path), "a file name never executes"
        expected = {f"{f.cell}/{f.path}": f.sha256 for f in manifest.files}
        finals_are_right(dest, expected)
        again = await pull(remote, manifest, dest)
        assert again.ok and again.bytes_moved == 0, "a complete pull moves nothing"
    finally:
        await remote.close()


async def test_a_pull_killed_at_random_points_resumes_to_matching_hashes(sshd: Sshd, tmp_path: Path) -> None:
    box = write_durable(tmp_path)
    inst, target = instance_for(tmp_path, sshd, box)
    dest = tmp_path / "pulled"
    rng = random.Random(20261121)
    cells = ["cellA", "cellB", "cellC"]
    conn = SshBox(await ssh.connect(target), owns=True)
    manifest = (await remote_manifest(conn, inst.name, str(box / "durable"), None, cells)).manifest
    await conn.close()
    expected = {f"{f.cell}/{f.path}": f.sha256 for f in manifest.files}
    total = manifest.total_bytes
    moved_total = 0
    # A cut while bytes remain to be asked for: the last PULL_IN_FLIGHT bytes may all be on
    # their way already when sshd dies, and a pull that received them all rightly succeeds.
    cut_points = sorted(rng.sample(range(total // 20, total - PULL_IN_FLIGHT - (1 << 20)), 5))
    for cut in cut_points:
        conn = SshBox(await ssh.connect(target), owns=True)
        fired = False

        def kill_at(progress: PullProgress, cut: int = cut) -> None:
            nonlocal fired
            if not fired and progress.done >= cut:
                fired = True
                sshd.stop()  # sshd and every session it forked: the box vanishes mid-transfer

        result = await pull(conn, manifest, dest, on_progress=kill_at)
        moved_total += result.bytes_moved
        await conn.close()
        assert fired, "the cut happened during the transfer"
        assert not result.ok and any("interrupted" in o.detail for o in result.failures)
        finals_are_right(dest, expected)  # nothing partial or wrong under a final name
        sshd.start()
    conn = SshBox(await ssh.connect(target), owns=True)
    last = await pull(conn, manifest, dest)
    await conn.close()
    assert last.ok, last.failures
    moved_total += last.bytes_moved
    finals_are_right(dest, expected)
    assert set(expected) == {str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()}
    # Resuming moved each byte about once: far less than restarting after every cut would.
    assert moved_total < total * 1.6, (moved_total, total)


async def test_verify_writes_the_marker_only_at_n_of_n(sshd: Sshd, tmp_path: Path) -> None:
    box = write_durable(tmp_path)
    inst, target = instance_for(tmp_path, sshd, box)
    dest = tmp_path / "pulled" / inst.name
    conn = SshBox(await ssh.connect(target), owns=True)
    with make_pool(2) as pool:
        fired = False

        def kill_early(progress: PullProgress) -> None:
            nonlocal fired
            if not fired and progress.done > (64 << 20):
                fired = True
                sshd.stop()

        report = await run_verification(conn, inst, dest, "loopback-test", pool,
                                        on_progress=kill_early)
        await conn.close()
        assert report.verification is not None and not report.verification.complete
        assert not marker_path(dest).exists(), "PULL_VERIFIED.json is never written early"
        sshd.start()
        conn = SshBox(await ssh.connect(target), owns=True)
        report = await run_verification(conn, inst, dest, "loopback-test", pool)
        await conn.close()
    assert report.verification is not None, report.error
    assert report.verification.summary == "3/3 loaded", report.verification.verdicts
    doc = json.loads(marker_path(dest).read_text())
    assert doc["manifest_sha256"] == report.verification.manifest_digest
    assert (doc["expected"], doc["loaded"]) == (3, 3) and doc["bytes"] > BIG
    assert [c["metric"] for c in doc["cells"]] == ["epoch=2 psnr=20", "epoch=2 psnr=21", "epoch=2 psnr=22"]
