"""The demo box assets, run for real: run_queue.sh, run_one.sh, the trainer and nvidia-smi."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "cockpit" / "demo" / "assets"

GPU_QUERY = (
    "--query-gpu=index,name,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,"
    "power.draw,power.limit,clocks.sm,clocks.max.sm,mig.mode.current"
)
APPS_QUERY = "--query-compute-apps=gpu_uuid,pid,used_memory"
FORMAT = "--format=csv,noheader,nounits"

TS = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
HM = r"\d{2}:\d{2}:\d{2}"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def make_box(tmp_path: Path, name: str = "box1") -> Path:
    """A demo box laid out the way the demo fleet prepares one."""
    box = tmp_path / name
    (box / "bin").mkdir(parents=True)
    (box / "tmp").mkdir()
    shutil.copy(ASSETS / "nvidia-smi", box / "bin" / "nvidia-smi")
    (box / "bin" / "nvidia-smi").chmod(0o755)
    shutil.copy(ASSETS.parent.parent / "data" / "run_queue.sh", box / "run_queue.sh")
    shutil.copy(ASSETS / "run_one.sh", box / "run_one.sh")
    (box / "gpu.conf").write_text(
        'GPU_NAME="NVIDIA A100-SXM4-80GB"\nGPU_COUNT=2\nMEM_TOTAL_MIB=81920\n'
        "POWER_LIMIT=400\nCLOCK_MAX=1410\n"
    )
    return box


def box_env(box: Path, **extra: str) -> dict[str, str]:
    """The environment a box command gets, plus the demo's PY and PYTHONPATH."""
    env = {
        "HOME": str(box),
        "PATH": f"{box / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "COCKPIT_BOX": str(box),
        "TMUX_TMPDIR": str(box / "tmp"),
        "PY": sys.executable,
        "PYTHONPATH": str(REPO),
        "LANG": "C.UTF-8",
    }
    env.update(extra)
    return env


def write_cell(box: Path, name: str, **keys: object) -> str:
    cfg = box / "configs" / f"{name}.yaml"
    cfg.parent.mkdir(exist_ok=True)
    cfg.write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in keys.items()))
    return f"configs/{name}.yaml"


def sh(box: Path, command: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/sh", "-c", command], cwd=box, env=box_env(box, **extra),
        capture_output=True, text=True, timeout=60,
    )


