"""Launch, resume and stop against the loopback sshd with real tmux and a tiny real torch
training script: alive within seconds, never twice, resumed at the right cell after the tmux
session dies mid-cell, and a versioned runner is never overwritten."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.queue.launch import LaunchRefused, launch, resume, session_name, snapshot, stop
from cockpit.services.transport import ssh
from cockpit.services.transport.remote import SshBox
from tests.sshd import Sshd, require

pytestmark = pytest.mark.sshd

TRAIN = """
import json, os, time, torch
n, d, name = int(os.environ["EPOCHS"]), os.environ["CKPT_DIR"], os.environ["NAME"]
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(1, n + 1):
    x = torch.randn(64, 4)
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print(f"Epoch {epoch}/{n} | loss={loss.item():.4f}", flush=True)
    torch.save({"model_state_dict": model.state_dict()}, os.path.join(d, "best.pth"))
    time.sleep(0.6 if name == "b" else 0.1)
with open(os.path.join(d, "best_metrics.json"), "w") as f:
    json.dump({"epoch": n, "loss": loss.item()}, f)
print("Training completed", flush=True)
"""


def make_box(tmp_path: Path, sshd: Sshd) -> Path:
    box = tmp_path / "box"
    (box / "cfg").mkdir(parents=True)
    (box / "train.py").write_text(TRAIN)
    (box / "queue.txt").write_text("cfg/a.yaml t 2\ncfg/b.yaml t 10\ncfg/c.yaml t 2\n")
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"""sweep: launchtest{tmp_path.name[-6:].replace('-', '')}
ssh:
  config: [{config}]
  connect_timeout: 5s
instances:
  - name: b1
    profile: generic-ssh
    host: gpu-box-1
    queue: "{box}/queue.txt"
    queue_log: "{box}/master.log"
    run_logs: "{box}/logs"
    checkpoints: "{box}/ckpt"
    durable_root: "{box}/durable"
    launch:
      command: '{sys.executable} {box}/train.py'
""")
    return sweep


def contains(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text()


def kill_session(session: str, *, check: bool) -> None:
    subprocess.run(["tmux", "kill-session", "-t", f"={session}"], capture_output=True, check=check)


def read(path: Path) -> str:
    return path.read_text()


def size(path: Path) -> int:
    return path.stat().st_size


def tamper(path: Path) -> None:
    path.write_text(path.read_text() + "\n# edited by hand\n")


async def wait_for(path: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not contains(path, text):
        assert time.monotonic() < deadline, f"{text!r} not in {path} after {timeout}s"
        await asyncio.sleep(0.3)


async def test_launch_kill_resume_and_refusals(sshd: Sshd, tmp_path: Path) -> None:
    require(shutil.which("tmux") or "/usr/bin/tmux", "tmux")
    loaded = load_sweep(make_box(tmp_path, sshd))
    inst, name = loaded.sweep.instances[0], loaded.sweep.sweep
    box_dir = tmp_path / "box"
    session = session_name(name, inst.name)
    remote = SshBox(await ssh.connect(ssh.build_target(inst, loaded.sweep.ssh, loaded.directory)),
                    owns=True)
    try:
        result = await launch(remote, inst, name)
        assert result.session == session and result.pids and result.start_index == 1
        assert result.seconds_to_alive < 60
        print(f"launch-to-alive {result.seconds_to_alive:.2f} s")
        with pytest.raises(LaunchRefused, match="already runs"):
            await launch(remote, inst, name)
        with pytest.raises(LaunchRefused, match="still runs"):
            await resume(remote, inst, name)
        await wait_for(box_dir / "master.log", "STARTING b", 60)
        await wait_for(box_dir / "logs" / "b.log", "Epoch 2/10", 60)
        # The session dies mid-cell (a crash, an OOM of the runner, a human).
        kill_session(session, check=True)
        deadline = time.monotonic() + 20
        while (await snapshot(remote, inst)).queue.process_pids:
            assert time.monotonic() < deadline, "the queue did not stop"
            await asyncio.sleep(0.3)
        resumed = await resume(remote, inst, name)
        assert resumed.start_index == 2, "a finished, b interrupted: resume at b"
        await wait_for(box_dir / "master.log", "QUEUE DONE", 120)
        log = read(box_dir / "master.log")
        assert log.count("STARTING a") == 1 and log.count("STARTING b") == 2
        assert "FINISHED c (exit=0)" in log
        for cell in "abc":
            assert size(box_dir / "durable" / cell / "best.pth") > 0
            assert f"synced {cell} to durable storage" in log
        # A versioned runner with other content (edited on the box) is never overwritten.
        tamper(Path(resumed.runner))
        with pytest.raises(LaunchRefused, match="never overwritten"):
            await launch(remote, inst, name)
        assert await stop(remote, inst, name) in ("nothing of this queue runs",
                                                 f"killed tmux session {session}")
    finally:
        kill_session(session, check=False)
        await remote.close()
