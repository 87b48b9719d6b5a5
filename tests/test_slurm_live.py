"""The Slurm path against a real single-node Slurm on this machine: the queue as an array job
of a tiny real torch script, states read back into cells, and scancel of our jobs only."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.models.custody import CellStatus
from cockpit.models.queue import CellState
from cockpit.models.sweep import Instance, Launch
from cockpit.services.custody.verify import make_pool, run_verification
from cockpit.services.queue.launch import LaunchRefused
from cockpit.services.queue.slurm import cancel, recorded_jobs, states, submit
from cockpit.services.transport.remote import LocalBox
from tests.slurmd import Slurm
from tests.test_launch_sshd import TRAIN

pytestmark = pytest.mark.sshd


@pytest.fixture
def slurm(tmp_path: Path) -> Iterator[Slurm]:
    cluster = Slurm(tmp_path / "slurm")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def instance(box: Path, slurm: Slurm) -> Instance:
    return Instance(
        name="s1", profile="slurm", host="local", queue=str(box / "queue.txt"),
        run_logs=str(box / "logs"), checkpoints=str(box / "ckpt"), durable_root=str(box / "durable"),
        launch=Launch(command=f"{sys.executable} {box}/train.py", env={"SLURM_CONF": str(slurm.conf)}))


async def wait_done(box: LocalBox, inst: Instance, job: int, count: int) -> dict[int, CellState]:
    deadline = time.monotonic() + 120
    while True:
        tasks = await states(box, inst, job)
        cells = {t: s.cell_state for t, s in tasks.items()}
        if len(cells) == count and all(c in (CellState.OK, CellState.FAILED) for c in cells.values()):
            return cells
        assert time.monotonic() < deadline, tasks
        await asyncio.sleep(0.5)


def foreign_job(slurm: Slurm, tmp_path: Path) -> int:
    script = tmp_path / "foreign.sh"
    script.write_text("#!/bin/sh\nsleep 120\n")
    out = subprocess.run(["sbatch", "--parsable", f"--output={tmp_path}/foreign.out", str(script)],
                         env=slurm.env(), capture_output=True, text=True, check=True).stdout
    return int(out.strip().split(";")[0])


def squeue_ids(slurm: Slurm) -> str:
    return subprocess.run(["squeue", "-h", "-o", "%i"], env=slurm.env(), capture_output=True,
                          text=True, check=False).stdout


async def test_array_job_states_and_scancel_of_our_jobs_only(slurm: Slurm, tmp_path: Path) -> None:
    box_dir = tmp_path / "box"
    (box_dir / "cfg").mkdir(parents=True)
    (box_dir / "train.py").write_text(TRAIN.replace('time.sleep(0.6 if name == "b" else 0.1)',
                                                    "time.sleep(0.05)\n    assert name != 'b' or epoch < 2"))
    (box_dir / "queue.txt").write_text("# three cells\ncfg/a.yaml t 2\ncfg/b.yaml t 3\ncfg/c.yaml t 2\n")
    inst = instance(box_dir, slurm)
    box = LocalBox()
    job = await submit(box, inst, "sl")
    assert recorded_jobs("sl", "s1") == [job]
    cells = await wait_done(box, inst, job, 3)
    assert cells == {1: CellState.OK, 2: CellState.FAILED, 3: CellState.OK}
    for cell in ("a", "c"):
        assert (box_dir / "durable" / cell / "best.pth").exists()
    assert "Epoch 1/3" in (box_dir / "logs" / "b.log").read_text()
    # Verification takes the scheduler's word as the cells' evidence: COMPLETED is proof,
    # a failed task is FAILED ON BOX (with its log's cause), not a missing folder.
    with make_pool(1) as pool:
        report = await run_verification(box, inst, tmp_path / "pulled" / "s1", "sl", pool)
    assert report.verification is not None, report.error
    verdicts = {v.cell: v for v in report.verification.verdicts}
    assert verdicts["a"].status is CellStatus.OK and verdicts["c"].status is CellStatus.OK
    assert verdicts["b"].status is CellStatus.FAILED_ON_BOX, verdicts["b"]
    assert verdicts["b"].cause is not None and "AssertionError" in verdicts["b"].cause.excerpt
    # A second, long queue of ours and a job that is not ours.
    (box_dir / "queue.txt").write_text("cfg/a.yaml t 200\n")
    (box_dir / "train.py").write_text("import time\ntime.sleep(120)\n")
    ours = await submit(box, inst, "sl")
    with pytest.raises(LaunchRefused, match="never submitted twice"):
        await submit(box, inst, "sl")
    other = foreign_job(slurm, tmp_path)
    cancelled = await cancel(box, inst, "sl")
    assert cancelled == [job, ours]
    deadline = time.monotonic() + 30
    while str(ours) in squeue_ids(slurm):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.3)
    assert str(other) in squeue_ids(slurm), "a job that is not ours is never cancelled"
