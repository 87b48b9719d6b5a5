"""Local host mode, probe restart on a live connection, and the packaged data folders."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cockpit.models.snapshot import GpuStatus
from cockpit.services.transport import ssh
from tests.sshd import Sshd
from tests.test_status_sshd import connected_watcher, write_box


def test_local_mode_reads_this_machine_without_a_gpu(tmp_path: Path) -> None:
    box = write_box(tmp_path)
    sweep = tmp_path / "local.yaml"
    sweep.write_text(
        f"""sweep: local-test
instances:
  - name: here
    profile: local
    host: local
    queue_log: "{box}/q1_master.log"
    run_logs: "{box}/runs/logs"
    extra_mounts: ["{box}"]
"""
    )
    result = subprocess.run([sys.executable, "-m", "cockpit", "status", str(sweep), "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    (inst,) = json.loads(result.stdout)["instances"]
    # No NVIDIA driver here: NVML reports it instead of failing.
    assert inst["gpu"]["status"] == "absent"
    assert inst["gpu"]["message"] == "no GPU (NVML not found)"
    mounts = {m["path"]: m for m in inst["mounts"]}
    assert mounts[str(box)]["inodes_total"] > 0
    assert mounts["~"]["target"]  # the profile's home tier, expanded on this machine
    assert inst["queue"]["queue_log"]["size"] == (box / "q1_master.log").stat().st_size


@pytest.mark.sshd
async def test_dead_probe_is_restarted_on_a_live_connection(sshd: Sshd, tmp_path: Path) -> None:
    box, watcher = await connected_watcher(sshd, tmp_path)
    first = await watcher.tick()
    pgrep = await asyncio.create_subprocess_exec("pgrep", "-f", "cockpit-probe",
                                                 stdout=asyncio.subprocess.PIPE)
    out, _ = await pgrep.communicate()
    probe_pids = [int(p) for p in out.split()]
    assert probe_pids, "the remote probe should be running"
    for pid in probe_pids:
        os.kill(pid, 9)
    second = await watcher.tick()
    assert watcher.probe_restarts == 1
    # The dead probe's channel slot was given back: exactly one channel is held now.
    slot = ssh.channel_slot(watcher.conn)
    assert slot._value == ssh.CHANNELS_PER_CONNECTION - 1
    assert second.seq > first.seq and second.gpu.status is GpuStatus.ABSENT
    # The log cursor survived the restart: nothing already read is read again.
    master = str(box / "q1_master.log")
    assert not [c for c in second.log_chunks if c.path == master and c.data]
    await watcher.close()


def test_wheel_ships_profiles_and_themes(tmp_path: Path) -> None:
    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(out), str(Path(__file__).parents[1])], check=True,
                   timeout=300)
    (wheel,) = out.glob("cockpit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "cockpit/_profiles/autodl.yaml" in names
    assert "cockpit/_themes/cockpit.tcss" in names
    assert "cockpit/services/transport/probe.sh" in names
    assert "cockpit/services/custody/manifest.sh" in names  # the verify path runs it on the box
    assert "cockpit/demo/assets/nvidia-smi" in names
    assert "cockpit/data/rules.yaml" in names
