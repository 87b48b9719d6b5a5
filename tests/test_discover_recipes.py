"""Issue 14: `cockpit discover` finds a queue however the user launched it.

The public runbook's own run_queue.sh / run_one.sh (from ../shared, byte for byte) run on a real
loopback sshd box, launched each common way — the runbook's nohup recipe, its tmux + tee recipe,
tmux without tee, setsid + nohup, GNU screen + tee — with the second cell held after its first
epoch (so a cell is running when discover looks). `cockpit discover` runs as the user runs it
(the CLI, a subprocess); its printed sweep must load with `load_sweep` as printed and name the
queue, the master log (the runner's stdout file, or the file its tee writes) and `run_logs`
(the folder run_one.sh's tee writes each cell's log to: never the master log's folder unless
the cells really log there). A queue that has finished leaves no process: discover says it
found none and prints no sweep for it.

Other tests may run queues on this machine at the same time: every assertion is about the
instance whose queue is this test's own queue file.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from cockpit.models.sweep import Instance
from cockpit.services.config.sweepfile import load_sweep
from tests.runbook import (
    Cell,
    RunbookBox,
    cockpit,
    launch_screen,
    launch_setsid,
    launch_tmux_no_tee,
    quit_screen,
    require_seeds,
    runbook_box,
)
from tests.sshd import Sshd, require

SEEDS = require_seeds()  # skips this module where ../shared is absent (a user's own clone)

pytestmark = [pytest.mark.sshd, pytest.mark.slow]

HELD = "aug_held"
CELLS = (Cell("baseline"), Cell(HELD, hold_after_epoch=1), Cell("tail_cell"))
HELD_MARK = "saved best.pth (epoch 1"
"""The held cell's log line after its first epoch: from then on it waits, its log open."""


@dataclass(frozen=True)
class Expected:
    """What discover must print for one launch."""

    queue_log: Path
    run_logs: Path
    tmux_session: str | None
    launch_words: str
    """A phrase of the printed `# launch:` comment (how the runner was seen to run)."""


def _nohup(box: RunbookBox, queue: Path, tag: str) -> Expected:
    box.launch_nohup(queue)
    return Expected(queue.parent / "master.log", box.run_logs, None, "detached from a shell")


def _nohup_log_beside_cells(box: RunbookBox, queue: Path, tag: str) -> Expected:
    # The master log in the cells' own folder: run_logs really is that folder (and the master
    # log is still not taken for a cell's log).
    box.run_logs.mkdir(parents=True, exist_ok=True)
    box.launch_nohup(queue, log=str(box.run_logs / "master.log"))
    return Expected(box.run_logs / "master.log", box.run_logs, None, "detached from a shell")


def _nohup_master_sorts_first(box: RunbookBox, queue: Path, tag: str) -> Expected:
    # The master log in a folder that sorts before the cells' folder: run_logs must come from
    # the cells' own logs, not from the first folder of whatever the runner's tree holds open.
    first = box.root / "_master"
    first.mkdir()
    box.launch_nohup(queue, log=str(first / "master.log"))
    return Expected(first / "master.log", box.run_logs, None, "detached from a shell")


def _tmux_tee(box: RunbookBox, queue: Path, tag: str) -> Expected:
    log = box.launch_tmux(queue, tag)
    return Expected(log, box.run_logs, tag, f'in tmux session "{tag}"')


def _tmux_no_tee(box: RunbookBox, queue: Path, tag: str) -> Expected:
    log = box.data / "q1_master.log"
    launch_tmux_no_tee(box, queue, tag, log)
    return Expected(log, box.run_logs, tag, f'in tmux session "{tag}"')


def _setsid(box: RunbookBox, queue: Path, tag: str) -> Expected:
    pid = launch_setsid(box, queue)
    assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3] == str(pid), \
        "setsid did not make the runner a session leader"
    return Expected(queue.parent / "master.log", box.run_logs, None, "session of its own (setsid)")


def _screen(box: RunbookBox, queue: Path, tag: str) -> Expected:
    require(shutil.which("screen") or "/usr/bin/screen", "GNU screen")
    log = box.data / "screen_master.log"
    launch_screen(box, queue, tag, log)
    return Expected(log, box.run_logs, None, "under GNU screen")


