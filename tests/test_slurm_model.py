"""Slurm output parsing, against outputs recorded from a real single-node Slurm 22.05 here
(tests/data/slurm: an array job 4 of 4 tasks throttled to 1, task 2 exits 3, task 4 cancelled
while pending) and the documented sacct format."""

from __future__ import annotations

from pathlib import Path

from cockpit.models.queue import CellState
from cockpit.models.slurm import merge, parse_sacct, parse_scontrol, parse_squeue, submitted_job

DATA = Path(__file__).resolve().parent / "data" / "slurm"
JOB = int((DATA / "JOB").read_text())


def test_squeue_expands_pending_ranges_and_keeps_the_reason() -> None:
    tasks = parse_squeue((DATA / "squeue-running.txt").read_text(), JOB)
    assert {t: s.state for t, s in tasks.items()} == {1: "RUNNING", 2: "PENDING", 3: "PENDING", 4: "PENDING"}
    assert tasks[2].text == "PENDING (JobArrayTaskLimit)"
    assert tasks[1].cell_state is CellState.RUNNING and tasks[3].cell_state is CellState.PENDING
    assert parse_squeue((DATA / "squeue-running.txt").read_text(), JOB + 1) == {}


def test_scontrol_gives_finished_tasks_without_accounting() -> None:
    assert "accounting storage is disabled" in (DATA / "sacct-disabled.txt").read_text()
    tasks = parse_scontrol((DATA / "scontrol-done.txt").read_text(), JOB)
    assert {t: (s.state, s.exit_code) for t, s in tasks.items()} == {
        1: ("COMPLETED", 0), 2: ("FAILED", 3), 3: ("COMPLETED", 0)}
    assert tasks[2].cell_state is CellState.FAILED and tasks[2].text == "FAILED exit=3"
    assert tasks[1].cell_state is CellState.OK


def test_sacct_states_map_to_catalog_rules() -> None:
    text = "\n".join([
        "77_1|COMPLETED|0:0|00:10:02", "77_1.batch|COMPLETED|0:0|00:10:02",
        "77_2|TIMEOUT|0:0|04:00:11", "77_3|OUT_OF_MEMORY|0:125|00:03:10",
        "77_4|PREEMPTED|0:0|01:00:00", "77_5|NODE_FAIL|0:0|00:00:12",
        "77_6|CANCELLED by 1000|0:9|00:00:05", "77_7|RUNNING|0:0|00:01:00"])
    tasks = parse_sacct(text, 77)
    assert {t: s.rule_id for t, s in tasks.items()} == {
        1: "", 2: "SLURM-TIMEOUT", 3: "SLURM4", 4: "SLURM-PREEMPTED", 5: "SLURM-NODE_FAIL",
        6: "SLURM-CANCELLED", 7: ""}
    assert tasks[6].text == "CANCELLED signal 9"
    assert [tasks[t].cell_state for t in (1, 2, 7)] == [CellState.OK, CellState.FAILED, CellState.RUNNING]
    live = parse_squeue("77_7|RUNNING|None\n77_[8-9]|PENDING|Priority\n", 77)
    assert merge(live, tasks)[8].text == "PENDING (Priority)"


def test_submitted_job_id() -> None:
    assert submitted_job("Submitted batch job 4242\n") == 4242


def test_a_slurm_instance_queue_panel_and_its_failures() -> None:
    from cockpit.models.hostview import HostTracker
    from cockpit.models.sweep import Instance
    from cockpit.services.config.profiles import load_named
    from cockpit.services.config.rulebook import load_rulebook
    from tests.test_hostview import snapshot

    tracker = HostTracker(Instance(name="s1", profile="slurm", host="h", queue="/q.txt"),
                          load_named("slurm"), load_rulebook(user=False))
    tracker.absorb(snapshot(queue_text="a.yaml t 1\nb.yaml t 1\nc.yaml t 1\nd.yaml t 1\n"))
    tasks = parse_sacct("9_1|COMPLETED|0:0|1\n9_2|TIMEOUT|0:0|2\n9_3|FAILED|4:0|1\n", 9)
    tasks.update(parse_squeue("9_4|PENDING|Resources\n", 9))
    tracker.absorb_slurm(tasks, 100.0)
    view = tracker.queue_view()
    assert [(c.name, c.state_text) for c in view.cells] == [
        ("a", "finished ok"), ("b", "failed TIMEOUT"), ("c", "failed exit=4"),
        ("d", "pending (Resources)")]
    assert view.start_index == 2 and not view.done
    events = {e.cell: e.rule_id for e in tracker.failures.events}
    assert events == {"b": "SLURM-TIMEOUT", "c": ""}
    tracker.absorb_slurm(tasks, 110.0)  # the next poll adds nothing new
    assert len(tracker.failures.events) == 2
