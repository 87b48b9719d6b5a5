"""Discover a queue started by hand in tmux on the loopback box (not through the cockpit), and
attach with the sweep it printed: the queue shows the right cells and states."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cockpit.models.hostview import HostTracker
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import status_once
from tests.sshd import Sshd, require

pytestmark = pytest.mark.sshd
DATA = Path(__file__).resolve().parents[1] / "cockpit" / "data"

STUB = """#!/usr/bin/env bash
# A cell runner stand-in: a per-run log through tee, like run_one.sh; cell b takes a while.
NAME=$(basename "$1" .yaml)
mkdir -p logs
{ echo "Epoch 1/2 | loss=0.5"; [ "$NAME" = b ] && sleep 60; echo "Epoch 2/2 | loss=0.4"; } \
    | tee "logs/$NAME.log"
"""


def test_discover_a_hand_started_queue_and_attach(sshd: Sshd, tmp_path: Path) -> None:
    require(shutil.which("tmux") or "/usr/bin/tmux", "tmux")
    box = tmp_path / "hand box"
    box.mkdir()
    shutil.copy(DATA / "run_queue.sh", box / "run_queue.sh")
    (box / "stub_one.sh").write_text(STUB)
    (box / "queue.txt").write_text("cfg/a.yaml t 2\ncfg/b.yaml t 2\ncfg/c.yaml t 2\n")
    session = f"byhand{os.getpid()}"
    command = "RUN_ONE=./stub_one.sh bash run_queue.sh queue.txt 2>&1 | tee -a master.log"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-c", str(box), command], check=True)
    try:
        deadline = time.monotonic() + 30
        while not ((box / "logs" / "b.log").exists() and "STARTING b" in (box / "master.log").read_text()):
            assert time.monotonic() < deadline, "the hand-started queue did not reach cell b"
            time.sleep(0.2)
        config = sshd.write_client_files("gpu-box-1", tmp_path)
        result = subprocess.run(
            [sys.executable, "-m", "cockpit", "discover", "gpu-box-1", "--ssh-config", str(config),
             "--name", "found"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        doc = yaml.safe_load(result.stdout)
        # Other queues may run on this machine (the demo fleet): ours is the one on our file.
        (inst,) = [i for i in doc["instances"] if i["queue"] == str(box / "queue.txt")]
        assert inst["queue"] == str(box / "queue.txt")
        assert inst["queue_log"] == str(box / "master.log")
        assert inst["run_logs"] == str(box / "logs")
        assert inst["tmux_session"] == session
        doc["instances"] = [inst]
        sweep_file = tmp_path / "found.yaml"
        sweep_file.write_text(yaml.safe_dump(doc))
        loaded = load_sweep(sweep_file)
        import asyncio

        (status,) = asyncio.run(status_once(loaded.sweep, loaded.profiles, loaded.directory))
        assert status.snapshot is not None
        tracker = HostTracker(loaded.sweep.instances[0], loaded.profiles["generic-ssh"],
                              load_rulebook(user=False))
        tracker.absorb(status.snapshot)
        view = tracker.queue_view()
        assert [(c.name, c.state.value) for c in view.cells] == [
            ("a", "finished ok"), ("b", "running"), ("c", "pending")]
    finally:
        subprocess.run(["tmux", "kill-session", "-t", f"={session}"], capture_output=True, check=False)
