"""Cell state from all the evidence, and the resume it allows (issue 14).

The master logs below are what the public runbook's `run_queue.sh` prints (its header, its
STARTING/FINISHED marks, run_one.sh's `synced NAME to durable storage`), including the one its
own resume leaves behind: `| tee` truncates the master log, which then starts with
`=== Queue queue_1.txt: 3 ablations, starting from 3 on host ===`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from textual.widgets import DataTable, Static

from cockpit.models.hostview import HostTracker
from cockpit.models.queue import (
    CellState,
    QueueLog,
    QueueView,
    RunProgress,
    build_view,
    parse_queue_file,
)
from cockpit.models.snapshot import NA, GpuReading, GpuStatus, HostSnapshot, LogChunk, Memory, QueueFacts
from cockpit.models.sweep import Instance
from cockpit.services.alerts.report import queue_document
from cockpit.services.config.acks import AckStore
from cockpit.services.config.profiles import load_named
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.queue.launch import PROFILE_NOTE, resume_hint, run_command
from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.ops import ReportScreen
from cockpit.ui.render import Palette, cell_detail, queue_header, resume_hint_of
from tests.test_ui_app import composed, texts
from tests.test_ui_fleet import wait_until

QUEUE = """# one ablation cell per line
configs/ablation/c1.yaml reconstruction 2
configs/ablation/c2.yaml reconstruction 2
configs/ablation/c3.yaml reconstruction 2
"""
RULE = "=" * 64
PALETTE = Palette("green", "yellow", "red", "grey50")


def header(start: int, total: int = 3, queue: str = "queue.txt") -> str:
    """run_queue.sh's first line."""
    return f"=== Queue {queue}: {total} ablations, starting from {start} on box ==="


def started(i: int, name: str, total: int = 3) -> str:
    """A STARTING mark."""
    return f"[2026-11-24 07:0{i}:00] [{i}/{total}] STARTING {name} (reconstruction, 2ep)"


def finished(i: int, name: str, rc: int, total: int = 3) -> str:
    """A FINISHED mark (printed for failures too)."""
    return f"[2026-11-24 07:0{i}:30] [{i}/{total}] FINISHED {name} (exit={rc})"


def view_of(lines: list[str], *, alive: bool | None = False,
            progress: dict[str, RunProgress] | None = None) -> QueueView:
    """The queue view of QUEUE after `lines` of master log."""
    log = QueueLog()
    log.feed(lines, 0.0)
    return build_view(parse_queue_file(QUEUE), log, progress or {}, alive=alive,
                      now=1_900_000_000.0)


def states(view: QueueView) -> dict[str, CellState]:
    """Cell name -> state."""
    return {c.name: c.state for c in view.cells}


def test_truncated_by_a_resume_from_3_cells_before_are_finished_earlier_never_pending() -> None:
    """Fails before issue 14: cells 1-2 were pending and the resume offered start_index 1."""
    view = view_of([header(3), RULE, started(3, "c3"), RULE, "synced c3 to durable storage (x)",
                    finished(3, "c3", 0)])
    assert states(view) == {"c1": CellState.EARLIER, "c2": CellState.EARLIER, "c3": CellState.OK}
    c1 = view.cells[0]
    assert c1.state_text == "finished earlier" and c1.exit_code is None and c1.proven
    assert "master log truncated by a resume from 3" in c1.evidence
    assert "exit code lost" in c1.evidence
    c3 = view.cells[2]
    assert c3.evidence == "master log: FINISHED exit=0; synced to durable storage"
    assert view.resume_from is None, "every cell is proven: nothing to resume"
    assert view.unproven_before_resume == ()
    assert view.finished == 3 and view.summary == "3/3"


def test_finished_earlier_is_not_ok() -> None:
    """The exit code was lost with the truncated log: a distinct state, never OK."""
    view = view_of([header(2), started(2, "c2"), finished(2, "c2", 0)])
    c1 = view.cells[0]
    assert c1.state is CellState.EARLIER and c1.state is not CellState.OK


