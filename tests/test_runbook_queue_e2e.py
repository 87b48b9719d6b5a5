"""Issue 14, "Done when", the runbook's nohup recipe: a queue the user started by hand with the
public runbook's own run_queue.sh (from ../shared, byte for byte) on a real loopback sshd box is
found by `cockpit discover`, and the sweep it prints — saved UNEDITED — is enough for
`cockpit status`, `cockpit resume` and `cockpit rerun`: the re-run goes through the runbook's
own run_queue.sh in its own folder with the environment discover read from the runner (only
the PROFILE BLOCK names: a secret in that environment never reaches the printed sweep),
appending to the master log (never truncating it), and no proven cell is ever run again.
The runbook's tmux + tee recipe, interrupted mid-cell, is resumed by `cockpit resume` in its
own tmux session with `| tee -a`, exactly as the resume hint says.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from cockpit.models.sweep import RUNNER_ENV, Instance
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.queue.launch import hand_command, resume_hint
from tests.runbook import (
    Cell,
    RunbookBox,
    cockpit,
    find_runner,
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

OK_CELL = "first_ok"
CRASHED = "mid_crash"
HELD = "last_held"
SECRET = "sk-test-0123456789abcdef"
"""An API key in the runner's environment: discover must never print it."""
HELD_MARK = "saved best.pth (epoch 1"


def launch_nohup_with_secret(box: RunbookBox, queue: Path) -> int:
    """The runbook's nohup recipe typed in DURABLE_DIR, with the PROFILE BLOCK exported and an
    API key in the same environment (as users' shells have):
    `nohup bash run_queue.sh queue.txt </dev/null >master.log 2>&1 &`. Returns the runner."""
    box.ssh(f"cd {shlex.quote(str(queue.parent))} || exit 1; "
            f"{box.exports({'OPENAI_API_KEY': SECRET})}; "
            f"nohup bash run_queue.sh {shlex.quote(queue.name)} </dev/null >master.log 2>&1 &")
    pid = find_runner(queue)
    box.runners.append(pid)
    return pid


def ours(sweep: Path, queue: Path) -> Instance:
    """The discovered instance following this test's queue (others may run on this machine)."""
    (inst,) = [i for i in load_sweep(sweep).sweep.instances if i.queue == str(queue)]
    return inst


def test_discovered_nohup_queue_resumes_and_reruns_with_no_hand_edit(
        sshd: Sshd, tmp_path: Path) -> None:
    with runbook_box(tmp_path / "box", sshd) as box:
        box.install_scripts()
        queue = box.write_queue([Cell(OK_CELL), Cell(CRASHED, epochs=3, crash_after_epoch=1),
                                 Cell(HELD, hold_after_epoch=1)])
        queue_sha = sha256(queue)
        log = queue.parent / "master.log"
        pid = launch_nohup_with_secret(box, queue)
        box.wait_for(box.run_logs / f"{HELD}.log", HELD_MARK)

        # 1. discover, as a user types it; its stdout saved as the sweep, unedited.
        found = cockpit("discover", box.alias, "--ssh-config", str(box.ssh_config),
                        "--name", "found")
        assert found.returncode == 0, (found.stdout, found.stderr)
        assert SECRET not in found.stdout and "OPENAI_API_KEY" not in found.stdout
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(found.stdout)
        inst = ours(sweep, queue)
        assert inst.queue_log == str(log) and inst.launch is None
        assert inst.runner is not None, found.stdout
        assert inst.runner.script == str(box.durable / "run_queue.sh")
        assert (inst.runner.shell, inst.runner.cwd, inst.runner.output) == (
            "bash", str(box.durable), "redirect")
        assert inst.runner.env == {k: v for k, v in box.profile_env().items() if k in RUNNER_ENV}
        # The resume hint is exactly the command resume runs: the runbook's own script, its
        # environment, appending to the master log under nohup.
        command, _ = resume_hint(inst, 2)
        assert command == hand_command(inst, 2)
        assert f"nohup bash {box.durable}/run_queue.sh {queue} 2 </dev/null >>{log} 2>&1 &" \
            in command, command
        assert f"PY={shlex.quote(box.python)}" in command and "PROXY_HOOK=:" in command

        # 2. status from the unedited sweep: every cell's state with its evidence.
        view, cells = status_cells(sweep, inst.name)
        assert {n: c["state"] for n, c in cells.items()} == {
            OK_CELL: "finished ok", CRASHED: "failed", HELD: "running"}, cells
        assert cells[OK_CELL]["evidence"].startswith("master log: FINISHED exit=0")
        assert "exit=1" in cells[CRASHED]["evidence"], cells[CRASHED]
        assert cells[HELD]["evidence"], cells[HELD]
        assert view["resume_hint"] is None, "no resume command while the queue runs"
        running = cockpit("resume", str(sweep), "--instance", inst.name)
        assert running.returncode == 1 and "still runs" in running.stderr, running.stderr

        # 3. The queue finishes; resume refuses (nothing after the last proven cell) and says
        #    which cell it cannot reach; it starts nothing and writes nothing.
        box.release(HELD)
        text = box.wait_queue_done(log, pid=pid)
        proven = [box.checkpoints / OK_CELL / "best.pth", box.checkpoints / HELD / "best.pth",
                  box.final / OK_CELL / "best.pth", box.final / HELD / "best.pth"]
        before = {str(p): p.stat().st_mtime_ns for p in proven}
        resumed = cockpit("resume", str(sweep), "--instance", inst.name)
        assert resumed.returncode == 1, (resumed.stdout, resumed.stderr)
        assert "nothing to resume" in resumed.stderr and f"--cells {CRASHED}" in resumed.stderr
        assert log.read_text() == text, "a refused resume wrote nothing to the master log"

        # 4. The user fixes the config; rerun re-runs only that cell with the runbook's own
        #    run_queue.sh and the discovered environment, appending to master.log.
        box.write_cell_config(Cell(CRASHED, epochs=3))
        rerun = cockpit("rerun", str(sweep), "--instance", inst.name, "--cells", CRASHED)
        assert rerun.returncode == 0, (rerun.stdout, rerun.stderr)
        assert "nohup" in rerun.stdout, rerun.stdout
        assert str(box.run_logs / f"{CRASHED}.log.before-rerun-1") in rerun.stdout
        text2 = box.wait_queue_done(log, times=2)
        poll("the re-run trainer to end", lambda: not trainers(box))
        assert text2.startswith(text), "the master log kept its earlier marks (append)"
        appended = text2[len(text):]
        assert "=== Queue queue.rerun-1.txt: 1 ablations, starting from 1" in appended, appended
        assert f"FINISHED {CRASHED} (exit=0)" in appended
        assert f"STARTING {OK_CELL}" not in appended and f"STARTING {HELD}" not in appended
        assert not (box.durable / ".cockpit").exists(), "nothing of ours was deployed"
        assert (box.final / CRASHED / "best.pth").is_file(), "run_one.sh had DURABLE_DIR"
        assert sha256(queue) == queue_sha
        assert {str(p): p.stat().st_mtime_ns for p in proven} == before, \
            "a proven cell's checkpoint was touched"

        def crashed_ok() -> bool:
            return status_cells(sweep, inst.name)[1][CRASHED]["state"] == "finished ok"

        poll("status shows the re-run cell finished ok", crashed_ok)
        _, cells = status_cells(sweep, inst.name)
        assert cells[OK_CELL]["state"] == "finished ok" and cells[HELD]["state"] == "finished ok"
        assert cells[CRASHED]["evidence"].startswith("master log: FINISHED exit=0")


