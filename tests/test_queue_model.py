"""cockpit.models.queue: the queue file, the master log of run_queue.sh, and per-cell state.

The log lines below are in the exact format cockpit/data/run_queue.sh prints.
"""

from __future__ import annotations

import calendar
import os
import time
from collections.abc import Iterator

import pytest

from cockpit.models.queue import (
    DEFAULT_EPOCHS,
    MAX_PARTIAL,
    CellState,
    CellView,
    LineSplitter,
    QueueLog,
    QueueView,
    RunProgress,
    build_view,
    log_timestamp,
    parse_queue_file,
)
from cockpit.models.snapshot import NA

RULE = "=" * 70
DAY = "2026-11-21"


def stamp(hms: str) -> str:
    """A run_queue.sh `ts` value on the test day."""
    return f"{DAY} {hms}"


def epoch(hms: str) -> float:
    """The epoch seconds of `stamp(hms)` read as UTC (the tests feed utc_offset=0.0)."""
    return float(calendar.timegm(time.strptime(stamp(hms), "%Y-%m-%d %H:%M:%S")))


def header(total: int, start: int = 1, queue: str = "queue_1.txt", host: str = "demo-a1") -> str:
    return f"=== Queue {queue}: {total} ablations, starting from {start} on {host} ==="


def starting(hms: str, i: int, n: int, name: str, task: str, epochs: int) -> str:
    return f"[{stamp(hms)}] [{i}/{n}] STARTING {name} ({task}, {epochs}ep)"


def finished(hms: str, i: int, n: int, name: str, rc: int) -> str:
    return f"[{stamp(hms)}] [{i}/{n}] FINISHED {name} (exit={rc})"


def done(hms: str, rest: str, host: str = "demo-a1") -> str:
    return f"[{stamp(hms)}] === QUEUE DONE on {host} -- {rest} ==="


def fed(lines: list[str]) -> QueueLog:
    log = QueueLog()
    log.feed(lines, 0.0)
    return log


def by_name(view: QueueView) -> dict[str, CellView]:
    return {c.name: c for c in view.cells}


FOUR = parse_queue_file(
    "configs/baseline.yaml reconstruction 6\n"
    "configs/aug_strong.yaml reconstruction 6\n"
    "configs/det_baseline.yaml detection 6\n"
    "configs/det_aug.yaml detection\n"
)


# --------------------------------------------------------------------------- queue file


def test_parse_queue_file_skips_comments_and_blanks_and_counts_cells_only() -> None:
    text = (
        "# sweep 1: reconstruction first\n"
        "\n"
        "configs/baseline.yaml reconstruction 6\r\n"
        "   # an indented comment\r\n"
        "\r\n"
        "configs/det_baseline.yaml\tdetection\r\n"
        "\t configs/sub/aug_strong.yaml \t reconstruction\t12  \n"
        "configs/no_task.yaml\n"
    )
    cells = parse_queue_file(text)
    assert [(c.index, c.name, c.task, c.epochs, c.lineno) for c in cells] == [
        (1, "baseline", "reconstruction", 6, 3),
        (2, "det_baseline", "detection", DEFAULT_EPOCHS, 6),
        (3, "aug_strong", "reconstruction", 12, 7),
        (4, "no_task", "", DEFAULT_EPOCHS, 8),
    ]
    assert cells[2].cfg == "configs/sub/aug_strong.yaml"
    assert DEFAULT_EPOCHS == 20


def test_parse_queue_file_name_strips_only_a_yaml_suffix() -> None:
    cells = parse_queue_file("a/b/run.yml t\nplain t\nx.yaml.bak t\n/abs/path/c.yaml t 3\n")
    assert [c.name for c in cells] == ["run.yml", "plain", "x.yaml.bak", "c"]


def test_parse_queue_file_non_numeric_epochs_fall_back_to_default() -> None:
    (cell,) = parse_queue_file("configs/a.yaml det many\n")
    assert cell.epochs == DEFAULT_EPOCHS


def test_parse_queue_file_empty_and_comment_only() -> None:
    assert parse_queue_file("") == ()
    assert parse_queue_file("# nothing yet\n\n   \n") == ()


def test_parse_queue_file_superscript_digit_epochs_do_not_raise() -> None:
    (cell,) = parse_queue_file("configs/a.yaml det ²\n")
    assert cell.epochs == DEFAULT_EPOCHS