def test_own_log_completion_is_shown_with_finished_earlier() -> None:
    view = view_of([header(3), started(3, "c3"), finished(3, "c3", 0)],
                   progress={"c1": RunProgress(2, 2, True), "c2": RunProgress(1, 2, False)})
    c1, c2, _ = view.cells
    assert c1.evidence.endswith("own log: Training completed")
    assert c2.evidence.endswith("own log: no completion line")


def test_failed_cell_is_not_proven_and_is_named_for_rerun() -> None:
    """c2 failed, c3 ran after it: a resume cannot reach c2 without re-running c3."""
    view = view_of([header(1), started(1, "c1"), finished(1, "c1", 0), started(2, "c2"),
                    finished(2, "c2", 1), started(3, "c3"), finished(3, "c3", 0),
                    "[2026-11-24 07:04:00] === QUEUE DONE on box -- 1 cell(s) FAILED: c2 ==="])
    c2 = view.cells[1]
    assert c2.state is CellState.FAILED and not c2.proven
    assert c2.evidence == "master log: FINISHED exit=1"
    assert view.resume_from is None
    assert [c.name for c in view.unproven_before_resume] == ["c2"]


def test_failed_then_pending_resume_starts_at_the_failed_cell() -> None:
    """The first cell without proof of success, when no proven cell follows it."""
    view = view_of([header(1), started(1, "c1"), finished(1, "c1", 0), started(2, "c2"),
                    finished(2, "c2", 1)])
    assert view.resume_from == 2
    assert view.unproven_before_resume == ()


def test_running_cell_shows_the_live_process_and_offers_no_resume() -> None:
    view = view_of([header(1), started(1, "c1"), finished(1, "c1", 0), started(2, "c2")],
                   alive=True)
    assert states(view)["c2"] is CellState.RUNNING
    assert view.cells[1].evidence == "master log: STARTING, no FINISHED; queue process alive"
    assert view.resume_from is None, "no resume while the queue runs"


def test_interrupted_cell_resumes_there() -> None:
    view = view_of([header(1), started(1, "c1"), finished(1, "c1", 0), started(2, "c2")],
                   alive=False)
    c2 = view.cells[1]
    assert c2.state is CellState.INTERRUPTED
    assert c2.evidence == "master log: STARTING, no FINISHED; no queue process"
    assert view.resume_from == 2


def test_no_evidence_is_pending_never_ok() -> None:
    """A completion line in the cell's own log without a FINISHED mark proves nothing."""
    view = view_of([], progress={"c1": RunProgress(2, 2, True)})
    assert states(view) == {"c1": CellState.PENDING, "c2": CellState.PENDING,
                            "c3": CellState.PENDING}
    assert view.cells[0].evidence == "no mark in the master log; own log: Training completed"
    assert not any(c.proven for c in view.cells)
    assert view.resume_from == 1


def test_appended_log_keeps_its_marks_a_later_header_is_not_a_truncation() -> None:
    """nohup `>>master.log` (or our `tee -a`): the earlier run's marks are still there."""
    view = view_of([header(1), started(1, "c1"), finished(1, "c1", 0), started(2, "c2"),
                    finished(2, "c2", 1), header(3), started(3, "c3"), finished(3, "c3", 0)])
    assert states(view) == {"c1": CellState.OK, "c2": CellState.FAILED, "c3": CellState.OK}


def test_a_rerun_appended_after_a_truncation_keeps_the_truncation_evidence() -> None:
    """`cockpit rerun` appends its own header (`starting from 1`) to the master log: c1 stays
    finished earlier, c2 takes the rerun's marks."""
    view = view_of([header(3), started(3, "c3"), finished(3, "c3", 0),
                    header(1, 1, "queue.rerun-1.txt"), started(1, "c2", 1),
                    finished(1, "c2", 0, 1)])
    assert states(view) == {"c1": CellState.EARLIER, "c2": CellState.OK, "c3": CellState.OK}


def test_a_rerun_start_clears_the_old_sync_evidence() -> None:
    view = view_of([header(1), started(1, "c1"), "synced c1 to durable storage (x)",
                    finished(1, "c1", 0), started(1, "c1")], alive=False)
    assert "synced" not in view.cells[0].evidence


