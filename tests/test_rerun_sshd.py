"""Issue 14, end to end on a real loopback sshd with the public runbook's own scripts: a queue
started the runbook's tmux + tee way, one cell crashing, the queue interrupted and resumed the
runbook's way at index 3 (its `| tee` truncates the master log) — then the cockpit must
neither show cells 1-2 as pending nor re-run them: `cockpit resume` refuses with the reason,
`cockpit rerun --cells <crashed>` re-runs only that cell from a new queue file, its old log
kept under a new name, and no proven cell's checkpoint is touched.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.runbook import (
    Cell,
    cockpit,
    mtimes,
    poll,
    require_seeds,
    runbook_box,
    sha256,
    status_cells,
    trainers,
)
from tests.sshd import Sshd

SEEDS = require_seeds()  # skips this module where ../shared is absent (a user's own clone)

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

OK_CELL = "base_ok"
CRASHED = "oom_crash"
HELD = "held_last"
SESSION = "q1"


def test_resume_never_reruns_proven_cells_and_rerun_runs_only_the_named_one(
        sshd: Sshd, tmp_path: Path) -> None:
    with runbook_box(tmp_path / "box", sshd) as box:
        box.install_scripts()
        queue = box.write_queue([Cell(OK_CELL), Cell(CRASHED, epochs=3, crash_after_epoch=1),
                                 Cell(HELD, hold_after_epoch=1)])
        queue_sha = sha256(queue)
        # 1. The runbook's tmux + tee recipe; cell 2 crashes, cell 3 is interrupted mid-run.
        log = box.launch_tmux(queue, SESSION)
        box.wait_for(box.run_logs / f"{HELD}.log", "saved best.pth (epoch 1")
        box.ssh(f"tmux kill-session -t ={SESSION}")
        poll("the interrupted trainer to end", lambda: not trainers(box))
        assert "FINISHED oom_crash (exit=1)" in log.read_text()
        # 2. The runbook's resume at index 3: its tee truncates the master log.
        box.release(HELD)
        log = box.launch_tmux(queue, SESSION, start=3)
        text = box.wait_queue_done(log, session=SESSION)
        assert text.startswith("=== Queue queue.txt: 3 ablations, starting from 3"), text[:200]
        assert OK_CELL not in text and CRASHED not in text, "the tee truncated the earlier marks"
        proven = [box.checkpoints / OK_CELL / "best.pth", box.checkpoints / HELD / "best.pth",
                  box.final / OK_CELL / "best.pth", box.final / HELD / "best.pth"]
        before = mtimes(proven)
        crashed_log = box.run_logs / f"{CRASHED}.log"
        assert "CUDA out of memory" in crashed_log.read_text()

        sweep = box.write_sweep(tmp_path / "sweep.yaml", sweep="s14", queue=queue, queue_log=log,
                                pull_dir=tmp_path / "pulled")
        command = (f"cd {box.project} && {box.python} -u -m src.train --no-strict "
                   '-o training.checkpoint_dir="$CKPT_DIR" -c "$CFG" --task "$TASK" '
                   '--epochs "$EPOCHS" --experiment-name "abla_$NAME"')
        with sweep.open("a") as out:
            out.write(f"    tmux_session: {SESSION}\n    launch:\n"
                      f"      command: {json.dumps(command)}\n")

        # 3. status: cells 1-2 finished earlier (not pending, not OK), with their evidence.
        view, cells = status_cells(sweep)
        assert {n: c["state"] for n, c in cells.items()} == {
            OK_CELL: "finished earlier", CRASHED: "finished earlier", HELD: "finished ok"}, cells
        assert "master log truncated by a resume from 3" in cells[OK_CELL]["evidence"]
        assert cells[HELD]["evidence"].startswith("master log: FINISHED exit=0")
        assert view["progress"] == "3/3" and view["resume_from"] is None
        assert view["resume_hint"] is None

        # 4. cockpit resume refuses: nothing after the last proven cell; nothing started.
        resumed = cockpit("resume", str(sweep), "--instance", "b1")
        assert resumed.returncode == 1, (resumed.stdout, resumed.stderr)
        assert "refused" in resumed.stderr and "nothing to resume" in resumed.stderr
        assert "truncated by a resume from 3" in resumed.stderr, resumed.stderr
        assert log.read_text() == text, "a refused resume wrote nothing to the master log"

        # 5. rerun refuses an unknown cell name.
        unknown = cockpit("rerun", str(sweep), "--instance", "b1", "--cells", f"{CRASHED},nope")
        assert unknown.returncode == 1 and "not cells of" in unknown.stderr and "nope" in unknown.stderr
        assert not list(queue.parent.glob("queue.rerun-*")), "nothing written for a refusal"

        # 6. The user fixes the crashing config; rerun only it (held mid-run to see refusals).
        box.write_cell_config(Cell(CRASHED, epochs=3, hold_after_epoch=1))
        rerun = cockpit("rerun", str(sweep), "--instance", "b1", "--cells", CRASHED)
        assert rerun.returncode == 0, (rerun.stdout, rerun.stderr)
        rerun_queue = queue.parent / "queue.rerun-1.txt"
        rotated = box.run_logs / f"{CRASHED}.log.before-rerun-1"
        assert str(rerun_queue) in rerun.stdout and str(rotated) in rerun.stdout, rerun.stdout
        assert "CUDA out of memory" in rotated.read_text(), "the old log kept, under a new name"
        lines = [ln.split()[0] for ln in rerun_queue.read_text().splitlines()
                 if ln.strip() and not ln.startswith("#")]
        assert lines == [f"configs/ablation/{CRASHED}.yaml"]
        assert sha256(queue) == queue_sha, "the original queue file is never rewritten"
        box.wait_for(crashed_log, "saved best.pth (epoch 1")
        while_running = cockpit("resume", str(sweep), "--instance", "b1")
        assert while_running.returncode == 1 and "still runs" in while_running.stderr, \
            while_running.stderr
        again = cockpit("rerun", str(sweep), "--instance", "b1", "--cells", CRASHED)
        assert again.returncode == 1 and "still runs" in again.stderr, again.stderr
        view, cells = status_cells(sweep)
        assert cells[CRASHED]["state"] == "running", cells[CRASHED]
        assert view["resume_hint"] is None, "no resume command while the queue runs"
        box.release(CRASHED)
        text = box.wait_queue_done(log, session=SESSION)

        # 7. Only the named cell ran; no proven cell's checkpoint changed.
        appended = text.split("=== QUEUE DONE", 1)[1]
        assert f"STARTING {CRASHED}" in appended
        assert f"STARTING {OK_CELL}" not in appended and f"STARTING {HELD}" not in appended
        assert f"FINISHED {CRASHED} (exit=0)" in appended
        assert mtimes(proven) == before, "a proven cell's checkpoint was touched"
        assert "Training completed" in crashed_log.read_text()
        assert (box.final / CRASHED / "best.pth").is_file()
        view, cells = status_cells(sweep)
        assert cells[CRASHED]["state"] == "finished ok"
        assert cells[CRASHED]["evidence"].startswith("master log: FINISHED exit=0")
        assert cells[OK_CELL]["state"] == "finished earlier", "the truncation evidence stays"