# --------------------------------------------------------------------------- line splitter


def test_line_splitter_keeps_partial_lines_across_chunks() -> None:
    s = LineSplitter()
    assert s.feed("Epoch 1/6 | lo") == []
    assert s.feed("ss 0.5\nEpoch 2/") == ["Epoch 1/6 | loss 0.5"]
    assert s.feed("6 | loss 0.4\n\nend\n") == ["Epoch 2/6 | loss 0.4", "", "end"]
    assert s.feed("") == []


def test_line_splitter_reset_drops_the_partial() -> None:
    s = LineSplitter()
    assert s.feed("old file, half a li") == []
    assert s.feed("new file line\n", reset=True) == ["new file line"]


def test_line_splitter_without_reset_joins_the_partial() -> None:
    s = LineSplitter()
    s.feed("half ")
    assert s.feed("line\n") == ["half line"]


def test_line_splitter_progress_bar_rewrites_keep_the_last_state() -> None:
    s = LineSplitter()
    lines = s.feed(" 10%|#         |\r 50%|#####     |\r100%|##########|\nnext\n")
    assert lines == ["100%|##########|", "next"]


def test_line_splitter_progress_bar_split_across_chunks() -> None:
    s = LineSplitter()
    assert s.feed("\r 10%|#   |\r 40%|####") == []
    assert s.feed("|\r100%|######|\n") == ["100%|######|"]


def test_line_splitter_crlf_lines() -> None:
    s = LineSplitter()
    assert s.feed("first\r\nsecond\r\nthi") == ["first", "second"]
    assert s.feed("rd\r\n") == ["third"]


def test_line_splitter_crlf_split_between_chunks() -> None:
    s = LineSplitter()
    assert s.feed("Epoch 3/20 | loss 0.4\r") == []
    assert s.feed("\nnext\r\n") == ["Epoch 3/20 | loss 0.4", "next"]


def test_line_splitter_caps_an_endless_partial_line() -> None:
    s = LineSplitter()
    assert s.feed("a" * 10 + "b" * MAX_PARTIAL) == []
    (line,) = s.feed("\n")
    assert line == "b" * MAX_PARTIAL


# --------------------------------------------------------------------------- timestamps


@pytest.fixture
def local_zone() -> Iterator[None]:
    """Run with this machine's zone at UTC+8 (POSIX TZ string, no tzdata needed)."""
    saved = os.environ.get("TZ")
    os.environ["TZ"] = "CST-8"
    time.tzset()
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = saved
        time.tzset()


def test_log_timestamp_with_a_utc_offset() -> None:
    parsed = time.strptime("2026-11-21 10:00:00", "%Y-%m-%d %H:%M:%S")
    utc = calendar.timegm(parsed)
    assert log_timestamp("2026-11-21 10:00:00", 28800.0) == utc - 28800.0
    assert log_timestamp("2026-11-21 10:00:00", -12600.0) == utc + 12600.0
    assert log_timestamp("2026-11-21 10:00:00", 0.0) == utc
    # 10:00 at +0800 is 02:00 UTC.
    assert log_timestamp("2026-11-21 10:00:00", 28800.0) == calendar.timegm(
        time.strptime("2026-11-21 02:00:00", "%Y-%m-%d %H:%M:%S"))


@pytest.mark.usefixtures("local_zone")
def test_log_timestamp_without_an_offset_uses_this_machines_zone() -> None:
    utc = calendar.timegm(time.strptime("2026-11-21 10:00:00", "%Y-%m-%d %H:%M:%S"))
    assert log_timestamp("2026-11-21 10:00:00", NA("not reported")) == utc - 28800.0


def test_log_timestamp_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        log_timestamp("21/11/2026 10:00", 0.0)


# --------------------------------------------------------------------------- master log