def test_resume_hint_is_the_exact_command() -> None:
    """Ours: the deployed runner (`.cockpit/run_queue.<hash>.sh`), appending to the log.
    A hand-started queue: the runbook's command with tee -a (tmux) or >> (nohup) and the note
    on its PROFILE BLOCK environment."""
    launched = Instance.model_validate({
        "name": "b1", "profile": "generic-ssh", "host": "h", "queue": "/d/queue.txt",
        "queue_log": "/d/master.log", "launch": {"command": "python train.py"}})
    command, _ = resume_hint(launched, 2)
    assert command == run_command(launched, 2)
    assert "/d/.cockpit/run_queue." in command and " /d/queue.txt 2 " in command
    assert command.endswith("| tee -a /d/master.log")
    tmux = Instance.model_validate({
        "name": "b1", "profile": "generic-ssh", "host": "h", "queue": "/d/queue.txt",
        "queue_log": "/d/q1_master.log", "tmux_session": "q1"})
    command, note = resume_hint(tmux, 3)
    assert command == "cd /d && bash run_queue.sh /d/queue.txt 3 2>&1 | tee -a /d/q1_master.log"
    assert note.startswith(PROFILE_NOTE) and "q1" in note
    nohup = Instance.model_validate({
        "name": "b1", "profile": "generic-ssh", "host": "h", "queue": "/d/queue.txt",
        "queue_log": "/d/master.log"})
    command, note = resume_hint(nohup, 3)
    assert command == "cd /d && nohup bash run_queue.sh /d/queue.txt 3 </dev/null >>/d/master.log 2>&1 &"
    assert note == PROFILE_NOTE


# --------------------------------------------------------------- the panel and status --json


def snap(marks: str, pids: tuple[int, ...] | NA, chunks: tuple[LogChunk, ...] = ()) -> HostSnapshot:
    """One probe record of the queue: QUEUE, these master-log marks, these processes."""
    na = NA("not probed")
    return HostSnapshot(
        instance="b1", observed_at=1_900_000_000.0, remote_time=NA("no clock"), seq=1,
        hostname="box", gpu=GpuReading(GpuStatus.OK, ()), mounts=(),
        memory=Memory("none", na, na, na), tmux=(),
        queue=QueueFacts(pids, None, (), None, queue_text=QUEUE, queue_marks=marks),
        log_chunks=chunks, utc_offset=0.0)


HAND = {"name": "b1", "profile": "generic-ssh", "host": "h", "queue": "/d/queue.txt",
        "queue_log": "/d/q1_master.log", "run_logs": "/d/logs", "tmux_session": "q1"}
INTERRUPTED = "\n".join([header(1), started(1, "c1"), finished(1, "c1", 0), started(2, "c2")])


def tracker_with(pids: tuple[int, ...] | NA, marks: str = INTERRUPTED) -> HostTracker:
    """A box's tracker after one record."""
    tracker = HostTracker(Instance.model_validate(HAND), load_named("generic-ssh"),
                          load_rulebook(user=False))
    tracker.absorb(snap(marks, pids))
    return tracker


def test_the_panel_offers_the_resume_command_only_when_the_queue_is_known_stopped() -> None:
    stopped = queue_header(tracker_with(()), PALETTE).plain
    assert "resume at cell 2 (c: copy): cd /d && bash run_queue.sh /d/queue.txt 2 2>&1 | tee -a " \
           "/d/q1_master.log" in stopped
    assert "PROFILE BLOCK" in stopped
    assert "resume at" not in queue_header(tracker_with((42,)), PALETTE).plain, "runs: no hint"
    assert "resume at" not in queue_header(tracker_with(NA("ps missing")), PALETTE).plain
    assert resume_hint_of(tracker_with((42,))) is None


def test_the_panel_names_unproven_cells_a_resume_cannot_reach() -> None:
    marks = "\n".join([header(1), started(1, "c1"), finished(1, "c1", 0), started(2, "c2"),
                       finished(2, "c2", 1), started(3, "c3"), finished(3, "c3", 0)])
    head = queue_header(tracker_with((), marks), PALETTE).plain
    assert "resume at" not in head
    assert "not reached by a resume: c2" in head


