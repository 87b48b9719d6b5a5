"""cockpit.models.progress: k/N from the lines real trainers print, and the queue panel's view.

The samples in tests/data/progress/ are lines copied from public issue threads (each file's
`#!` header names its sources); expected.yaml holds what each line says. Every test here fails
on the code before this module: it read only `Epoch k/N` with a capital E.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.models.hostview import HostTracker
from cockpit.models.profile import Profile
from cockpit.models.progress import (
    MAX_COUNT,
    MAX_SCAN,
    Progress,
    advance,
    clean_segment,
    last_redrawn,
    parse_progress,
)
from cockpit.models.queue import CellState, RunProgress
from cockpit.models.snapshot import LogChunk
from cockpit.services.config.profiles import load_named
from tests.test_hostview import LOGS, RULEBOOK, chunk, instance, remote, snapshot, ts

DATA = Path(__file__).parent / "data" / "progress"
EXPECTED: dict[str, list[Any]] = yaml.safe_load((DATA / "expected.yaml").read_text())


def sample_lines(name: str) -> list[str]:
    """The sample lines of one file, without its `#!` source header."""
    return [ln for ln in (DATA / name).read_text(encoding="utf-8").splitlines()
            if not ln.startswith("#!")]


def as_row(p: Progress | None) -> list[Any] | None:
    """A parse result in expected.yaml's form."""
    if p is None:
        return None
    row: list[Any] = [p.unit, p.done, p.total,
                      None if p.fraction is None else round(p.fraction, 3)]
    if p.within_epoch:
        row.append("within_epoch")
    return row


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_named("autodl")


# --------------------------------------------------------------------------- samples


def test_every_sample_file_has_a_source_and_an_expectation() -> None:
    files = sorted(p.name for p in DATA.glob("*.txt"))
    assert files == sorted(EXPECTED)
    for name in files:
        header = [ln for ln in (DATA / name).read_text().splitlines() if ln.startswith("#!")]
        assert any("https://github.com/" in ln for ln in header), f"{name} names no source"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_sample_lines_parse_to_the_expected_progress(name: str) -> None:
    lines = sample_lines(name)
    expected = EXPECTED[name]
    assert len(lines) == len(expected), name
    for line, want in zip(lines, expected, strict=True):
        got = as_row(parse_progress(line))
        if want is not None:
            want = [w if not isinstance(w, float) or i != 3 else round(w, 3)
                    for i, w in enumerate(want)]
        assert got == want, line


def test_trap_lines_say_nothing() -> None:
    assert all(parse_progress(line) is None for line in sample_lines("traps.txt"))


@pytest.mark.parametrize("line", [
    "2026/11/24 10:00:01 saved",  # a date
    "wrote runs/a/1/2/ckpt.pt",  # a path
    "loss 3/4 of the way",  # a ratio that is not a counter
    "acc: 56.2500%(9/16)",  # a batch's hits, inside other words
    "Epoch 12/3",  # k past its N
    "step 0/0",  # no total
    f"Epoch 1/{MAX_COUNT + 1}",  # past the named bound
    f"step 5/{10**13}",  # more digits than a count has
    "Epoch " + "9" * 5000 + "/5",  # int() would raise past 4300 digits
    "Step 3/10 : RUN pip install -r requirements.txt",  # a Docker build's step
    "Validation DataLoader 0:  45%|████▌     | 5/11 [00:01<00:01,  4.1it/s]",  # not training
    "Test:  [ 0/50]  eta: 0:00:12",  # DETR's evaluation loop
    "epoch 1.5/3",  # a decimal is no epoch counter
    "version 2.1/3.0",
    "",
    "\r\r\r",
])
def test_inline_traps(line: str) -> None:
    assert parse_progress(line) is None


def test_case_does_not_matter() -> None:
    for line in sample_lines("keras.txt") + sample_lines("lightning.txt"):
        assert parse_progress(line.lower()) == parse_progress(line.upper()) == parse_progress(line)
    assert parse_progress("epoch 1/5") == Progress("epoch", 1, 5)
    assert parse_progress("EPOCH 1/5") == Progress("epoch", 1, 5)