def test_queue_log_reads_real_run_queue_lines() -> None:
    log = QueueLog()
    newly = log.feed([
        header(4),
        RULE,
        starting("10:00:00", 1, 4, "baseline", "reconstruction", 6),
        RULE,
        "Epoch 1/6 | step 10 | loss 0.9",  # the cells' output is tee'd into the master log
        finished("10:00:09", 1, 4, "baseline", 0),
        RULE,
        starting("10:00:09", 2, 4, "det_baseline", "detection", 6),
        RULE,
        finished("10:02:00", 2, 4, "det_baseline", 1),
        done("10:05:00", "1 cell(s) FAILED: det_baseline"),
    ], 0.0)
    assert [(name, fin.exit_code, fin.index) for name, fin in newly] == [
        ("baseline", 0, 1), ("det_baseline", 1, 2)]
    assert log.order == ["baseline", "det_baseline"]
    assert (log.header_start, log.total) == (1, 4)
    assert log.started["baseline"].at == epoch("10:00:00")
    assert (log.started["baseline"].task, log.started["baseline"].epochs) == ("reconstruction", 6)
    assert log.started["det_baseline"].index == 2
    assert log.finished["baseline"].at == epoch("10:00:09")
    assert log.finished["det_baseline"].exit_code == 1
    assert log.last_started == "det_baseline"
    assert log.done_line == (
        "[2026-11-21 10:05:00] === QUEUE DONE on demo-a1 -- 1 cell(s) FAILED: det_baseline ===")


def test_queue_log_header_sets_start_and_total() -> None:
    log = fed([header(7, start=3, queue="/root/q/queue 2.txt")])
    assert (log.header_start, log.total) == (3, 7)
    assert log.started == {}


def test_queue_log_starting_without_task_and_epochs() -> None:
    log = fed([f"[{stamp('10:00:00')}] [1/1] STARTING bare"])
    st = log.started["bare"]
    assert (st.task, st.epochs, st.total) == ("", None, 1)


def test_queue_log_ignores_lines_that_only_look_similar() -> None:
    log = fed([
        "STARTING baseline (reconstruction, 6ep)",  # no timestamp: not run_queue.sh's
        "[10:00:00] kept best.pth, pruned latest.pth for baseline",
        "=== QUEUE DONE on demo-a1 -- all 4 cell(s) exited 0 ===",  # no timestamp
    ])
    assert log.started == {} and log.finished == {} and log.done_line is None


def test_feeding_the_same_lines_twice_reports_each_finish_once() -> None:
    lines = [
        header(2),
        starting("10:00:00", 1, 2, "baseline", "reconstruction", 6),
        finished("10:00:09", 1, 2, "baseline", 0),
        starting("10:00:09", 2, 2, "det_baseline", "detection", 6),
        finished("10:01:00", 2, 2, "det_baseline", 3),
    ]
    log = QueueLog()
    first = log.feed(lines, 0.0)
    assert [name for name, _ in first] == ["baseline", "det_baseline"]
    # The first-contact marks and the 64 KiB log tail overlap: the tail repeats lines.
    assert log.feed(lines[2:], 0.0) == []
    assert log.feed(lines, 0.0) == []
    assert set(log.finished) == {"baseline", "det_baseline"}
    assert log.order == ["baseline", "det_baseline"]


def test_restart_clears_the_finished_state_of_a_rerun_cell() -> None:
    log = fed([
        header(2),
        starting("10:00:00", 1, 2, "baseline", "reconstruction", 6),
        finished("10:01:00", 1, 2, "baseline", 1),
        done("10:01:01", "1 cell(s) FAILED: baseline"),
    ])
    assert "baseline" in log.finished and log.done_line is not None
    rerun = log.feed([header(2), starting("11:00:00", 1, 2, "baseline", "reconstruction", 6)], 0.0)
    assert rerun == []
    assert "baseline" not in log.finished
    assert log.started["baseline"].at == epoch("11:00:00")
    assert log.done_line is None
    view = build_view(parse_queue_file("baseline.yaml r 6\nnext.yaml r 6\n"), log, {}, alive=True,
                      now=epoch("11:00:30"))
    assert view.cells[0].state is CellState.RUNNING
    # The rerun's own FINISHED is a new event even though the cell finished before.
    again = log.feed([finished("11:05:00", 1, 2, "baseline", 1)], 0.0)
    assert [(n, f.at) for n, f in again] == [("baseline", epoch("11:05:00"))]


def test_a_header_alone_clears_a_previous_done_line() -> None:
    log = fed([done("10:00:00", "all 1 cell(s) exited 0")])
    assert log.done_line is not None
    log.feed([header(1)], 0.0)
    assert log.done_line is None