def test_discovered_tmux_tee_queue_resumes_in_its_session_appending_to_its_log(
        sshd: Sshd, tmp_path: Path) -> None:
    """The runbook's tmux + tee recipe, interrupted mid-cell: the unedited discovered sweep's
    resume hint is exactly what `cockpit resume` runs, and resume starts at the interrupted
    cell in the same tmux session with `| tee -a` (the earlier marks kept), never re-running
    the proven first cell."""
    session = f"q14r{os.getpid()}"
    tail = "tail_cell"
    with runbook_box(tmp_path / "box", sshd) as box:
        box.install_scripts()
        queue = box.write_queue([Cell(OK_CELL), Cell(HELD, hold_after_epoch=1), Cell(tail)])
        log = box.launch_tmux(queue, session)
        box.wait_for(box.run_logs / f"{HELD}.log", HELD_MARK)
        found = cockpit("discover", box.alias, "--ssh-config", str(box.ssh_config),
                        "--name", "found")
        assert found.returncode == 0, (found.stdout, found.stderr)
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(found.stdout)
        inst = ours(sweep, queue)
        assert inst.tmux_session == session and inst.queue_log == str(log)
        assert inst.runner is not None and inst.runner.output == "tee", found.stdout
        assert inst.runner.env == {k: v for k, v in box.profile_env().items() if k in RUNNER_ENV}

        # Interrupted mid-cell (the session ended); cell 1 proven, cell 2 interrupted.
        box.ssh(f"tmux kill-session -t ={session}")
        poll("the interrupted trainer to end", lambda: not trainers(box))
        text = log.read_text()
        ok_ckpts = [box.checkpoints / OK_CELL / "best.pth", box.final / OK_CELL / "best.pth"]
        before = {str(p): p.stat().st_mtime_ns for p in ok_ckpts}
        view, cells = status_cells(sweep, inst.name)
        assert cells[OK_CELL]["state"] == "finished ok"
        assert cells[HELD]["state"] == "interrupted", cells[HELD]
        assert view["resume_from"] == 2
        assert view["resume_hint"]["command"] == hand_command(inst, 2)
        assert view["resume_hint"]["command"].startswith(f"tmux new-session -d -s {session} ")

        box.release(HELD)
        resumed = cockpit("resume", str(sweep), "--instance", inst.name)
        assert resumed.returncode == 0, (resumed.stdout, resumed.stderr)
        assert f"tmux session {session}" in resumed.stdout and "from cell 2" in resumed.stdout
        done = box.wait_queue_done(log, session=session)
        assert done.startswith(text), "tee -a: the earlier marks kept"
        appended = done[len(text):]
        assert "starting from 2" in appended and f"STARTING {OK_CELL}" not in appended
        assert f"FINISHED {HELD} (exit=0)" in appended and f"FINISHED {tail} (exit=0)" in appended
        assert not (box.durable / ".cockpit").exists(), "nothing of ours was deployed"
        assert {str(p): p.stat().st_mtime_ns for p in ok_ckpts} == before
        _, cells = status_cells(sweep, inst.name)
        assert {n: c["state"] for n, c in cells.items()} == {
            OK_CELL: "finished ok", HELD: "finished ok", tail: "finished ok"}, cells