def test_the_brief_formats() -> None:
    """The shapes named in issue 14, as one line each."""
    assert parse_progress("Epoch 3:  45%|████▌     | 450/1000 [00:10<00:12, 44.1it/s]") == \
        Progress("epoch", 3, None, 0.45)
    assert parse_progress("  30%|███       | 300/1000") == Progress("step", 300, 1000)
    assert parse_progress("{'loss': 0.41, 'learning_rate': 4.5e-05, 'epoch': 1.5}") == \
        Progress("epoch", 1.5)
    assert parse_progress("step 1200/50000") == Progress("step", 1200, 50000)
    assert parse_progress("iter 300/10000") == Progress("step", 300, 10000)
    assert parse_progress("[1200/50000]") == Progress("step", 1200, 50000)
    assert parse_progress("2026-11-24 10:00:00 - INFO - epoch 0 step 50/2464 loss=6.90") == \
        Progress("epoch", 0, None, 50 / 2464)


# --------------------------------------------------------------------------- \r and colour


def test_a_redrawn_bar_is_judged_by_its_last_segment() -> None:
    bars = sample_lines("lightning.txt")[2:9]
    raw = "\r".join(bars)  # how tqdm writes them: one line redrawn, no newline
    assert parse_progress(raw) == parse_progress(bars[-1])
    assert parse_progress(raw + "\r") == parse_progress(bars[-1])  # `bar\r`


def test_colour_codes_are_ignored() -> None:
    assert parse_progress("\x1b[32mEpoch 2/7\x1b[0m - loss \x1b[1m0.3\x1b[0m") == \
        Progress("epoch", 2, 7)
    assert parse_progress("\x1b]0;title\x07Epoch \x1b[1m2\x1b[0m/7") == Progress("epoch", 2, 7)


def test_a_line_is_scanned_only_to_max_scan() -> None:
    assert len(clean_segment("x" * (10 * MAX_SCAN))) == MAX_SCAN
    assert parse_progress("x" * MAX_SCAN + "Epoch 2/7") is None
    assert parse_progress("Epoch 2/7 " + "x" * (10 * MAX_SCAN)) == Progress("epoch", 2, 7)


def test_last_redrawn_takes_only_whole_segments() -> None:
    # A chunk that starts mid-bar: its first piece is not a whole redraw.
    assert last_redrawn("| 449/1000 [00:10]\rEpoch 3:  45%|x| 450/1000 [00:10]\rEpoch 3:  4") \
        == "Epoch 3:  45%|x| 450/1000 [00:10]"
    assert last_redrawn("tail of a bar\rEpoch 3:  4") is None
    assert last_redrawn("done\nEpoch 3:  45%|x| 450/1000\rEpoch 3:  46%|x| 46") == \
        "Epoch 3:  45%|x| 450/1000"
    assert last_redrawn("Epoch 3/10\n") is None  # whole lines are read as lines
    assert last_redrawn("") is None


# --------------------------------------------------------------------------- RunProgress


def fold(lines: list[str]) -> RunProgress:
    run = RunProgress()
    for line in lines:
        if (p := parse_progress(line)) is not None:
            advance(run, p)
    return run


def test_keras_epoch_then_its_step_bar() -> None:
    run = fold(sample_lines("keras.txt")[:2])
    assert (run.epoch, run.epochs, run.unit, run.fraction) == (1, 200, "epoch", 1.0)
    run = fold(sample_lines("keras.txt"))
    assert (run.epoch, run.epochs, run.fraction) == (10, 100, None)  # a new epoch: no bar yet


def test_hf_steps_stand_in_until_an_epoch_appears_and_eval_bars_are_ignored() -> None:
    lines = sample_lines("hf_trainer.txt")
    run = fold(lines[:3])
    assert (run.unit, run.epoch, run.epochs, run.step, run.steps) == ("step", 4, 203, 4, 203)
    advance(run, Progress("step", 3, 3))  # the evaluation loop's own bar: 3/3 is not "done"
    assert (run.step, run.steps, run.epoch, run.epochs) == (4, 203, 4, 203)
    run = fold(lines)
    # The log dicts name epochs: epochs done 0.87, the total now comes from the queue file.
    assert (run.unit, run.epoch, run.epochs, run.steps) == ("epoch", 0, 0, 203)
    assert run.fraction == pytest.approx(0.87)
    advance(run, Progress("step", 100, 203))  # a bar after an epoch was seen: steps only
    assert (run.unit, run.epoch, run.step) == ("epoch", 0, 100)