def test_the_detail_line_shows_the_evidence_with_box_text_made_visible() -> None:
    view = view_of([header(3), started(3, "c3"), finished(3, "c3", 0)])
    text = cell_detail(view.cells[0], PALETTE).plain
    assert text == ("1 c1: finished earlier · master log truncated by a resume from 3; exit "
                    "code lost")
    hostile = dataclasses.replace(view.cells[0], name="c1\x1b[2J")
    assert "\x1b" not in cell_detail(hostile, PALETTE).plain


def test_status_json_carries_k_of_n_each_cells_state_and_evidence() -> None:
    inst = Instance.model_validate(HAND)
    doc = queue_document(inst, snap(INTERRUPTED, (42,), (
        LogChunk("/d/logs/c1.log", 1, 0, b"Epoch 2/2 done\nTraining completed\n"),)))
    assert doc["progress"] == "1/3" and doc["total"] == 3
    cells = {c["name"]: c for c in doc["cells"]}
    assert cells["c1"]["state"] == "finished ok" and cells["c1"]["proven"]
    assert cells["c1"]["evidence"] == "master log: FINISHED exit=0; own log: Training completed"
    assert cells["c2"]["state"] == "running"
    assert doc["resume_hint"] is None, "no resume command while the queue runs"
    stopped = queue_document(inst, snap(INTERRUPTED, ()))
    assert stopped["resume_from"] == 2
    assert stopped["resume_hint"]["command"].endswith("| tee -a /d/q1_master.log")


async def test_box_screen_x_reruns_the_highlighted_cell_through_the_service(
        demo: Path, tmp_path: Path) -> None:
    """`X` on the box screen runs `rerun` of the highlighted cell and shows what the service
    said: here its refusal (the instance has no `launch.command`, so nothing is started and the
    shared demo fleet is left as it is); the detail line follows the highlighted cell."""
    loaded = load_sweep(demo / "sweep.yaml")
    insts = tuple(i.model_copy(update={"launch": None}) if i.name == "a1" else i
                  for i in loaded.sweep.instances)
    loaded = dataclasses.replace(loaded, sweep=loaded.sweep.model_copy(update={"instances": insts}))
    app = CockpitApp(loaded, banners=False, acks=AckStore(tmp_path / "acks.json"))
    async with app.run_test(size=(160, 44)) as pilot:
        await wait_until(pilot, lambda: app.trackers["a1"].snapshot is not None, 20, "a1")
        app.open_box("a1")
        await wait_until(pilot, lambda: composed(app, BoxScreen, "#queue-table")
                         and app.screen.query_one("#queue-table", DataTable).row_count > 0,
                         10, "the box screen's queue rows")
        screen = app.screen
        assert isinstance(screen, BoxScreen)
        cell = screen.highlighted_cell()
        assert cell is not None
        await wait_until(pilot, lambda: cell.name in texts([screen.query_one("#queue-detail",
                                                                              Static)]),
                         10, "the detail line")
        await pilot.press("X")
        await wait_until(pilot, lambda: composed(app, ReportScreen, "#report-body"), 60, "report")
        report = app.screen
        assert isinstance(report, ReportScreen)
        assert report.title_text == "rerun a1: refused"
        assert "launch.command" in texts([report.query_one("#report-body", Static)])
        await pilot.press("q")


def test_a_cell_that_counted_only_steps_gives_no_pace_for_cells_not_started() -> None:
    """The queue ETA multiplies a seconds-per-epoch pace by the pending cells' queue-file
    epochs: a finished cell whose log counted only steps (500 of them) must not give that pace
    (it would read as 0.1 s per epoch)."""
    log = QueueLog()
    log.feed([header(1), started(1, "c1"), finished(2, "c1", 0), started(3, "c2")], 0.0)
    t3 = log.started["c2"].at
    steps_only = RunProgress(epoch=500, epochs=500, unit="step")
    running = RunProgress(epoch=1, epochs=2, epoch_seen=True)
    view = build_view(parse_queue_file(QUEUE), log, {"c1": steps_only, "c2": running},
                      alive=True, now=t3 + 100.0)
    assert view.running is not None and view.running.eta_s == 100.0
    assert view.eta_s == 100.0 + 2 * 100.0, "the pending cell's 2 epochs at c2's 100 s/epoch"