def test_feed_uses_the_remote_utc_offset() -> None:
    log = QueueLog()
    ((_, fin),) = log.feed([finished("10:00:00", 1, 1, "a", 0)], 28800.0)
    assert fin.at == epoch("10:00:00") - 28800.0


# --------------------------------------------------------------------------- build_view


def test_build_view_pending_running_finished_and_etas() -> None:
    log = fed([
        header(4),
        starting("10:00:00", 1, 4, "baseline", "reconstruction", 6),
        finished("10:10:00", 1, 4, "baseline", 0),
        starting("10:10:00", 2, 4, "aug_strong", "reconstruction", 6),
    ])
    progress = {"baseline": RunProgress(6, 6, True), "aug_strong": RunProgress(2, 6)}
    view = build_view(FOUR, log, progress, alive=True, now=epoch("10:15:00"))
    cells = by_name(view)
    assert [c.state_text for c in view.cells] == ["finished ok", "running", "pending", "pending"]
    assert cells["baseline"].elapsed_s == 600.0
    assert cells["baseline"].exit_code == 0
    run = cells["aug_strong"]
    assert view.running == run
    assert (run.epoch, run.epochs, run.elapsed_s) == (2, 6, 300.0)
    # 300 s for 2 epochs -> 150 s/epoch, 4 epochs left.
    assert run.eta_s == pytest.approx(600.0)
    # Observed rates: 600 s / 6 epochs = 100 and 150 -> 125 s/epoch; pending 6 + 20 epochs.
    assert cells["det_aug"].epochs == DEFAULT_EPOCHS
    assert view.eta_s == pytest.approx(600.0 + (6 + 20) * 125.0)
    assert view.start_index == 2
    assert view.summary == "1/4 aug_strong"
    assert not view.done


def test_build_view_failed_cell_is_finished_and_skipped_by_start_index() -> None:
    log = fed([
        header(4),
        starting("10:00:00", 1, 4, "baseline", "reconstruction", 6),
        finished("10:00:09", 1, 4, "baseline", 0),
        starting("10:00:09", 2, 4, "aug_strong", "reconstruction", 6),
        finished("10:00:30", 2, 4, "aug_strong", 1),
        starting("10:00:30", 3, 4, "det_baseline", "detection", 6),
    ])
    view = build_view(FOUR, log, {}, alive=True, now=epoch("10:01:00"))
    cells = by_name(view)
    assert cells["aug_strong"].state is CellState.FAILED
    assert cells["aug_strong"].state_text == "failed exit=1"
    assert cells["aug_strong"].exit_code == 1
    assert view.failed == (cells["aug_strong"],)
    assert view.finished == 2
    assert view.start_index == 3
    assert view.summary == "2/4 det_baseline"
    # No per-run progress yet: no rate, so no ETA rather than a made-up one.
    assert cells["det_baseline"].eta_s is None
    assert view.eta_s is None


def test_build_view_all_done() -> None:
    lines = [header(4)]
    for i, name in enumerate(["baseline", "aug_strong", "det_baseline", "det_aug"], start=1):
        lines += [starting(f"10:0{i}:00", i, 4, name, "t", 6), finished(f"10:0{i}:30", i, 4, name, 0)]
    lines.append(done("10:05:00", "all 4 cell(s) exited 0"))
    log = fed(lines)
    view = build_view(FOUR, log, {}, alive=False, now=epoch("12:00:00"))
    assert all(c.state is CellState.OK for c in view.cells)
    assert view.done
    assert view.summary == "4/4 done"
    assert view.start_index is None
    assert view.running is None
    assert view.eta_s is None
    # Unknown liveness still reads as done; a live queue process means a new run began.
    assert build_view(FOUR, log, {}, alive=None, now=0.0).done
    assert not build_view(FOUR, log, {}, alive=True, now=0.0).done


def test_build_view_dead_queue_makes_the_started_cell_interrupted() -> None:
    queue = parse_queue_file("a.yaml t 3\nb.yaml t 3\nc.yaml t 3\n")
    log = fed([
        header(3),
        starting("10:00:00", 1, 3, "a", "t", 3),
        finished("10:00:30", 1, 3, "a", 0),
        starting("10:00:30", 2, 3, "b", "t", 3),
    ])
    progress = {"a": RunProgress(3, 3, True), "b": RunProgress(1, 3)}
    view = build_view(queue, log, progress, alive=False, now=epoch("10:05:00"))
    b = by_name(view)["b"]
    assert b.state is CellState.INTERRUPTED
    assert b.state_text == "interrupted"
    assert b.eta_s is None
    assert view.running is None
    assert view.start_index == 2
    assert view.eta_s is None
    assert view.summary == "1/3 stopped"