def test_step_counters_without_an_epoch_give_k_of_n() -> None:
    run = fold(sample_lines("step_counters.txt"))
    assert (run.unit, run.epoch, run.epochs) == ("step", 5427, 250000)
    run = fold(sample_lines("step_counters.txt")[:2])  # `iter 2920:` has no total
    assert (run.unit, run.epoch, run.epochs, run.step) == ("epoch", 0, 0, 3000)


def test_eta_from_the_observed_pace() -> None:
    hf = RunProgress(epoch=1, fraction=0.5)  # `'epoch': 1.5`, 3 epochs in the queue file
    assert hf.eta_s(300.0, 3) == pytest.approx(300.0)  # 1.5 epochs in 300 s, 1.5 to go
    lightning = RunProgress(epoch=3, epochs=10, fraction=0.45)
    assert lightning.eta_s(345.0) == pytest.approx(100.0 * 6.55)
    assert RunProgress().eta_s(100.0, 5) is None  # nothing done: no pace, no ETA
    assert RunProgress(epoch=2).eta_s(100.0) is None  # no total anywhere


# --------------------------------------------------------------------------- fuzz


_ALPHABET = st.sampled_from([
    *"0123456789/ .:%|[]()'\"-=\r\t\x1b",
    "Epoch ", "epoch", "step ", "iter ", "Batch", "'epoch': ", "█", "━", "[===", "val",
    "1" * 13, "4300", "\u0663", "\n"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ALPHABET, max_size=120).map("".join) | st.text(max_size=300))
def test_fuzz_never_raises_and_stays_bounded(line: str) -> None:
    p = parse_progress(line)
    if p is None:
        return
    assert p.unit in ("epoch", "step")
    assert 0 <= p.done <= MAX_COUNT
    if p.total is not None:
        assert 1 <= p.total <= MAX_COUNT and p.done <= p.total
    if p.fraction is not None:
        assert 0.0 <= p.fraction <= 1.0
    run = RunProgress()
    advance(run, p)
    assert 0 <= run.epoch <= MAX_COUNT and 0 <= run.epochs <= MAX_COUNT


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(["9/", "Epoch ", "%|", "[1/", "step 1/", "\r", "\x1b["]),
       st.integers(min_value=1_000, max_value=200_000))
