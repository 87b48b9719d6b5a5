"""The embedded demo fleet: comes up, answers `cockpit status`, shuts down cleanly."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cockpit.demo.server import READY
from tests.demo import marked_processes, start_demo


def status_json(sweep: Path) -> dict[str, object]:
    result = subprocess.run([sys.executable, "-m", "cockpit", "status", str(sweep), "--json"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    doc: dict[str, object] = json.loads(result.stdout)
    return doc


def test_status_on_demo_fleet_reports_three_live_boxes(demo: Path) -> None:
    before = time.time()
    doc = status_json(demo / "sweep.yaml")
    instances = doc["instances"]
    assert isinstance(instances, list)
    assert [i["name"] for i in instances] == ["a1", "r1", "v1"]
    assert {i["profile"] for i in instances} == {"autodl", "runpod", "vastai"}
    for inst in instances:
        assert inst["reachable"] is True, inst
        assert inst["observed_at_epoch"] >= before
        assert inst["gpu"]["status"] == "ok"
        assert inst["gpu"]["gpus"], inst["gpu"]
        for mount in inst["mounts"]:
            assert mount["bytes_total"] > 0 and mount["inodes_total"] > 0, mount
        assert inst["queue"]["queue_log"] is not None
        assert "configs/ablation/" in inst["queue"]["queue_text"]
    a1 = instances[0]
    assert len(a1["gpu"]["gpus"]) == 2
    assert a1["gpu"]["gpus"][0]["name"] == "NVIDIA A100-SXM4-80GB"
    # vast.ai's simulated H100 reports power as [N/A], like some cloud GPUs do.
    v1 = instances[2]
    assert v1["gpu"]["gpus"][0]["power_w"] == {"na": "[N/A]"}


def test_demo_queue_is_real_and_observed(tmp_path: Path) -> None:
    """Within a couple of ticks a cell runs: the queue process is alive, GPU 0 is busy with the
    trainer's real PID, and the master log follows the run_queue contract.

    A fleet of its own: the session's shared demo has finished a1's queue when this test
    happens to run late (it failed that way after three minutes of UI tests)."""
    proc = start_demo(tmp_path)
    try:
        deadline = time.monotonic() + 45
        while True:
            doc = status_json(tmp_path / "sweep.yaml")
            a1 = doc["instances"][0]  # type: ignore[index]
            gpu0 = a1["gpu"]["gpus"][0]
            if a1["queue"]["alive"] and gpu0["processes"]:
                break
            assert time.monotonic() < deadline, a1
            time.sleep(1)
        pid = gpu0["processes"][0]["pid"]
        assert (Path("/proc") / str(pid)).exists()
        master = (tmp_path / "boxes" / "a1" / "data" / "q1_master.log").read_text()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    assert "=== Queue queue_1.txt: 4 ablations, starting from 1 on demo-a1 ===" in master
    assert "[1/4] STARTING baseline (reconstruction, 6ep)" in master


def test_demo_shuts_down_cleanly_on_sigint_and_sigterm(tmp_path: Path) -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        root = tmp_path / sig.name
        proc = start_demo(root)
        deadline = time.monotonic() + 30
        while not marked_processes(root):  # the queues have started
            assert time.monotonic() < deadline
            time.sleep(0.2)
        proc.send_signal(sig)
        assert proc.wait(30) == 0
        assert marked_processes(root) == [], f"{sig.name} left processes behind"
        assert not (root / READY).exists()
        # No tmux server is left for any box either.
        for box in (root / "boxes").iterdir():
            env = {**os.environ, "TMUX_TMPDIR": str(box / "tmp")}
            ls = subprocess.run(["tmux", "ls"], env=env, capture_output=True, text=True)
            assert ls.returncode != 0


def test_demo_failures_are_classified_by_cockpit_classify(demo: Path) -> None:
    """The demo's failing cells (a CUDA OOM on a1, a checkpoint save on a full disk on r1) come
    out of `cockpit classify` with their catalog ids and a run-ending exit code."""
    logs = {"a1": "det_baseline", "r1": "seg_big"}
    paths = {box: demo / "boxes" / box / "data" / "runs" / "logs" / f"{cell}.log"
             for box, cell in logs.items()}
    deadline = time.monotonic() + 90
    while not all(p.exists() and b"Error" in p.read_bytes() for p in paths.values()):
        assert time.monotonic() < deadline, "the demo's failing cells never failed"
        time.sleep(1)
    for box, expected in (("a1", "M2"), ("r1", "U6")):
        result = subprocess.run([sys.executable, "-m", "cockpit", "classify", "--json",
                                 str(paths[box])], capture_output=True, text=True, timeout=60)
        assert result.returncode == 1, result.stderr
        (event,) = json.loads(result.stdout)["files"][0]["events"]
        assert event["rule"] == expected, event
        assert event["frame"], "the user frame of the traceback is named"
    clean = demo / "boxes" / "a1" / "data" / "runs" / "logs" / "baseline.log"
    result = subprocess.run([sys.executable, "-m", "cockpit", "classify", str(clean)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout
