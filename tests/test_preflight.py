"""Preflight against a real box on the loopback sshd: a missing durable mount fails, an
inode budget that does not fit fails naming the shortfall, and the CLI's exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.models.preflight import Level
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.queue.preflight import parse_facts, preflight_instance
from tests.sshd import Sshd
from tests.test_status_sshd import write_box, write_sweep

pytestmark = pytest.mark.sshd


def sweep_with(tmp_path: Path, sshd: Sshd, extra: str, *, durable: str | None = None) -> Path:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    path = write_sweep(tmp_path, config, box)
    text = path.read_text()
    if durable is not None:
        text = text.replace(f'durable_root: "{box}"', f'durable_root: "{durable}"')
    path.write_text(text + extra)
    return path


def checks(report: object) -> dict[str, tuple[str, str]]:
    return {c.name: (c.level.name, c.reason) for c in report.checks}  # type: ignore[attr-defined]


async def test_a_missing_durable_mount_fails(sshd: Sshd, tmp_path: Path) -> None:
    loaded = load_sweep(sweep_with(tmp_path, sshd, "", durable="/nonexistent/durable"))
    inst = loaded.sweep.instances[0]
    report = await preflight_instance(inst, loaded.profiles[inst.profile], loaded.sweep, loaded.directory)
    found = checks(report)
    assert found["durable"][0] == "FAIL" and "/nonexistent/durable does not exist" in found["durable"][1]
    assert report.level is Level.FAIL


async def test_an_inode_budget_that_does_not_fit_fails_naming_it(sshd: Sshd, tmp_path: Path) -> None:
    budget = "    budget: {checkpoint: 1K, inodes_per_cell: 1000000000000}\n    expect_gpu: {count: 1}\n"
    loaded = load_sweep(sweep_with(tmp_path, sshd, budget))
    inst = loaded.sweep.instances[0]
    report = await preflight_instance(inst, loaded.profiles[inst.profile], loaded.sweep, loaded.directory)
    found = checks(report)
    room = [v for k, v in found.items() if k.startswith("room")]
    assert room and all(level == "FAIL" for level, _ in room)
    assert all("needs 1000000000000 inodes for 1 cells" in reason and "short" in reason
               for _, reason in room)
    # A box without nvidia-smi cannot give the GPU the sweep expects.
    assert found["gpu"][0] == "FAIL"
    # The generic profile knows no tier that survives: a fact of the platform, not an error in
    # the sweep, so a WARN that says what to do (issue 14: no generic sweep could ever pass).
    assert found["durable"][0] == "WARN" and "durable_mount" in found["durable"][1]


async def test_a_declared_durable_mount_must_really_be_a_mounted_volume(sshd: Sshd, tmp_path: Path) -> None:
    loaded = load_sweep(sweep_with(tmp_path, sshd, f"    durable_mount: {tmp_path}\n"))
    inst = loaded.sweep.instances[0]
    report = await preflight_instance(inst, loaded.profiles[inst.profile], loaded.sweep, loaded.directory)
    level, reason = checks(report)["durable"]
    assert level == "FAIL" and "on the root filesystem" in reason, reason
    volume = Path("/dev/shm") / f"cockpit-durable-{tmp_path.name}"
    volume.mkdir()
    try:
        loaded = load_sweep(sweep_with(tmp_path / "b", sshd, "    durable_mount: /dev/shm\n",
                                       durable=str(volume)))
        inst = loaded.sweep.instances[0]
        report = await preflight_instance(inst, loaded.profiles[inst.profile], loaded.sweep,
                                          loaded.directory)
        level, reason = checks(report)["durable"]
        assert level == "PASS" and "declared durable by the sweep" in reason, reason
    finally:
        volume.rmdir()


def test_preflight_cli_exit_codes(sshd: Sshd, tmp_path: Path) -> None:
    sweep = sweep_with(tmp_path, sshd, "", durable="/nonexistent/durable")
    result = subprocess.run([sys.executable, "-m", "cockpit", "preflight", str(sweep), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    assert doc["instances"][0]["result"] == "FAIL"
    bad = subprocess.run([sys.executable, "-m", "cockpit", "preflight", str(sweep), "--instance", "zz"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "no instance 'zz'" in bad.stderr


def test_facts_parsing() -> None:
    facts = parse_facts("@@driver 550.54.15\n@@cuda 12.4\n@@xid\n[1.0] NVRM: Xid (PCI:0): 79, x\n")
    xid = ("[1.0] NVRM: Xid (PCI:0): 79, x",)
    assert (facts.driver, facts.cuda, facts.xid_lines) == ("550.54.15", "12.4", xid)
    assert parse_facts("@@driver \n@@cuda \n@@xid denied\n").xid_lines is None


def test_facts_parsing_reads_nvswitch_fabric_manager_and_interfaces() -> None:
    text = ("@@driver 550.54.15\n@@cuda 12.4\n@@nvswitch yes\n@@fabricmanager inactive\n@@ip\n"
            "1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN\n"
            "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP\n"
            "2: eth0    inet 10.0.0.5/24 brd 10.0.0.255 scope global eth0\n"
            "@@xidstart\n@@xid\n")
    facts = parse_facts(text)
    assert facts.nvswitch is True and facts.fabric_manager == "inactive"
    assert facts.interfaces is not None
    eth0 = next(i for i in facts.interfaces if i.name == "eth0")
    assert (eth0.mtu, eth0.addrs) == (9000, ("10.0.0.5",))
    assert facts.xid_lines == ()


def test_a_job_group_gets_its_own_preflight_report_from_real_boxes(sshd: Sshd, tmp_path: Path) -> None:
    """Two instances of one job (both the loopback box): `cockpit preflight` adds a report for
    the job, read from the boxes' real facts (the interfaces `ip` lists here)."""
    sweep = sweep_with(tmp_path, sshd, "")
    text = sweep.read_text()
    second = text[text.index("  - name: b1"):].replace("name: b1", "name: b2")
    sweep.write_text(text + second + "jobs:\n  - name: ddp\n    world_size: 2\n    members:\n"
                     "      - {instance: b1, ranks: [0]}\n      - {instance: b2, ranks: [1]}\n")
    result = subprocess.run([sys.executable, "-m", "cockpit", "preflight", str(sweep), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode in (0, 1), result.stderr
    doc = json.loads(result.stdout)
    job = next(r for r in doc["instances"] if r["instance"] == "job ddp")
    names = {c["check"] for c in job["checks"]}
    assert any("interface" in n or "nccl" in n.lower() for n in names), job
