"""`cockpit status` and the fleet service against a real OpenSSH sshd on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.models.snapshot import GpuStatus, Reachability
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import Backoff, Fleet, HostWatcher, status_once
from tests.sshd import Sshd, keygen

pytestmark = pytest.mark.sshd


def write_box(root: Path) -> Path:
    """A remote-looking tree on this machine: queue, logs, checkpoint."""
    box = root / "box with space"
    (box / "runs" / "logs").mkdir(parents=True)
    (box / "ckpt" / "cellA").mkdir(parents=True)
    (box / "queue_1.txt").write_text("configs/cellA.yaml recon 2\n")
    (box / "q1_master.log").write_bytes(b"[2026-11-21 10:00:00] [1/1] STARTING cellA\n\xff\xfe bad\n")
    (box / "runs" / "logs" / "cellA.log").write_text("Epoch 1/2 | loss 0.5\n")
    (box / "ckpt" / "cellA" / "best.pth").write_bytes(b"x" * 10)
    return box


def write_sweep(directory: Path, config: Path, box: Path, *, alias: str = "gpu-box-1") -> Path:
    path = directory / "sweep.yaml"
    path.write_text(
        f"""sweep: loopback-test
interval: 1s
ssh:
  config: [{config}]
  keepalive_interval: 1s
  connect_timeout: 5s
instances:
  - name: b1
    profile: generic-ssh
    host: {alias}
    queue: "{box}/queue_1.txt"
    queue_log: "{box}/q1_master.log"
    run_logs: "{box}/runs/logs"
    checkpoints: "{box}/ckpt"
    durable_root: "{box}"