def test_queue_runs_cells_syncs_successes_and_reports_the_failure(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    box = make_box(tmp_path)
    ok1 = write_cell(box, "baseline_a", seconds_per_epoch=0.05)
    oom = write_cell(box, "precision_b", seconds_per_epoch=0.05, fail="cuda_oom", fail_at_epoch=1)
    ok2 = write_cell(box, "det_no_fpn", seconds_per_epoch=0.05, base_metric=0.3)
    (box / "queue_1.txt").write_text(
        f"# demo queue\n\n{ok1} reconstruction 2\n{oom}\treconstruction 2\n{ok2} detection 2\n"
    )

    proc = sh(box, "bash run_queue.sh queue_1.txt", DEMO_HOSTNAME="box1")
    out = proc.stdout
    assert proc.returncode == 1, out + proc.stderr

    lines = out.splitlines()
    assert lines[0] == "=== Queue queue_1.txt: 3 ablations, starting from 1 on box1 ==="
    started = [ln for ln in lines if " STARTING " in ln]
    finished = [ln for ln in lines if " FINISHED " in ln]
    expected = [("baseline_a", "reconstruction", 0), ("precision_b", "reconstruction", 1),
                ("det_no_fpn", "detection", 0)]
    assert len(started) == len(finished) == 3
    for i, (name, task, rc) in enumerate(expected, start=1):
        assert re.fullmatch(rf"\[{TS}\] \[{i}/3\] STARTING {name} \({task}, 2ep\)", started[i - 1])
        assert re.fullmatch(rf"\[{TS}\] \[{i}/3\] FINISHED {name} \(exit={rc}\)", finished[i - 1])
        at = lines.index(started[i - 1])
        assert re.fullmatch(r"=+", lines[at - 1]) and re.fullmatch(r"=+", lines[at + 1])
    assert re.fullmatch(rf"\[{TS}\] === QUEUE DONE on box1 -- 1 cell\(s\) FAILED: precision_b ===",
                        lines[-1])
    assert "ERROR" not in out

    data, durable = box / "data", box / "durable"
    for name in ("baseline_a", "det_no_fpn"):
        assert re.search(rf"^\[{HM}\] kept best.pth, pruned latest.pth for {name}$", out, re.M)
        assert re.search(rf"^\[{HM}\] synced {name} to durable storage \({durable / name}\)$",
                         out, re.M)
        ckpt = data / "checkpoints" / name
        assert (ckpt / "best.pth").is_file()
        assert not (ckpt / "latest.pth").exists()
        assert {p.name for p in (durable / name).iterdir()} == {
            "best.pth", "best_metrics.json", f"{name}.log"}
        state = torch.load(durable / name / "best.pth", weights_only=True)
        assert isinstance(state["epoch"], int) and "weight" in state["model"]
        metrics = json.loads((durable / name / "best_metrics.json").read_text())
        assert metrics["name"] == name and metrics["epoch"] == state["epoch"]
        assert isinstance(metrics["value"], float)
        assert (durable / name / f"{name}.log").read_bytes() == (
            data / "runs" / "logs" / f"{name}.log").read_bytes()
        log = (data / "runs" / "logs" / f"{name}.log").read_text()
        assert re.search(r"^Epoch 2/2 \| train_loss \d+\.\d{4} \| val_\w+ [\d.]+ \| lr [\d.]+e-0\d"
                         r" \| \d+\.\d\ds$", log, re.M)
        assert "Training completed: best " in log

    assert not (durable / "precision_b").exists()
    oom_log = (data / "runs" / "logs" / "precision_b.log").read_text()
    assert "Traceback (most recent call last):" in oom_log
    assert oom_log.rstrip().splitlines()[-1].startswith(
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert not list(box.rglob("*.partial"))
    assert not list(box.rglob("*.tmp"))
    assert not (box / "run" / "trainer.pid").exists()


def _stub_run_one(box: Path) -> Path:
    stub = box / "stub_run_one.sh"
    stub.write_text(
        'echo "$*" >> "$COCKPIT_BOX/calls.txt"\n'
        'case $1 in *bad*) exit 3 ;; esac\n'
        "exit 0\n"
    )
    return stub


def test_queue_start_index_counts_cells_not_lines(tmp_path: Path) -> None:
    box = make_box(tmp_path)
    stub = _stub_run_one(box)
    (box / "q.txt").write_text(
        "# header comment\n"
        "configs/one.yaml reconstruction 5\n"
        "\n"
        "# configs/skipped.yaml reconstruction\n"
        "configs/two_bad.yaml segmentation\n"
        "  configs/three.yaml\tdetection 50"  # indented, tab-separated, no final newline
    )

    proc = sh(box, "bash run_queue.sh q.txt 2", RUN_ONE=str(stub), DEMO_HOSTNAME="box1")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (box / "calls.txt").read_text().splitlines() == [
        "configs/two_bad.yaml segmentation 20",
        "configs/three.yaml detection 50",
    ]
    lines = proc.stdout.splitlines()
    assert lines[0] == "=== Queue q.txt: 3 ablations, starting from 2 on box1 ==="
    assert not any("STARTING one" in ln for ln in lines)
    assert any(re.fullmatch(rf"\[{TS}\] \[2/3\] STARTING two_bad \(segmentation, 20ep\)", ln)
               for ln in lines)
    assert any(re.fullmatch(rf"\[{TS}\] \[2/3\] FINISHED two_bad \(exit=3\)", ln) for ln in lines)
    assert any(re.fullmatch(rf"\[{TS}\] \[3/3\] FINISHED three \(exit=0\)", ln) for ln in lines)
    assert re.fullmatch(rf"\[{TS}\] === QUEUE DONE on box1 -- 1 cell\(s\) FAILED: two_bad ===",
                        lines[-1])

    (box / "calls.txt").unlink()
    proc = sh(box, "bash run_queue.sh q.txt 3", RUN_ONE=str(stub), DEMO_HOSTNAME="box1")
    assert proc.returncode == 0
    assert re.fullmatch(rf"\[{TS}\] === QUEUE DONE on box1 -- all 3 cell\(s\) exited 0 ===",
                        proc.stdout.splitlines()[-1])
    assert (box / "calls.txt").read_text() == "configs/three.yaml detection 50\n"


def test_queue_usage_errors(tmp_path: Path) -> None:
    box = make_box(tmp_path)
    for command in ("bash run_queue.sh", "bash run_queue.sh missing.txt",
                    "bash run_one.sh only_cfg.yaml"):
        proc = sh(box, command)
        assert proc.returncode == 1
        assert "usage" in proc.stderr


def test_run_one_failed_sync_exits_2_and_empty_durable_dir_skips(tmp_path: Path) -> None:
    box = make_box(tmp_path)
    cfg = write_cell(box, "baseline_s", seconds_per_epoch=0.0)
    (box / "not_a_dir").write_text("x")
    proc = sh(box, f"bash run_one.sh {cfg} reconstruction 1",
              DURABLE_DIR=str(box / "not_a_dir"))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert (f"!! DURABLE SYNC FAILED for baseline_s — check 'df -i {box / 'not_a_dir'}'. "
            "The data-disk copy is source-of-truth.") in proc.stdout
    assert (box / "data" / "checkpoints" / "baseline_s" / "best.pth").is_file()

    proc = sh(box, f"bash run_one.sh {cfg} reconstruction 1", DURABLE_DIR="")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "synced" not in proc.stdout and "DURABLE" not in proc.stdout
    assert not (box / "durable").exists()


def test_trainer_disk_full_and_nan_failures(tmp_path: Path) -> None:
    box = make_box(tmp_path)
    disk = write_cell(box, "disk_cell", seconds_per_epoch=0.0, fail="disk_full", fail_at_epoch=1)
    proc = sh(box, f"bash run_one.sh {disk} reconstruction 3")
    assert proc.returncode == 1
    tail = proc.stdout.rstrip().splitlines()
    assert tail[-1] == ("RuntimeError: [enforce fail at inline_container.cc:603] . "
                        "unexpected pos 4416 vs 4310")
    assert "OSError: [Errno 28] No space left on device" in tail
    assert 'torch/serialization.py", line' in proc.stdout
    assert (box / "data" / "checkpoints" / "disk_cell" / "latest.pth.tmp").is_file()
    assert not (box / "durable").exists()

    nan = write_cell(box, "nan_cell", seconds_per_epoch=0.0, fail="nan", fail_at_epoch=1)
    proc = sh(box, f"bash run_one.sh {nan} reconstruction 3")
    assert proc.returncode == 1
    assert proc.stdout.count("loss is nan") >= 3


def _smi(box: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(box / "bin" / "nvidia-smi"), *args], env=box_env(box),
                          capture_output=True, text=True, timeout=10)


def _gpu_rows(box: Path) -> list[list[str]]:
    proc = _smi(box, GPU_QUERY, FORMAT)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(proc.stdout.splitlines(), skipinitialspace=True))
    assert rows and all(len(row) == 12 for row in rows), proc.stdout
    assert all(", " in line for line in proc.stdout.splitlines())
    return rows


