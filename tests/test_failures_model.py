"""cockpit.models.failures: findings collapse per cell, exit codes join or name the cause."""

from __future__ import annotations

import pytest

from cockpit.models.classify import Finding, LogClassifier
from cockpit.models.failures import UNCLASSIFIED, FailureLog
from cockpit.services.config.rulebook import load_rulebook

RULEBOOK = load_rulebook(user=False)


def match(line: str) -> str | None:
    rule = RULEBOOK.match_line(line.encode())
    return None if rule is None else rule.id


def findings(text: str) -> list[Finding]:
    classifier = LogClassifier(RULEBOOK)
    return classifier.feed(text.encode()) + classifier.finish()


@pytest.mark.parametrize(("line", "rule_id", "klass"), [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "M2", "real-bug"),
    ("RuntimeError: CUDA error: out of memory", "U10", "real-bug"),
    ("OSError: [Errno 28] No space left on device", "U7", "disk-full"),
    ("RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 12 vs 0: "
     "iostream error", "U6", "disk-full"),
    ("Epoch 3/20 | step 40 | loss is nan", "O13", "real-bug"),
    ("step 12 loss: NaN", "O13", "real-bug"),
    ("loss=inf at step 7", "O13", "real-bug"),
    ("Epoch 3 | train_loss=nan | lr 1e-4", "O13", "real-bug"),
    ("step 200 val_loss: nan", "O13", "real-bug"),
    ("!! DURABLE SYNC FAILED for x — check 'df -i /root/autodl-fs'.", "U33", "ops"),
    ("!! DURABLE SYNC BLOCKED for det_baseline — best.pth is missing.", "U33", "ops"),
    ("Killed", "U9", "host-oom"),
    ("run_one.sh: line 12:  4242 Killed                  python train.py", "U9", "host-oom"),
    ("ERROR: DataLoader worker (pid 4242) is killed by signal: Killed.", "U9", "host-oom"),
    ("Out of memory: Killed process 4242 (python) total-vm:1234kB", "U9", "host-oom"),
    ("RuntimeError: DataLoader worker (pid 4321) is killed by signal: Bus error. It is possible "
     "that dataloader's workers are out of shared memory.", "DP15", "disk-full"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, GPU has fallen off the bus.", "U22", "hardware"),
    ("NVRM: Xid (PCI:0000:3b:00): 13, pid=2211, Graphics SM Warp Exception", "XID", "hardware"),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=4242.batch.", "SLURM4", "host-oom"),
    ("slurmstepd: error: *** JOB 4242 ON node07 CANCELLED AT 2026-11-20T03:12:44 DUE TO TIME "
     "LIMIT ***", "SLURM-TIMEOUT", "ops"),
    ("slurmstepd: error: *** JOB 4242 ON node07 CANCELLED AT 2026-11-20T03:12:44 ***",
     "SLURM-CANCELLED", "ops"),
])
def test_real_lines_get_their_rule_and_class(line: str, rule_id: str, klass: str) -> None:
    rule = RULEBOOK.match_line(line.encode())
    assert rule is not None, line
    assert (rule.id, rule.klass) == (rule_id, klass)
    assert rule.remediation


@pytest.mark.parametrize("line", [
    "Epoch 3/20 | step 40 | loss 0.4312",
    "loss: 0.4312 (best inf so far)",
    "val_error=0.12 train_error=0.2 error_rate=0.01 mean_abs_error=0.3",
    "Saved new best checkpoint",
    "nano",
    "loss is nanoscale",  # a word that starts with nan is not NaN
    "Processes Killed: 0",
    "killed 3 stale workers",
    "[10:00:09] synced baseline to durable storage (/root/autodl-fs/baseline)",
    "/usr/lib/python3/dist-packages/torch/cuda/memory.py:12: UserWarning: CUDA out of memory "
    "reported by a handled probe",
    "KeyError: 'label'",  # an exception line outside a traceback is just text
    "",
])
def test_ordinary_lines_and_handled_warnings_are_no_failure(line: str) -> None:
    assert match(line) is None
    assert findings(line + "\n") == []


def test_a_finding_and_its_repeats_collapse_with_a_count() -> None:
    log = FailureLog()
    first, again = findings("CUDA error: out of memory\nx\nCUDA error: out of memory\n")
    event = log.add("baseline", first, 100.0)
    assert log.add("baseline", again, 160.0) is event
    assert (event.count, event.first_at, event.last_at, event.line_no) == (2, 100.0, 160.0, 3)
    log.add("baseline", first, 50.0)  # a late repeat does not move last_at backwards
    assert (event.count, event.last_at) == (3, 160.0)
    log.add("det_baseline", first, 200.0)  # another cell is another event
    assert [(e.rule_id, e.cell, e.count) for e in log.events] == [
        ("U10", "baseline", 3), ("U10", "det_baseline", 1)]
    assert log.version == 4