def test_build_view_unknown_liveness_keeps_running() -> None:
    queue = parse_queue_file("a.yaml t 3\nb.yaml t 3\n")
    log = fed([header(2), starting("10:00:00", 1, 2, "a", "t", 3)])
    view = build_view(queue, log, {"a": RunProgress(1, 3)}, alive=None, now=epoch("10:01:00"))
    a = by_name(view)["a"]
    assert a.state is CellState.RUNNING
    assert a.eta_s == pytest.approx(120.0)
    assert view.summary == "0/2 a"


def test_build_view_only_the_last_started_cell_can_be_running() -> None:
    queue = parse_queue_file("a.yaml t 3\nb.yaml t 3\nc.yaml t 3\n")
    log = fed([
        header(3),
        starting("10:00:00", 1, 3, "a", "t", 3),  # killed, never FINISHED
        header(3, start=2),
        starting("10:30:00", 2, 3, "b", "t", 3),
    ])
    view = build_view(queue, log, {}, alive=True, now=epoch("10:31:00"))
    assert [c.state for c in view.cells] == [CellState.INTERRUPTED, CellState.RUNNING, CellState.PENDING]
    assert view.start_index == 1
    assert view.summary == "0/3 b"


def test_build_view_elapsed_never_negative_with_a_clock_behind_the_log() -> None:
    queue = parse_queue_file("a.yaml t 3\n")
    log = fed([starting("10:00:00", 1, 1, "a", "t", 3)])
    view = build_view(queue, log, {"a": RunProgress(1, 3)}, alive=True, now=epoch("09:59:00"))
    assert view.cells[0].elapsed_s == 0.0
    assert view.cells[0].eta_s == 0.0


def test_build_view_shows_cells_the_queue_file_no_longer_lists() -> None:
    queue = parse_queue_file("baseline.yaml reconstruction 6\n")
    log = fed([
        header(2),
        starting("10:00:00", 1, 2, "baseline", "reconstruction", 6),
        finished("10:00:09", 1, 2, "baseline", 0),
        starting("10:00:09", 2, 2, "removed_cell", "detection", 8),
        f"[{stamp('10:00:10')}] [3/3] STARTING no_epochs",
    ])
    view = build_view(queue, log, {}, alive=False, now=epoch("10:01:00"))
    assert [(c.index, c.name, c.task, c.epochs) for c in view.cells] == [
        (1, "baseline", "reconstruction", 6),
        (2, "removed_cell", "detection", 8),
        (3, "no_epochs", "", DEFAULT_EPOCHS),
    ]
    assert view.cells[1].state is CellState.INTERRUPTED


def test_build_view_epochs_prefer_the_run_log_then_the_log_then_the_file() -> None:
    queue = parse_queue_file("a.yaml t 3\nb.yaml t 3\nc.yaml t 3\n")
    log = fed([starting("10:00:00", 1, 3, "a", "t", 9), finished("10:00:01", 1, 3, "a", 0),
               starting("10:00:01", 2, 3, "b", "t", 7)])
    view = build_view(queue, log, {"a": RunProgress(12, 12, True)}, alive=True, now=epoch("10:00:05"))
    assert [c.epochs for c in view.cells] == [12, 7, 3]


def test_build_view_queue_eta_between_cells_while_alive() -> None:
    queue = parse_queue_file("a.yaml t 4\nb.yaml t 10\n")
    log = fed([starting("10:00:00", 1, 2, "a", "t", 4), finished("10:04:00", 1, 2, "a", 0)])
    progress = {"a": RunProgress(4, 4, True)}
    view = build_view(queue, log, progress, alive=True, now=epoch("10:04:01"))
    assert view.running is None
    assert view.eta_s == pytest.approx(10 * 60.0)
    # Nothing alive and nothing running: no ETA.
    assert build_view(queue, log, progress, alive=False, now=0.0).eta_s is None


def test_empty_view() -> None:
    view = build_view((), QueueLog(), {}, alive=None, now=0.0)
    assert view.cells == ()
    assert view.summary == "-"
    assert view.start_index is None