def test_fuzz_long_repetitive_lines(piece: str, size: int) -> None:
    line = piece * (size // len(piece))
    parse_progress(line)
    last_redrawn(line)


# --------------------------------------------------------------------------- the queue panel


def running_cell(profile: Profile, data: str, *, now: str, epochs: int = 10) -> HostTracker:
    """A tracker whose one cell `c` (`epochs` in the queue file) started at 10:00:00 and whose
    own log holds `data`."""
    tracker = HostTracker(instance(), profile, RULEBOOK)
    tracker.absorb(snapshot(
        queue_text=f"configs/c.yaml t {epochs}\n",
        marks=f"{ts('10:00:00')} [1/1] STARTING c (t, {epochs}ep)\n",
        chunks=(chunk(f"{LOGS}/c.log", data, reset=True),),
        remote_time=remote(now)))
    return tracker


def test_panel_shows_a_lightning_bar_still_being_redrawn(profile: Profile) -> None:
    # Epoch 32 ended, epoch 33 is being redrawn with \r and has printed no newline yet.
    lines = sample_lines("lightning.txt")
    data = "\r".join(lines[2:10]) + "\n" + lines[10] + "\r" + lines[10] + "\r" + "Epoch 33:   6%"
    tracker = running_cell(profile, data, now="10:33:00", epochs=40)
    prog = tracker.progress["c"]
    assert (prog.epoch, prog.epochs) == (33, 0)
    assert prog.fraction == pytest.approx(18 / 331)
    cell = tracker.queue_view().cells[0]
    assert cell.state is CellState.RUNNING
    assert (cell.epoch, cell.epochs) == (33, 40)  # Lightning prints no total: the queue file's
    assert cell.eta_s == pytest.approx(60.0 * 7)  # 33 epochs in 33 min, 7 to go
    assert prog.eta_s(33 * 60.0, 40) == pytest.approx(33 * 60.0 / (33 + 18 / 331) * (7 - 18 / 331))


def test_panel_shows_keras_epochs_and_an_eta(profile: Profile) -> None:
    lines = [ln.replace("/200", "/10") for ln in sample_lines("keras.txt")[:4]]
    tracker = running_cell(profile, "\n".join(lines) + "\n", now="10:04:00")
    cell = tracker.queue_view().cells[0]
    assert (cell.epoch, cell.epochs) == (2, 10)
    assert cell.eta_s == pytest.approx(120.0 * 8)  # 240 s for 2 epochs, 8 to go


def test_panel_shows_steps_when_only_steps_are_printed(profile: Profile) -> None:
    data = "\n".join(sample_lines("step_counters.txt")) + "\n"
    tracker = running_cell(profile, data, now="10:10:00")
    cell = tracker.queue_view().cells[0]
    assert (cell.epoch, cell.epochs) == (5427, 250000)
    assert cell.eta_s == pytest.approx(600.0 / 5427 * (250000 - 5427))


def test_panel_follows_hf_log_dicts_across_chunks(profile: Profile) -> None:
    lines = sample_lines("hf_trainer.txt")
    tracker = running_cell(profile, "\n".join(lines[:3]) + "\n", now="10:01:00")
    cell = tracker.queue_view().cells[0]
    assert (cell.epoch, cell.epochs) == (4, 203)  # steps, until an epoch is named
    tracker.absorb(snapshot(chunks=(LogChunk(f"{LOGS}/c.log", 7, 1, (
        "\n".join(lines[3:]) + "\n").encode()),), remote_time=remote("10:02:00")))
    prog = tracker.progress["c"]
    assert (prog.unit, prog.epoch, prog.epochs, prog.steps) == ("epoch", 0, 0, 203)
    assert prog.eta_s(120.0, 10) == pytest.approx(120.0 / 0.87 * 9.13)
    cell = tracker.queue_view().cells[0]
    assert (cell.epoch, cell.epochs) == (0, 10)  # the queue file's 10 epochs


@pytest.mark.parametrize("line", [
    "Training completed: best val_acc 0.9134 at epoch 5",  # the demo trainer's last line
    "Saved new best checkpoint: val_acc 0.91 at epoch 5",
    "Loading checkpoint from epoch 4", "resuming from epoch 3", "best epoch 3",
    "Early stopping at epoch 7",
])
def test_an_epoch_named_in_the_past_is_not_progress(line: str) -> None:
    """A line that refers to a past epoch (a best, a checkpoint, a resume point) must not move
    the panel back: the demo's finished cells read 5/6 after 6/6 from their summary line."""
    assert parse_progress(line) is None
    run = fold(["Epoch 6/6 | train_loss 0.1", line])
    assert (run.epoch, run.epochs) == (6, 6)


def test_the_harness_trainer_lines() -> None:
    """tests/runbook.py's tiny trainer (the e2e tests' cells) prints these shapes."""
    assert parse_progress("Epoch 2/5 | step 3/10 | loss=0.4123 | lr=1.0e-03") == \
        Progress("epoch", 2, 5, 0.3)
    assert parse_progress("Epoch 2/5 done | train_loss=0.4123 val_loss=0.4000 ") == \
        Progress("epoch", 2, 5)
    # A saved checkpoint names an epoch that is past, not the run's progress.
    assert parse_progress("saved best.pth (epoch 2, psnr=21.30)") is None
    assert parse_progress("[c1] task=t cfg=configs/c1.yaml epochs=5 ") is None
    run = fold(["Epoch 2/5 | step 3/10 | loss=0.4", "Epoch 2/5 done | train_loss=0.4",
                "saved best.pth (epoch 2, psnr=21.30)"])
    assert (run.epoch, run.epochs, run.unit) == (2, 5, "epoch")  # a bare epoch keeps the total
