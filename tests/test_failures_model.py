"""cockpit.models.failures: line signatures, de-duplicated events and exit-code events."""

from __future__ import annotations

import pytest

from cockpit.models.failures import EXIT_REMEDIATION, RULES, FailureLog, classify_line


@pytest.mark.parametrize(("line", "rule_id", "klass"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "U10", "cuda-oom"),
    ("RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.65 GiB total)",
     "U10", "cuda-oom"),
    ("OSError: [Errno 28] No space left on device", "U7", "disk-full"),
    ("RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 12 vs 0: "
     "iostream error", "U7", "disk-full"),
    ("Epoch 3/20 | step 40 | loss is nan", "O13", "nan-loss"),
    ("step 12 loss: NaN", "O13", "nan-loss"),
    ("loss=inf at step 7", "O13", "nan-loss"),
    ("!! DURABLE SYNC FAILED for x — check 'df -i /root/autodl-fs'. The data-disk copy is "
     "source-of-truth.", "S1", "sync-failed"),
    ("!! DURABLE SYNC BLOCKED for det_baseline — best.pth or best_metrics.json is missing.",
     "S1", "sync-failed"),
    ("Killed", "U9", "host-oom"),
    ("ERROR: DataLoader worker (pid 4242) is killed by signal: Killed.", "U9", "host-oom"),
    ("Out of memory: Killed process 4242 (python) total-vm:1234kB", "U9", "host-oom"),
])
def test_classify_line_matches_real_lines(line: str, rule_id: str, klass: str) -> None:
    rule = classify_line(line)
    assert rule is not None
    assert (rule.id, rule.klass) == (rule_id, klass)
    assert rule.remediation


@pytest.mark.parametrize("line", [
    "Epoch 3/20 | step 40 | loss 0.4312",
    "loss: 0.4312 (best inf so far)",
    "Saved new best checkpoint",
    "nano",
    "loss is nanoscale",  # a word that starts with nan is not NaN
    "Processes Killed: 0",
    "killed 3 stale workers",
    "[10:00:09] synced baseline to durable storage (/root/autodl-fs/baseline)",
    "",
])
def test_classify_line_leaves_ordinary_lines_alone(line: str) -> None:
    assert classify_line(line) is None


def test_classify_line_first_rule_wins() -> None:
    # A line with two signatures gets the first rule in RULES' order (cuda-oom before disk-full).
    rule = classify_line("CUDA out of memory while writing: No space left on device")
    assert rule is not None and rule.klass == "cuda-oom"
    assert [r.klass for r in RULES].index("cuda-oom") < [r.klass for r in RULES].index("disk-full")


def test_rule_ids_and_classes_are_unique() -> None:
    assert len({r.id for r in RULES}) == len(RULES)
    assert len({r.klass for r in RULES}) == len(RULES)


def test_add_deduplicates_by_class_and_cell_and_counts_repeats() -> None:
    log = FailureLog()
    first = log.add("cuda-oom", "baseline", 100.0, "first message", "fix it", "U10")
    assert log.version == 1
    again = log.add("cuda-oom", "baseline", 160.0, "second message", "fix it", "U10")
    assert again is first
    assert (first.count, first.first_at, first.last_at) == (2, 100.0, 160.0)
    assert first.message == "second message"
    assert log.version == 2
    # An older repeat (arrived late) does not move last_at backwards.
    log.add("cuda-oom", "baseline", 50.0, "late", "fix it", "U10")
    assert (first.count, first.first_at, first.last_at) == (3, 100.0, 160.0)
    # Another cell, or another class, is another event.
    log.add("cuda-oom", "det_baseline", 200.0, "m", "r", "U10")
    log.add("disk-full", "baseline", 210.0, "m", "r", "U7")
    assert [(e.klass, e.cell, e.count) for e in log.events] == [
        ("cuda-oom", "baseline", 3), ("cuda-oom", "det_baseline", 1), ("disk-full", "baseline", 1)]
    assert log.version == 5