RECIPES: dict[str, Callable[[RunbookBox, Path, str], Expected]] = {
    "nohup": _nohup,
    "nohup-log-in-cells-folder": _nohup_log_beside_cells,
    "nohup-master-sorts-first": _nohup_master_sorts_first,
    "tmux+tee": _tmux_tee,
    "tmux-no-tee": _tmux_no_tee,
    "setsid": _setsid,
    "screen+tee": _screen,
}


def discover(box: RunbookBox) -> tuple[int, str, str]:
    """`cockpit discover HOST --ssh-config FILE --name found`, as a user types it."""
    result = cockpit("discover", box.alias, "--ssh-config", str(box.ssh_config), "--name", "found")
    return result.returncode, result.stdout, result.stderr


def our_block(text: str, queue: Path) -> str:
    """The printed lines of the instance whose queue is `queue` (fields and its comments)."""
    blocks = re.split(r"\n(?=- name: )", text)
    (block,) = [b for b in blocks if f"\n  queue: {queue}\n" in b + "\n"]
    return block


def our_instance(sweep_file: Path, queue: Path) -> Instance:
    """The loaded sweep's instance following `queue` (load_sweep as printed, no edit)."""
    loaded = load_sweep(sweep_file)
    (inst,) = [i for i in loaded.sweep.instances if i.queue == str(queue)]
    return inst


@pytest.mark.parametrize("recipe", list(RECIPES))
def test_discover_finds_the_queue_however_it_was_launched(
        recipe: str, sshd: Sshd, tmp_path: Path) -> None:
    tag = f"d14-{recipe.replace('+', '-')}-{os.getpid()}"
    with runbook_box(tmp_path / "box", sshd) as box:
        box.install_scripts()
        queue = box.write_queue(CELLS)
        try:
            want = RECIPES[recipe](box, queue, tag)
            box.wait_for(box.run_logs / f"{HELD}.log", HELD_MARK)

            code, out, err = discover(box)
            assert code == 0, err[-3000:]
            sweep_file = tmp_path / "found.yaml"
            sweep_file.write_text(out)
            inst = our_instance(sweep_file, queue)
            block = our_block(out, queue)

            assert inst.run_logs == str(want.run_logs), block
            assert inst.queue_log == str(want.queue_log), block
            assert inst.tmux_session == want.tmux_session, block
            assert want.launch_words in block, block
            # Found fields carry no NOT FOUND note; only the undiscoverable ones do.
            notes = re.findall(r"^  # (\w+): NOT FOUND", block, re.M)
            assert notes == ["durable_root", "checkpoints"], block
        finally:
            box.release(HELD)
            if recipe.startswith("screen"):
                quit_screen(tag)


def test_a_finished_queue_is_reported_not_invented(sshd: Sshd, tmp_path: Path) -> None:
    with runbook_box(tmp_path / "box", sshd) as box:
        box.install_scripts()
        queue = box.write_queue((Cell("only_cell", epochs=1),))
        pid = box.launch_nohup(queue)
        box.wait_queue_done(queue.parent / "master.log", pid=pid)

        code, out, err = discover(box)
        # Another test's queue may be running on this machine: then its sweep is printed (and
        # must load as printed); ours must not be in it. With none, no sweep at all.
        assert str(queue) not in out
        if out.strip():
            sweep_file = tmp_path / "found.yaml"
            sweep_file.write_text(out)
            assert all(i.queue != str(queue) for i in load_sweep(sweep_file).sweep.instances)
        else:
            assert code == 1, err
            assert "no running run_queue*.sh found" in err, err
            assert "a queue that has finished leaves none" in err, err


BETWEEN_CELLS = """#!/usr/bin/env bash
# A queue runner caught between two cells: no cell process under it, only bash builtins
# waiting (a timed read on its own FIFO) until the release file appears.
echo "=== Queue $(basename "$1"): 2 ablations, starting from 1 on box ==="
echo "[1/2] FINISHED first (exit=0)"
mkfifo wait.fifo && exec 3<>wait.fifo
while [ ! -e release ]; do read -t 0.2 -u 3 _ || :; done
"""