"""
    )
    return path


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True,
                          text=True, env=env, timeout=60)


def test_status_json_through_ssh_config_alias(sshd: Sshd, tmp_path: Path) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep = write_sweep(tmp_path, config, box)
    before = time.time()
    result = run_cli("status", str(sweep), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (inst,) = doc["instances"]
    assert inst["reachable"] is True and inst["reachability"] == "connected"
    assert inst["observed_at_epoch"] >= before
    assert inst["gpu"]["status"] == "absent"  # no nvidia-smi on this machine
    paths = {m["path"]: m for m in inst["mounts"]}
    assert str(box) in paths
    mount = paths[str(box)]
    assert mount["bytes_total"] > 0 and mount["inodes_total"] > 0
    assert 0 <= mount["inodes_pct"] <= 100
    assert inst["queue"]["queue_log"]["size"] == (box / "q1_master.log").stat().st_size
    assert [Path(r["path"]).name for r in inst["queue"]["run_logs"]] == ["cellA.log"]
    assert inst["queue"]["newest_checkpoint"]["path"].endswith("best.pth")
    assert inst["queue"]["alive"] is False
    assert inst["memory"]["source"] in {"cgroup-v1", "cgroup-v2", "meminfo"}


def test_unknown_host_key_needs_approval_with_fingerprint(sshd: Sshd, tmp_path: Path) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path, trusted=False)
    sweep = write_sweep(tmp_path, config, box)
    expected = subprocess.run(["ssh-keygen", "-l", "-f", str(sshd.host_key.with_suffix(".pub"))],
                              capture_output=True, text=True, check=True).stdout.split()[1]
    result = run_cli("status", str(sweep), "--json")
    assert result.returncode == 1
    (inst,) = json.loads(result.stdout)["instances"]
    assert inst["reachability"] == "needs-approval"
    assert inst["host_key"]["fingerprint"] == expected
    # Headless: refuse, and say how to approve after checking out of band.
    table = run_cli("status", str(sweep))
    assert expected in table.stderr and "cockpit trust" in table.stderr
    # Approving the wrong fingerprint adds nothing; the right one lets status through.
    bad = run_cli("trust", str(sweep), "b1", "--fingerprint", "SHA256:not-it")
    assert bad.returncode == 1
    assert run_cli("status", str(sweep), "--json").returncode == 1
    good = run_cli("trust", str(sweep), "b1", "--fingerprint", expected)
    assert good.returncode == 0, good.stderr
    assert run_cli("status", str(sweep), "--json").returncode == 0


def test_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    other = tmp_path / "other_key"
    keygen(other)
    (tmp_path / "known_hosts").write_text(sshd.known_hosts_line(other))
    sweep = write_sweep(tmp_path, config, box)
    result = run_cli("status", str(sweep), "--json")
    assert result.returncode == 1
    (inst,) = json.loads(result.stdout)["instances"]
    assert inst["reachability"] == "key-changed"
    assert "mounts" not in inst  # nothing was read from a box we could not trust
    # The trust command refuses a changed key even with the right fingerprint.
    fp = inst["host_key"]["fingerprint"]
    refused = run_cli("trust", str(sweep), "b1", "--fingerprint", fp)
    assert refused.returncode == 1 and "never accepted" in refused.stderr


async def connected_watcher(sshd: Sshd, tmp_path: Path) -> tuple[Path, HostWatcher]:
    """A sandbox box and a HostWatcher already connected to it through an alias."""
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    loaded = load_sweep(write_sweep(tmp_path, config, box))
    watcher = HostWatcher(loaded.sweep.instances[0], loaded.profiles["generic-ssh"],
                          loaded.sweep.ssh, loaded.directory)
    assert await watcher.connect()
    return box, watcher


def _listing(root: Path) -> dict[str, tuple[int, float]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime) for p in sorted(root.rglob("*"))}


async def test_probe_leaves_remote_tree_unchanged(sshd: Sshd, tmp_path: Path) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    loaded = load_sweep(write_sweep(tmp_path, config, box))
    watched = [box, Path("/tmp")]
    before = [_listing(box), sorted(os.listdir("/tmp"))]
    watcher = HostWatcher(loaded.sweep.instances[0], loaded.profiles["generic-ssh"],
                          loaded.sweep.ssh, loaded.directory)
    assert await watcher.connect()
    for _ in range(3):
        await watcher.tick()
    await watcher.close()
    after = [_listing(box), sorted(os.listdir("/tmp"))]
    assert before == after, f"the probe changed {watched}"


async def test_logs_are_read_incrementally_and_survive_rotation(sshd: Sshd, tmp_path: Path) -> None:
    box, watcher = await connected_watcher(sshd, tmp_path)
    master = box / "q1_master.log"
    first = await watcher.tick()
    got = {c.path: c for c in first.log_chunks}
    assert got[str(master)].data == master.read_bytes()  # non-UTF-8 bytes intact
    with master.open("ab") as handle:
        handle.write(b"[2026-11-21 10:05:00] [1/1] FINISHED cellA (exit=0)\n")
    second = await watcher.tick()
    (chunk,) = [c for c in second.log_chunks if c.path == str(master)]
    assert chunk.data == b"[2026-11-21 10:05:00] [1/1] FINISHED cellA (exit=0)\n"
    assert chunk.offset > 0 and not chunk.reset
    third = await watcher.tick()
    assert not [c for c in third.log_chunks if c.path == str(master) and c.data]
    # Rotation: the file is replaced by a new, shorter one.
    master.rename(box / "q1_master.log.1")
    master.write_bytes(b"fresh\n")
    fourth = await watcher.tick()
    (rotated,) = [c for c in fourth.log_chunks if c.path == str(master)]
    assert rotated.reset and rotated.offset == 0 and rotated.data == b"fresh\n"
    # Truncation in place.
    master.write_bytes(b"")
    master.write_bytes(b"x\n")
    fifth = await watcher.tick()
    (trunc,) = [c for c in fifth.log_chunks if c.path == str(master)]
    assert trunc.reset and trunc.data == b"x\n"
    # A run log that grows is read from where it was.
    cell = box / "runs" / "logs" / "cellA.log"
    with cell.open("a") as handle:
        handle.write("Epoch 2/2 | loss 0.4\n")
    await watcher.tick()
    sixth = await watcher.tick()
    seen = b"".join(c.data for snap in (fifth, sixth) for c in snap.log_chunks
                    if c.path == str(cell))
    assert b"Epoch 2/2" in seen
    await watcher.close()


async def test_sshd_killed_mid_watch_goes_stale_then_recovers(sshd: Sshd, tmp_path: Path) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    loaded = load_sweep(write_sweep(tmp_path, config, box))
    fleet = Fleet(loaded.sweep, loaded.profiles, loaded.directory,
                  backoff=Backoff(base=0.2, cap=1.0))
    fleet.start()
    states: list[tuple[Reachability, float]] = []
    snapshots = 0

    async def wait_for(predicate: object, timeout: float) -> None:
        nonlocal snapshots
        deadline = time.monotonic() + timeout
        async for event in fleet.events():
            if hasattr(event, "state"):
                states.append((event.state.reachability, event.state.since))
            else:
                snapshots += 1
            if predicate():  # type: ignore[operator]
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; states seen: {states}")

    try:
        await asyncio.wait_for(wait_for(lambda: snapshots >= 2, 20), 25)
        killed_at = time.time()
        sshd.stop()
        # The probe session dies with sshd; keepalive (1s x 3) catches silent links too.
        await asyncio.wait_for(wait_for(lambda: states[-1][0] is Reachability.STALE, 20), 25)
        stale_since = states[-1][1]
        assert stale_since >= killed_at - 0.5
        sshd.start()
        count = snapshots
        await asyncio.wait_for(
            wait_for(lambda: states[-1][0] is Reachability.CONNECTED and snapshots > count, 30),
            35,
        )
        watcher = fleet.watchers["b1"]
        assert watcher.last_snapshot is not None
        assert watcher.last_snapshot.gpu.status is GpuStatus.ABSENT
    finally:
        await fleet.stop()


async def test_status_once_reports_unreachable_without_crashing(tmp_path: Path) -> None:
    # No sshd at all on this port: the box is reported, not crashed on.
    from tests.sshd import free_port

    port = free_port()
    config = tmp_path / "ssh_config"
    config.write_text(f"Host nowhere\n  HostName 127.0.0.1\n  Port {port}\n  User root\n")
    box = write_box(tmp_path)
    loaded = load_sweep(write_sweep(tmp_path, config, box, alias="nowhere"))
    (res,) = await status_once(loaded.sweep, loaded.profiles, loaded.directory, timeout=10)
    assert res.snapshot is None
    assert res.state.reachability is Reachability.UNREACHABLE
    assert "refused" in res.state.detail.lower() or "connect" in res.state.detail.lower()