def test_scan_classifies_each_line_and_trims_the_message() -> None:
    log = FailureLog()
    long_tail = "x" * 500
    log.scan("baseline", [
        "Epoch 1/6 | step 10 | loss 0.9",
        "  torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB " + long_tail,
        "Saved new best checkpoint",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB",
        "OSError: [Errno 28] No space left on device",
    ], 1000.0)
    oom, disk = log.events
    assert (oom.klass, oom.cell, oom.count, oom.rule_id) == ("cuda-oom", "baseline", 2, "U10")
    assert oom.message == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB"
    assert (disk.klass, disk.rule_id) == ("disk-full", "U7")
    assert log.version == 3
    log2 = FailureLog()
    log2.scan("c", ["  torch.OutOfMemoryError: " + long_tail], 0.0)
    assert len(log2.events[0].message) == 200
    assert log2.events[0].message.startswith("torch.OutOfMemoryError")


def test_scan_of_clean_lines_changes_nothing() -> None:
    log = FailureLog()
    log.scan("baseline", ["Epoch 1/6 | loss 0.4312", "Training completed"], 0.0)
    assert log.events == []
    assert log.version == 0


@pytest.mark.parametrize(("rc", "klass"), [(1, "cell-failed"), (137, "host-oom"), (2, "sync-failed"),
                                           (-9, "cell-failed"), (255, "cell-failed")])
def test_cell_finished_non_zero_exit_is_an_event(rc: int, klass: str) -> None:
    log = FailureLog()
    log.cell_finished("det_baseline", rc, 42.0)
    (event,) = log.events
    assert (event.klass, event.cell, event.first_at, event.last_at) == (klass, "det_baseline", 42.0, 42.0)
    assert event.message == f"det_baseline exited {rc}"
    assert event.rule_id == ""
    if rc in EXIT_REMEDIATION:
        assert event.remediation == EXIT_REMEDIATION[rc][1]
    else:
        assert "det_baseline.log" in event.remediation


def test_cell_finished_exit_zero_is_nothing() -> None:
    log = FailureLog()
    log.cell_finished("baseline", 0, 1.0)
    assert log.events == []
    assert log.version == 0


def test_exit_137_joins_a_killed_line_of_the_same_cell() -> None:
    log = FailureLog()
    log.scan("baseline", ["Killed"], 10.0)
    log.cell_finished("baseline", 137, 11.0)
    (event,) = log.events
    assert (event.klass, event.count, event.last_at) == ("host-oom", 2, 11.0)


def test_matching_is_case_insensitive_over_class_cell_and_message() -> None:
    log = FailureLog()
    log.add("cuda-oom", "baseline", 1.0, "torch.OutOfMemoryError: CUDA out of memory", "r")
    log.add("disk-full", "Det_Aug", 2.0, "OSError: [Errno 28] No space left on device", "r")
    log.add("cell-failed", "aug_strong", 3.0, "aug_strong exited 1", "r")
    assert [e.cell for e in log.matching("CUDA-OOM")] == ["baseline"]
    assert [e.cell for e in log.matching("det_aug")] == ["Det_Aug"]
    assert [e.cell for e in log.matching("errno 28")] == ["Det_Aug"]
    assert [e.cell for e in log.matching("FAIL")] == ["aug_strong"]
    assert [e.cell for e in log.matching("a")] == ["baseline", "Det_Aug", "aug_strong"]
    assert log.matching("") == log.events
    assert log.matching("nothing like it") == []


@pytest.mark.parametrize("line", [
    "Epoch 3 | train_loss=nan | lr 1e-4",
    "step 200 val_loss: nan",
    "run_one.sh: line 12:  4242 Killed                  python train.py",
])
def test_common_nan_and_bash_kill_spellings_are_classified(line: str) -> None:
    rule = classify_line(line)
    assert rule is not None, line
    assert rule.klass == ("host-oom" if "Killed" in line else "nan-loss")
