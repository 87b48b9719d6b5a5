"""Fault matrix, part 2: a remote disk that fills during a run, and inodes that run out while
bytes look fine, on small tmpfs mounts watched through the loopback sshd."""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.models.hostview import HostTracker
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import HostWatcher
from tests.sshd import Sshd, require

pytestmark = pytest.mark.sshd


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        require("/nonexistent/root", "root (mount -t tmpfs)")
    mounted: list[Path] = []

    def mount(name: str, options: str) -> Path:
        target = tmp_path / name
        target.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], check=True)
        mounted.append(target)
        return target

    yield mount  # type: ignore[misc]
    for target in mounted:
        subprocess.run(["umount", "-l", str(target)], check=False)


def watch_once(tmp_path: Path, sshd: Sshd, data: Path, logs: Path) -> HostTracker:
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"""sweep: disk
ssh: {{config: [{config}]}}
instances:
  - name: d1
    profile: generic-ssh
    host: gpu-box-1
    run_logs: "{logs}"
    extra_mounts: ["{data}"]
""")
    loaded = load_sweep(sweep)
    tracker = HostTracker(loaded.sweep.instances[0], loaded.profiles["generic-ssh"],
                          load_rulebook(user=False))
    watcher = HostWatcher(loaded.sweep.instances[0], loaded.profiles["generic-ssh"], loaded.sweep.ssh,
                          loaded.directory)

    async def two_ticks() -> None:
        assert await watcher.connect(), watcher.state
        try:
            for _ in range(2):  # the first record finds the logs, the second reads them
                tracker.absorb(await watcher.tick())
        finally:
            await watcher.close()

    asyncio.run(two_ticks())
    return tracker


def test_a_disk_that_fills_during_a_run(sshd: Sshd, tmp_path: Path, tmpfs) -> None:  # type: ignore[no-untyped-def]
    data = tmpfs("data", "size=2m,nr_inodes=10000")
    logs = tmp_path / "logs"
    logs.mkdir()
    # The run writes until the disk is full; the error lands in its own log, as dd prints it.
    with (logs / "cell_a.log").open("ab") as log:
        log.write(b"Epoch 1/3 | loss=0.4\n")
        log.flush()
        subprocess.run(["dd", "if=/dev/zero", f"of={data}/latest.pth.tmp", "bs=64k", "count=100"],
                       stdout=subprocess.DEVNULL, stderr=log, check=False)
    tracker = watch_once(tmp_path, sshd, data, logs)
    judged = {j.kind: j for j in tracker.judgements()}
    assert "disk-pressure" in judged and f"disk 100% {data}" in judged["disk-pressure"].text
    events = {(e.rule_id, e.cell) for e in tracker.failures.events}
    assert ("U7", "cell_a") in events, tracker.failures.events


def test_inodes_run_out_while_bytes_look_fine(sshd: Sshd, tmp_path: Path, tmpfs) -> None:  # type: ignore[no-untyped-def]
    data = tmpfs("data", "size=64m,nr_inodes=200")
    logs = tmp_path / "logs"
    logs.mkdir()
    made = 0
    with pytest.raises(OSError, match="No space left"):
        while True:  # per-sample eval files: tiny, many
            (data / f"sample_{made}.json").write_text("{}")
            made += 1
    tracker = watch_once(tmp_path, sshd, data, logs)
    mount = next(m for m in tracker.snapshot.mounts if m.path == str(data))  # type: ignore[union-attr]
    assert mount.inodes_pct == 100.0 and mount.bytes_pct < 5.0  # type: ignore[operator]
    judged = [j for j in tracker.judgements() if j.kind == "disk-pressure"]
    assert [j.text for j in judged] == [f"inodes 100% {data}"]
    assert "inodes run out first" in judged[0].detail
