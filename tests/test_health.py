"""cockpit.models.health: run-health judgements from evidence (processes, exit codes, mtimes,
counters, clocks), never from silence."""

from __future__ import annotations

import dataclasses

import pytest

from cockpit.models.health import IDLE_AFTER_S, Judgement
from cockpit.models.hostview import HostTracker
from cockpit.models.profile import Profile
from cockpit.models.snapshot import NA, Gpu, GpuProcess, HostSnapshot, HostState, Reachability
from cockpit.services.config.profiles import load_named
from tests.test_hostview import (
    MASTER,
    RULEBOOK,
    chunk,
    gpu,
    instance,
    remote,
    snapshot,
    ts,
)


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_named("autodl")


QUEUE = "a.yaml t 10\nb.yaml t 10\nc.yaml t 10\nd.yaml t 10\n"


def marks(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def kinds(tracker: HostTracker, now: float = 0.0) -> dict[str, list[Judgement]]:
    out: dict[str, list[Judgement]] = {}
    for judgement in tracker.judgements(now):
        out.setdefault(judgement.kind, []).append(judgement)
    return out


def finished_queue(fast_minutes: int) -> str:
    """a, b, c: 100 min each for 10 epochs; d: `fast_minutes` for 10 epochs, exit 0."""
    return marks(
        f"{ts('00:00:00')} [1/4] STARTING a (t, 10ep)", f"{ts('01:40:00')} [1/4] FINISHED a (exit=0)",
        f"{ts('01:40:00')} [2/4] STARTING b (t, 10ep)", f"{ts('03:20:00')} [2/4] FINISHED b (exit=0)",
        f"{ts('03:20:00')} [3/4] STARTING c (t, 10ep)", f"{ts('05:00:00')} [3/4] FINISHED c (exit=0)",
        f"{ts('05:00:00')} [4/4] STARTING d (t, 10ep)",
        f"{ts(f'05:{fast_minutes:02d}:00')} [4/4] FINISHED d (exit=0)")


def test_a_cell_finishing_at_30_percent_of_the_peer_median_is_a_fast_finish(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(snapshot(queue_text=QUEUE, marks=finished_queue(30), pids=(),
                            remote_time=remote("06:00:00")))
    found = kinds(tracker)
    (fast,) = found["fast-finish"]
    assert (fast.cell, fast.rule_id, fast.alarm) == ("d", "U32", True)
    assert "30% of the 1h40m" in fast.detail and "3 finished peers" in fast.detail
    assert sorted(j.cell or "" for j in found["finished"]) == ["a", "b", "c"]
    assert not any(j.alarm for j in found["finished"])


def test_a_cell_at_60_percent_is_just_finished(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(snapshot(queue_text=QUEUE, marks=finished_queue(59), pids=(),
                            remote_time=remote("06:00:00")))
    found = kinds(tracker)
    assert "fast-finish" not in found
    assert sorted(j.cell or "" for j in found["finished"]) == ["a", "b", "c", "d"]


def test_a_started_cell_without_a_process_is_dead_and_an_unreachable_box_is_stale(
        profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    started = marks(f"{ts('00:00:00')} [1/4] STARTING a (t, 10ep)")
    tracker.absorb(snapshot(queue_text=QUEUE, marks=started, pids=(4242,), remote_time=remote("00:10:00")))
    assert "dead" not in kinds(tracker), "alive: running"
    tracker.absorb(snapshot(pids=(), remote_time=remote("00:12:00")))
    (dead,) = kinds(tracker)["dead"]
    assert (dead.cell, dead.rule_id) == ("a", "U3")
    assert "bash run_queue.sh QUEUE 1" in dead.detail
    # The link drops: nothing about the run can be judged from silence.
    tracker.absorb_state(HostState("a1", Reachability.STALE, 1000.0))
    found = tracker.judgements(now=1300.0)
    assert [(j.kind, j.text) for j in found] == [("stale", "stale 5m")]
    assert "nothing is judged dead" in found[0].detail
    # A host that is only slow says so: its connection is up, the record is late.
    late = "no record for 20s; the connection is up and the probe still runs"
    tracker.absorb_state(HostState("a1", Reachability.STALE, 1000.0, late))
    (slow,) = tracker.judgements(now=1030.0)
    assert slow.text == "stale 30s" and f"({late})" in slow.detail


def test_process_check_unavailable_is_not_dead(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    started = marks(f"{ts('00:00:00')} [1/4] STARTING a (t, 10ep)")
    tracker.absorb(snapshot(queue_text=QUEUE, marks=started, pids=NA("no ps"),
                            remote_time=remote("00:10:00")))
    assert "dead" not in kinds(tracker)


def test_a_failed_cell_is_blamed_on_its_classified_cause(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    log = marks(f"{ts('00:00:00')} [1/4] STARTING a (t, 10ep)",
                f"{ts('00:05:00')} [1/4] FINISHED a (exit=1)",
                f"{ts('00:05:00')} [2/4] STARTING b (t, 10ep)",
                f"{ts('00:06:00')} [2/4] FINISHED b (exit=1)")
    disk_full = chunk("/q/logs/a.log", "OSError: [Errno 28] No space left on device\n")
    tracker.absorb(snapshot(queue_text=QUEUE, marks=log, pids=(1,), remote_time=remote("00:07:00"),
                            chunks=(disk_full,)))
    failed = {j.cell: j for j in kinds(tracker)["failed"]}
    assert failed["a"].text == "a failed: no space left on device"
    assert failed["a"].rule_id == "U7" and "retry with the same config is allowed" in failed["a"].detail
    assert failed["b"].text == "b failed exit=1" and "b.log" in failed["b"].detail


def test_idle_burn_after_ten_minutes_under_five_percent(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}, price_per_hour=2.0), profile, RULEBOOK)
    tracker.absorb(snapshot(observed_at=0.0, gpus=(gpu(3.0),)))
    tracker.absorb(snapshot(observed_at=IDLE_AFTER_S - 1, gpus=(gpu(4.0),)))
    assert "idle-burn" not in kinds(tracker)
    tracker.absorb(snapshot(observed_at=IDLE_AFTER_S + 60, gpus=(gpu(0.0),)))
    (idle,) = kinds(tracker)["idle-burn"]
    assert idle.text == "idle burn 11m" and "about 0.37" in idle.detail
    tracker.absorb(snapshot(observed_at=IDLE_AFTER_S + 62, gpus=(gpu(40.0),)))  # busy again
    tracker.absorb(snapshot(observed_at=IDLE_AFTER_S + 64, gpus=(gpu(1.0),)))
    assert "idle-burn" not in kinds(tracker)
    tracker.absorb(snapshot(observed_at=IDLE_AFTER_S + 70, gpus=(gpu(NA("[N/A]")),)))
    assert tracker.idle_since is None, "an unknown reading is not idleness"


def with_processes(snap: HostSnapshot, pids: tuple[int, ...], used: float = 9000.0,
                   parents: dict[int, int] | None = None) -> HostSnapshot:
    procs = tuple(GpuProcess("GPU-1", pid, 4000.0) for pid in pids)
    card = dataclasses.replace(gpu(90.0, used), processes=procs)
    return dataclasses.replace(snap, gpu=dataclasses.replace(snap.gpu, gpus=(card,)), parents=parents)


def test_zombie_vram_is_memory_held_outside_any_live_job(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    # The queue (pid 10) runs python (pid 12, a child of 11): its own GPU process is fine.
    tree = {10: 1, 11: 10, 12: 11, 99: 1}
    tracker.absorb(with_processes(snapshot(pids=(10,)), (12,), parents=tree))
    assert "zombie-vram" not in kinds(tracker)
    # A leftover of an earlier run (pid 99, not under the queue) holds memory too.
    tracker.absorb(with_processes(snapshot(pids=(10,)), (12, 99), parents=tree))
    (stray,) = kinds(tracker)["zombie-vram"]
    assert stray.rule_id == "U11" and "pid 99 holds" in stray.detail
    # No queue at all, and a process still holds memory.
    tracker.absorb(with_processes(snapshot(pids=()), (99,), parents=tree))
    assert "No queue process is alive" in kinds(tracker)["zombie-vram"][0].detail
    # No queue, no visible process, 9000 MiB used: an orphaned context.
    tracker.absorb(with_processes(snapshot(pids=()), ()))
    assert "orphaned CUDA context" in kinds(tracker)["zombie-vram"][0].detail
    # Little memory used: nothing to report; an unknown process table: no judgement.
    tracker.absorb(with_processes(snapshot(pids=()), (), used=300.0))
    assert "zombie-vram" not in kinds(tracker)
    tracker.absorb(with_processes(snapshot(pids=NA("no ps")), (99,)))
    assert "zombie-vram" not in kinds(tracker)


def hot(temp: float, clock: float) -> Gpu:
    return dataclasses.replace(gpu(95.0), temp_c=temp, sm_clock_mhz=clock, sm_clock_max_mhz=1980.0)


def test_thermal_throttling_needs_heat_and_a_low_clock(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(snapshot(gpus=(hot(86.0, 1100.0),)))
    (thermal,) = kinds(tracker)["thermal"]
    assert (thermal.text, thermal.rule_id) == ("throttling gpu0", "U23")
    tracker.absorb(snapshot(gpus=(hot(80.0, 1100.0),)))  # cool: a low clock is just idle
    assert "thermal" not in kinds(tracker)
    tracker.absorb(snapshot(gpus=(hot(86.0, 1900.0),)))  # hot but at speed
    assert "thermal" not in kinds(tracker)


def test_hardware_from_logs_and_the_kernel_log(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    kernel = ("[ 9.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, GPU has fallen off the bus.",
              "[ 9.2] NVRM: Xid (PCI:0000:3b:00): 13, pid=2211, Graphics Exception")
    tracker.absorb(dataclasses.replace(snapshot(), kernel_lines=kernel))
    tracker.absorb(dataclasses.replace(snapshot(), kernel_lines=kernel))  # seen again: once
    # Every Xid in the kernel log is a hardware finding (issue 17: XID is hardware; 13/31/43
    # repeated under code that runs elsewhere means a faulty device), each reported once.
    hardware = kinds(tracker)["hardware"]
    assert len(hardware) == 2, hardware
    assert any(hw.rule_id == "U22" and "fallen off the bus" in hw.detail for hw in hardware)
    assert any(hw.rule_id == "XID" and "Xid (PCI:0000:3b:00): 13" in hw.detail for hw in hardware)
    unreadable = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    unreadable.absorb(dataclasses.replace(snapshot(), kernel_lines=NA("kernel log not readable")))
    assert "hardware" not in kinds(unreadable)
    from_log = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    from_log.absorb(snapshot(chunks=(chunk("/q/logs/a.log", "RuntimeError: CUDA error: "
                                           "uncorrectable ECC error encountered\n"),)))
    (hw,) = kinds(from_log)["hardware"]
    assert (hw.cell, hw.rule_id) == ("a", "U22")


def test_only_a_rising_oom_kill_count_is_news(profile: Profile) -> None:
    from cockpit.models.snapshot import Memory

    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(snapshot(memory=Memory("cgroup-v2", 10, 100, 4)))
    assert "memory-pressure" not in kinds(tracker)
    tracker.absorb(snapshot(memory=Memory("cgroup-v2", 10, 100, 6)))
    (rise,) = kinds(tracker)["memory-pressure"]
    assert rise.text == "oom_kill +2" and rise.rule_id == "U9"


def test_master_log_crashes_are_not_scanned(profile: Profile) -> None:
    """The tee'd master log repeats old cells' crashes (platform-facts §5.3): not evidence."""
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(snapshot(chunks=(chunk(MASTER, "torch.OutOfMemoryError: CUDA out of memory.\nKilled\n"),)))
    assert tracker.failures.events == []