def test_nvidia_smi_idle_busy_and_usage(tmp_path: Path) -> None:
    box = make_box(tmp_path)
    assert os.stat(box / "bin" / "nvidia-smi").st_mode & stat.S_IXUSR

    idle = _gpu_rows(box)
    assert [row[0] for row in idle] == ["0", "1"]
    uuids = [row[2] for row in idle]
    assert all(re.fullmatch(r"GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", u)
               for u in uuids)
    assert len(set(uuids)) == 2
    gpu0 = idle[0]
    assert gpu0[1] == "NVIDIA A100-SXM4-80GB"
    assert gpu0[3] == "0" and int(gpu0[4]) < 10 and gpu0[5] == "81920"
    assert float(gpu0[7]) < 100 and gpu0[8] == "400.00" and gpu0[11] == "Disabled"
    assert _smi(box, APPS_QUERY, FORMAT).stdout == ""

    (box / "run").mkdir()
    (box / "run" / "trainer.pid").write_text(f"{os.getpid()}\n")
    busy = _gpu_rows(box)
    assert [row[2] for row in busy] == uuids  # stable per box
    gpu0 = busy[0]
    assert 70 <= int(gpu0[3]) <= 99
    assert 0.6 * 81920 <= int(gpu0[4]) <= 0.9 * 81920
    assert 60 <= int(gpu0[6]) <= 80
    assert 0.75 * 400 <= float(gpu0[7]) <= 400
    assert busy[1][3] == "0"  # the trainer holds GPU 0 only
    apps = list(csv.reader(_smi(box, APPS_QUERY, FORMAT).stdout.splitlines(),
                           skipinitialspace=True))
    assert len(apps) == 1
    assert apps[0][0] == uuids[0] and apps[0][1] == str(os.getpid())
    assert 0 < int(apps[0][2]) <= int(gpu0[4])

    # A stale PID file (dead process) reads as idle again.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (box / "run" / "trainer.pid").write_text(f"{dead.pid}\n")
    assert _gpu_rows(box)[0][3] == "0"

    (box / "gpu.conf").write_text("GPU_COUNT=1\nPOWER_NA=1\nMIG_NA=1\n")
    row = _gpu_rows(box)[0]
    assert row[7] == "[N/A]" and row[11] == "[N/A]"

    other = make_box(tmp_path, "box2")
    assert _gpu_rows(other)[0][2] != uuids[0]

    bad = _smi(box, "-L")
    assert bad.returncode == 1 and bad.stdout == "" and "--query-gpu" in bad.stderr