def test_between_cells_run_logs_is_marked_not_found(sshd: Sshd, tmp_path: Path) -> None:
    with runbook_box(tmp_path / "box", sshd) as box:
        folder = box.root / "between"
        folder.mkdir()
        (folder / "run_queue.sh").write_text(BETWEEN_CELLS)
        queue = folder / "queue.txt"
        queue.write_text("configs/first.yaml t 1\nconfigs/second.yaml t 1\n")
        try:
            box.launch_nohup(queue)
            box.wait_for(folder / "master.log", "FINISHED first")
            code, out, err = discover(box)
            assert code == 0, err[-3000:]
            sweep_file = tmp_path / "found.yaml"
            sweep_file.write_text(out)
            inst = our_instance(sweep_file, queue)  # loads as printed, without run_logs
            block = our_block(out, queue)
            assert inst.queue_log == str(folder / "master.log"), block
            assert inst.run_logs is None, block
            assert ("# run_logs: NOT FOUND — no cell was running when discover looked "
                    "(between cells)") in block, block
            assert "add it" in block.split("# run_logs: NOT FOUND", 1)[1].split("\n")[0], block
            assert "run_logs NOT FOUND" in err, err
        finally:
            (folder / "release").touch()


def test_a_hostile_master_log_name_is_shown_never_spliced(sshd: Sshd, tmp_path: Path) -> None:
    # The nohup master log is named with a newline, a fake sweep key and a terminal escape:
    # the sweep cannot hold that path, so it is NOT FOUND (shown JSON-escaped in the note),
    # the fake key never becomes a field, and no escape reaches the terminal.
    evil = "evil\n  metric: spliced\x1b[2J.log"
    with runbook_box(tmp_path / "box", sshd) as box:
        box.install_scripts()
        queue = box.write_queue(CELLS)
        try:
            box.launch_nohup(queue, log=evil)
            box.wait_for(box.run_logs / f"{HELD}.log", HELD_MARK)
            code, out, err = discover(box)
            assert code == 0, err[-3000:]
            assert "\x1b" not in out and "\x1b" not in err
            sweep_file = tmp_path / "found.yaml"
            sweep_file.write_text(out)
            inst = our_instance(sweep_file, queue)
            block = our_block(out, queue)
            assert inst.queue_log is None and inst.metric is None, block
            assert inst.run_logs == str(box.run_logs), block
            assert not re.search(r"^\s*metric:", block, re.M), block
            assert '# queue_log: NOT FOUND — its stdout file "' in block, block
            assert "evil\\n  metric: spliced\\u001b[2J.log" in block, block
        finally:
            box.release(HELD)


AMBIGUOUS_RUNNER = """#!/usr/bin/env bash
# A queue runner whose one cell writes two unrelated files in two folders (its stdout into
# one/, a tee's copy into two/), neither named after the cell: no folder is the cells' log
# folder by evidence, so discover must not pick one.
mkdir -p one two
bash cell.sh configs/first.yaml
"""
AMBIGUOUS_CELL = """#!/usr/bin/env bash
exec > one/stdout.txt
mkfifo wait.fifo && exec 3<>wait.fifo
{ echo "cell $1 running"; while [ ! -e release ]; do read -t 0.2 -u 3 _ || :; done; } \\
    | tee two/copy.txt
"""


def test_cells_logging_to_two_folders_is_not_found_with_both_named(
        sshd: Sshd, tmp_path: Path) -> None:
    with runbook_box(tmp_path / "box", sshd) as box:
        folder = box.root / "ambiguous"
        folder.mkdir()
        (folder / "run_queue.sh").write_text(AMBIGUOUS_RUNNER)
        (folder / "cell.sh").write_text(AMBIGUOUS_CELL)
        queue = folder / "queue.txt"
        queue.write_text("configs/first.yaml t 1\n")
        try:
            box.launch_nohup(queue)
            box.wait_for(folder / "two" / "copy.txt", "cell configs/first.yaml running")
            code, out, err = discover(box)
            assert code == 0, err[-3000:]
            sweep_file = tmp_path / "found.yaml"
            sweep_file.write_text(out)
            inst = our_instance(sweep_file, queue)
            block = our_block(out, queue)
            assert inst.queue_log == str(folder / "master.log"), block
            assert inst.run_logs is None, block
            note = block.split("# run_logs: NOT FOUND — ", 1)[1].split("\n")[0]
            assert note.startswith("the cells write logs in more than one folder"), block
            assert f'"{folder / "one"}"' in note and f'"{folder / "two"}"' in note, block
        finally:
            (folder / "release").touch()