@pytest.mark.parametrize(("rc", "runner_known", "rule_id", "klass"), [
    (1, False, "", UNCLASSIFIED), (137, False, "U9", "host-oom"), (-9, False, "", UNCLASSIFIED),
    (127, False, "AD2", "environment"), (130, False, "INT", "ops"),
    # A code below 126 means what the program chose (argparse exits 2, a script sys.exit(3)):
    # only the cockpit's own runner's codes are named by the code alone.
    (2, False, "", UNCLASSIFIED), (3, False, "", UNCLASSIFIED),
    (2, True, "U33", "ops"), (3, True, "U6-gate", "disk-full")])
def test_a_bare_non_zero_exit_is_named_by_its_code(rc: int, runner_known: bool, rule_id: str,
                                                   klass: str) -> None:
    log = FailureLog()
    log.cell_finished("det_baseline", rc, 42.0, RULEBOOK, runner_known)
    (event,) = log.events
    assert (event.klass, event.rule_id, event.cell, event.exit_code) == (
        klass, rule_id, "det_baseline", rc)
    assert event.message == f"det_baseline exited {rc}"
    if not rule_id:
        assert "det_baseline.log" in event.remediation


def test_exit_zero_is_nothing() -> None:
    log = FailureLog()
    log.cell_finished("baseline", 0, 1.0, RULEBOOK)
    assert (log.events, log.version) == ([], 0)


def test_the_log_cause_and_the_exit_code_are_one_event_in_either_order() -> None:
    (oom,) = findings("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    log = FailureLog()  # the cause first, then FINISHED exit=1
    log.add("a", oom, 10.0)
    log.cell_finished("a", 1, 11.0, RULEBOOK)
    (event,) = log.events
    assert (event.rule_id, event.exit_code) == ("M2", 1)
    late = FailureLog()  # FINISHED first (the run log was read a tick later)
    late.cell_finished("a", 1, 11.0, RULEBOOK)
    late.add("a", oom, 12.0)
    (event,) = late.events
    assert (event.rule_id, event.exit_code, event.count) == ("M2", 1, 1)


def test_exit_137_joins_a_killed_line_of_the_same_cell() -> None:
    log = FailureLog()
    log.add("baseline", findings("Killed\n")[0], 10.0)
    log.cell_finished("baseline", 137, 11.0, RULEBOOK)
    (event,) = log.events
    assert (event.rule_id, event.count, event.exit_code) == ("U9", 1, 137)


def test_matching_is_case_insensitive_over_rule_class_cell_and_message() -> None:
    log = FailureLog()
    log.add("baseline", findings("torch.OutOfMemoryError: CUDA out of memory\n")[0], 1.0)
    log.add("Det_Aug", findings("OSError: [Errno 28] No space left on device\n")[0], 2.0)
    log.cell_finished("aug_strong", 1, 3.0, RULEBOOK)
    assert [e.cell for e in log.matching("REAL-BUG")] == ["baseline"]
    assert [e.cell for e in log.matching("u7")] == ["Det_Aug"]
    assert [e.cell for e in log.matching("errno 28")] == ["Det_Aug"]
    assert [e.cell for e in log.matching("unclass")] == ["aug_strong"]
    assert log.matching("") == log.events
    assert log.matching("nothing like it") == []


def test_a_cell_is_blamed_on_its_cause_in_evidence_order() -> None:
    # The watchdog timeout arrives first, the peer's ECC error a tick later, and torchrun's
    # SIGKILL report last: the launcher's signal is the strongest evidence (issue 17).
    log = FailureLog()
    classifier = LogClassifier(RULEBOOK)
    ticks = [b"[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8)\n",
             b"RuntimeError: CUDA error: uncorrectable ECC error encountered\n",
             b"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
             b"local_rank: 3 (pid: 1) of binary: /usr/bin/python\n"]
    blamed = []
    for at, chunk in enumerate(ticks):
        for finding in classifier.feed(chunk):
            log.add("c1", finding, float(at))
        cause = log.cause("c1")
        blamed.append(cause.rule_id if cause else None)
    assert blamed == ["MN3", "U22", "U9"]
    assert log.cause("other") is None
