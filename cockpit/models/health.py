"""Run-health judgements: what a box and its cells are doing, judged from evidence, not text.

A judgement names its evidence (process table, exit codes, mtimes, counters, clocks) and
the catalog id of its remediation. The rules of evidence (DESIGN.md, platform-facts §5.5):

- finished: no process and a FINISHED line with its exit code; failed when that code is
  not 0, blamed on the cell's classified failure when its log gave one;
- dead: STARTING without FINISHED and no queue process (U3);
- stalled: the queue process is alive but the newest log *and* the newest checkpoint are
  older than `stall_after`. A frozen log with an advancing checkpoint is block-buffered
  stdout (U43), which is alive, never stalled;
- a box that cannot be reached is stale: nothing is judged dead or stalled from silence.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cockpit.models.durations import format_duration, parse_duration
from cockpit.models.queue import CellState, CellView
from cockpit.models.snapshot import NA, GpuReading, GpuStatus, HostSnapshot, Reachability

if TYPE_CHECKING:
    from cockpit.models.hostview import HostTracker

PRESSURE_PCT = 90.0
IDLE_PCT = 5.0
IDLE_AFTER_S = 600.0
FAST_RATIO = 0.5
MIN_PEERS = 2
THERMAL_C = 83.0
THERMAL_CLOCK_RATIO = 0.7
ZOMBIE_MIB = 1024.0
"""GPU memory used with no live job above this is held by something: a zombie (U11)."""


@dataclass(frozen=True)
class Judgement:
    """One judgement about a box (`cell` None) or one of its cells."""

    kind: str
    text: str
    """Short, for the fleet row and the box title: `stalled 25m`, `disk 93% /data`."""
    detail: str = ""
    """The evidence and the one thing to do."""
    cell: str | None = None
    rule_id: str = ""
    alarm: bool = True
    """False for judgements that inform (finished, buffered log) rather than warn."""
    subject: str = ""
    """What it is about beyond the cell (`disk /root/autodl-tmp`), for alert identity."""


def judge(tracker: HostTracker, now: float) -> list[Judgement]:
    """Every judgement about one box as of its newest evidence."""
    state = tracker.state
    if state.reachability is not Reachability.CONNECTED:
        if tracker.snapshot is None and state.reachability is Reachability.CONNECTING:
            return []
        reach = state.reachability
        label = "stale" if reach in (Reachability.STALE, Reachability.CONNECTING) else reach.value
        why = f" ({state.detail})" if state.detail else ""
        stale = Judgement(
            "stale", f"{label} {format_duration(max(0.0, now - state.since))}",
            f"No fresh record from this box{why}. That says nothing about the run or its "
            "billing: nothing is judged dead from silence. The cockpit keeps trying by itself "
            "(r: reconnect now).")
        return [stale, *_bad_records(tracker)]
    snap = tracker.snapshot
    if snap is None:
        return _bad_records(tracker)
    out: list[Judgement] = _bad_records(tracker)
    out += _cells(tracker)
    out += _stall(tracker, snap)
    out += _disk(tracker, snap)
    out += _memory(tracker, snap)
    out += _idle(tracker, snap)
    out += _zombies(tracker, snap)
    out += _hardware(tracker, snap)
    out += _gpu_health(tracker, snap)
    return out


def _bad_records(tracker: HostTracker) -> list[Judgement]:
    """Records from this box that could not be parsed: counted, with the latest reason.

    Watching goes on (the rest of each record is used), but the box's numbers may be
    incomplete, so it is an alarm on the box, never a silent drop."""
    count = tracker.bad_records
    if not count:
        return []
    return [Judgement(
        "bad-record", f"bad record x{count}: {tracker.bad_reason}",
        "Part of what this box sent could not be read (a number too long, a section out of "
        "shape). The rest of each record is used and the box is still watched; what it "
        "sent is data, never obeyed.", subject="bad record")]


# -- cells ------------------------------------------------------------------------------------
def _cells(tracker: HostTracker) -> list[Judgement]:
    view = tracker.queue_view()
    out: list[Judgement] = []
    rates = {c.name: c.elapsed_s / c.epochs for c in view.cells
             if c.state is CellState.OK and c.elapsed_s and c.epochs > 0}
    for cell in view.cells:
        if cell.state is CellState.OK:
            out.append(_fast_finish(cell, rates) or Judgement(
                "finished", f"{cell.name} finished", cell=cell.name, alarm=False))
        elif cell.state is CellState.FAILED:
            out.append(_failed(tracker, cell))
        elif cell.state is CellState.INTERRUPTED and tracker.alive is False:
            out.append(Judgement(
                "dead", f"{cell.name} dead",
                f"STARTED, never FINISHED, and no queue process is left. Check cheapest first: "
                f"dmesg | grep -iE 'killed process|out of memory', free VRAM, cgroup memory.max, "
                f"uptime (a reboot). Then resume: bash run_queue.sh QUEUE {cell.index}.",
                cell.name, "U3"))
    return out


def _failed(tracker: HostTracker, cell: CellView) -> Judgement:
    cause = tracker.failures.cause(cell.name)  # evidence order, as everywhere a cause is named
    if cause is None or cause.klass == "unclassified":
        return Judgement("failed", f"{cell.name} failed exit={cell.exit_code}",
                         f"Read {cell.name}.log (the per-run log, not the master log).",
                         cell.name)
    retry = "a retry with the same config is allowed" if cause.retry else "do not retry blindly"
    return Judgement(
        "failed", f"{cell.name} failed: {cause.title}",
        f"exit={cell.exit_code}, {cause.klass} ({cause.rule_id}): {cause.remediation} "
        f"({retry})", cell.name, cause.rule_id)


def _fast_finish(cell: CellView, rates: dict[str, float]) -> Judgement | None:
    """Finished in under half the time its epochs should take at the peers' median pace."""
    peers = [rate for name, rate in rates.items() if name != cell.name]
    if len(peers) < MIN_PEERS or cell.elapsed_s is None:
        return None
    expected = statistics.median(peers) * cell.epochs
    if expected <= 0 or cell.elapsed_s >= FAST_RATIO * expected:
        return None
    return Judgement(
        "fast-finish", f"{cell.name} fast-finish",
        f"Finished in {format_duration(cell.elapsed_s)}, {cell.elapsed_s / expected:.0%} of the "
        f"{format_duration(expected)} its {cell.epochs} epochs take at the median pace of "
        f"{len(peers)} finished peers. Check for an early stop far below baseline, a skipped "
        f"dataset or a wrong epochs value (U32) before trusting its metrics.",
        cell.name, "U32")


# -- liveness -----------------------------------------------------------------------------------
def _stall(tracker: HostTracker, snap: HostSnapshot) -> list[Judgement]:
    if not tracker.alive or isinstance(snap.remote_time, NA):
        return []
    limit = parse_duration(tracker.instance.stall_after)
    logs = [s.mtime for s in (*snap.queue.run_logs, snap.queue.queue_log)
            if s is not None and not isinstance(s.mtime, NA)]
    ckpt = snap.queue.newest_checkpoint
    ckpt_mtime = None if ckpt is None or isinstance(ckpt.mtime, NA) else ckpt.mtime
    if not logs and ckpt_mtime is None:
        return []
    log_quiet = snap.remote_time - max(logs) if logs else None
    ckpt_quiet = snap.remote_time - ckpt_mtime if ckpt_mtime is not None else None
    quiet = min(q for q in (log_quiet, ckpt_quiet) if q is not None)
    if quiet >= limit:
        return [Judgement(
            "stalled", f"stalled {format_duration(quiet)}",
            f"The queue process is alive but no log or checkpoint was written for "
            f"{format_duration(quiet)} (limit {tracker.instance.stall_after}). Look before "
            f"killing: py-spy dump --pid PID, nvidia-smi; a multi-GPU job may be waiting on a "
            f"crashed rank (D20) or an NCCL hang (MN3).", rule_id="U43")]
    if log_quiet is not None and log_quiet >= limit and ckpt_quiet is not None:
        return [Judgement(
            "buffered-log", "log quiet, checkpoints advancing",
            "The log has not moved but checkpoints still advance: stdout is block-buffered "
            "(U43), the run is alive. Use python -u or PYTHONUNBUFFERED=1 next time.",
            rule_id="U43", alarm=False)]
    return []


# -- resources ----------------------------------------------------------------------------------
def _disk(tracker: HostTracker, snap: HostSnapshot) -> list[Judgement]:
    out = []
    for mount in snap.mounts:
        if all(isinstance(p, NA) or p < PRESSURE_PCT for p in (mount.bytes_pct, mount.inodes_pct)):
            continue  # the trend (a least-squares fit per series) only matters under pressure
        trend = tracker.mount_trend(mount)
        for label, pct, full_s in (("disk", mount.bytes_pct, trend.bytes_full_s),
                                   ("inodes", mount.inodes_pct, trend.inodes_full_s)):
            if isinstance(pct, NA) or pct < PRESSURE_PCT:
                continue
            when = f", full in {format_duration(full_s)}" if full_s is not None else ""
            other = mount.bytes_pct if label == "inodes" else None
            note = (f" while bytes show only {other:.0f}%: inodes run out first"
                    if isinstance(other, float) and other < PRESSURE_PCT else "")
            out.append(Judgement(
                "disk-pressure", f"{label} {pct:.0f}% {mount.path}{when}",
                f"{label} at {pct:.0f}% on {mount.path}{note}. Stop new writers, prune proven "
                f"scratch, keep best; report the shortfall rather than shrinking the run.",
                rule_id="U7", subject=f"{label} {mount.path}"))
    return out


def _memory(tracker: HostTracker, snap: HostSnapshot) -> list[Judgement]:
    out = []
    pct = snap.memory.pct
    if not isinstance(pct, NA) and pct >= PRESSURE_PCT:
        out.append(Judgement(
            "memory-pressure", f"memory {pct:.0f}%",
            f"The cgroup uses {pct:.0f}% of memory.max: the next DataLoader worker may be "
            f"OOM-killed (U9). Size num_workers against memory.max, not the CPU count.",
            rule_id="U9"))
    kills = snap.memory.oom_kills
    if not isinstance(kills, NA) and tracker.oom_kills_first is not None \
            and kills > tracker.oom_kills_first:
        out.append(Judgement(
            "memory-pressure", f"oom_kill +{kills - tracker.oom_kills_first}",
            f"The cgroup's oom_kill counter rose from {tracker.oom_kills_first} to {kills} in "
            f"this session: something was killed for host RAM (U9).", rule_id="U9"))
    return out


def _idle(tracker: HostTracker, snap: HostSnapshot) -> list[Judgement]:
    since = tracker.idle_since
    if since is None or snap.observed_at - since < IDLE_AFTER_S:
        return []
    idle = snap.observed_at - since
    price = tracker.instance.price_per_hour
    cost = f" (about {price * idle / 3600:.2f} per the sweep's price)" if price else ""
    return [Judgement(
        "idle-burn", f"idle burn {format_duration(idle)}",
        f"Every GPU has been under {IDLE_PCT:.0f}% for {format_duration(idle)} while the box "
        f"bills{cost}. Start the next cell, or stop the meter once results are safe.")]


def _zombies(tracker: HostTracker, snap: HostSnapshot) -> list[Judgement]:
    """GPU memory held by processes that belong to no live job (U11)."""
    out = []
    queue = snap.queue.process_pids
    if isinstance(queue, NA):
        return []
    parents = tracker.parents
    for gpu in snap.gpu.gpus:
        if not queue and gpu.processes:
            pids = ", ".join(str(p.pid) for p in gpu.processes)
            out.append(Judgement(
                "zombie-vram", f"zombie VRAM gpu{gpu.index}",
                f"No queue process is alive, yet pid {pids} holds memory on gpu{gpu.index}. If "
                f"it is a leftover of a crashed run, it blocks the next one: check with "
                f"fuser -v /dev/nvidia* and kill only what is yours.", rule_id="U11"))
        elif not queue and not gpu.processes and not isinstance(gpu.mem_used_mib, NA) \
                and gpu.mem_used_mib >= ZOMBIE_MIB:
            out.append(Judgement(
                "zombie-vram", f"zombie VRAM gpu{gpu.index}",
                f"No job runs, yet gpu{gpu.index} holds {gpu.mem_used_mib:.0f} MiB with no "
                f"process nvidia-smi can see: an orphaned CUDA context (U11). fuser -v "
                f"/dev/nvidia*, or restart the container.", rule_id="U11"))
        elif queue and parents:
            strays = [p.pid for p in gpu.processes
                      if p.pid in parents and not _descends(p.pid, set(queue), parents)]
            if strays:
                out.append(Judgement(
                    "zombie-vram", f"stray GPU process gpu{gpu.index}",
                    f"pid {', '.join(map(str, strays))} holds memory on gpu{gpu.index} but is "
                    f"not part of the running queue: a leftover of an earlier run steals VRAM "
                    f"(U11). Check it before the next cell OOMs.", rule_id="U11"))
    return out


def _descends(pid: int, ancestors: set[int], parents: dict[int, int]) -> bool:
    seen = 0
    while pid > 1 and seen < 64:
        if pid in ancestors:
            return True
        pid = parents.get(pid, 0)
        seen += 1
    return pid in ancestors


def _hardware(tracker: HostTracker, snap: HostSnapshot) -> list[Judgement]:
    out = []
    for event in tracker.failures.events:
        if event.klass == "hardware":
            out.append(Judgement("hardware", f"hardware: {event.title}",
                                 f"{event.message} — {event.remediation}", event.cell or None,
                                 event.rule_id))
    for line in tracker.kernel_findings:
        out.append(Judgement("hardware", f"hardware: {line.rule.spec.title}",
                             f"kernel log: {line.excerpt} — {line.rule.remediation}",
                             rule_id=line.rule.id))
    for gpu in snap.gpu.gpus:
        temp, clock, top = gpu.temp_c, gpu.sm_clock_mhz, gpu.sm_clock_max_mhz
        if isinstance(temp, NA) or isinstance(clock, NA) or isinstance(top, NA) or top <= 0:
            continue
        if temp >= THERMAL_C and clock < THERMAL_CLOCK_RATIO * top:
            out.append(Judgement(
                "thermal", f"throttling gpu{gpu.index}",
                f"gpu{gpu.index} runs its SM clock at {clock:.0f}/{top:.0f} MHz at {temp:.0f} C: "
                f"thermal or power throttling costs 25-40% speed (U23). Re-rent if it persists.",
                rule_id="U23"))
    return out


# -- GPU health -----------------------------------------------------------------------------
GPU_TEXT_CHARS = 160
"""Characters of nvidia-smi's words in a judgement's short text (the fleet row, the alert
title); the box's GPU panel and the judgement's detail carry the whole message."""

_DRIVER_ACTION = (
    "nvidia-smi cannot reach the NVIDIA driver: it is not loaded, or no longer matches the "
    "library after a driver or kernel update without a reboot. Nothing on this box can use a "
    "GPU now. Check dmesg | grep -iE 'NVRM|Xid', save what is durable, then reboot or re-rent.")
_LOST_ACTION = (
    "NVML cannot open this GPU: it fell off the bus or its handle is gone (Xid 79, U22), a "
    "hardware fault. A run on it has failed or hangs. Pull what is durable, then re-rent a "
    "different box; a reboot may bring the GPU back only for a while.")
_NO_DEVICES_ACTION = (
    "The driver answers but sees no GPU. A stopped box that came back with zero GPUs (RunPod "
    "RP1), a container started without its GPUs, or a GPU that fell off the bus: restart it "
    "with GPUs or re-rent; it bills meanwhile.")


@dataclass(frozen=True)
class GpuProblem:
    """Why this box's GPUs cannot all be read: an alert of its own (kind `gpu-failed`)."""

    kind: str
    """`failed` (nvidia-smi or NVML failed), `no-devices`, `partial` (some GPUs answered,
    nvidia-smi reported the others) or `lost` (a GPU seen before is gone)."""
    subject: str
    """Identifies the episode: the same problem on the next record is the same alert."""
    text: str
    """Short: `GPU failed: NVIDIA-SMI has failed ...`, `GPU 7/8 answered: Unable to ...`."""
    detail: str
    """nvidia-smi's full words and the one thing to do."""


def _action(words: str) -> str:
    if "NVIDIA-SMI has failed" in words or "NVML" in words:
        return _DRIVER_ACTION
    return _LOST_ACTION


def gpu_problem(reading: GpuReading, *, expected: int | None = None,
                seen: Collection[int] = ()) -> GpuProblem | None:
    """What is wrong with a box's GPUs in one reading, or None when nothing is.

    `expected`: GPUs the sweep says the box has (`expect_gpu`); `seen`: GPU indices read
    earlier this session. A failed nvidia-smi or NVML call is always a problem (nvidia-smi is
    there but cannot answer); `No devices were found` only where GPUs are expected or were
    seen (a box rented without GPUs says it too); a GPU seen before and missing now is lost.
    """
    if reading.status is GpuStatus.ABSENT:
        return None
    if not reading.gpus:
        if reading.no_devices:
            want = max(expected or 0, len(seen))
            if not want:
                return None
            return GpuProblem(
                "no-devices", "no devices", f"no GPUs: No devices were found ({want} expected)",
                f"nvidia-smi says: No devices were found, where {want} GPU(s) were "
                f"{'seen' if seen else 'expected'}. {_NO_DEVICES_ACTION}")
        if reading.status is GpuStatus.FAILED:
            words = reading.message or "nvidia-smi failed"
            return GpuProblem("failed", "failed", f"GPU failed: {words[:GPU_TEXT_CHARS]}",
                              f"nvidia-smi says: {words} — {_action(words)}")
        return None
    now = {gpu.index for gpu in reading.gpus}
    gone = sorted(index for index in seen if index not in now)
    want = max(reading.expected or 0, len(now) + len(gone), expected or 0)
    if not (reading.partial or gone or len(now) < want):
        return None
    said = "; ".join(reading.errors) or reading.message
    if gone:
        names = ", ".join(f"gpu{index}" for index in gone)
        text = f"GPU lost: {names} ({len(now)}/{want} answered)"
        subject = "lost " + ",".join(map(str, gone))
    else:
        text = f"GPU {len(now)}/{want} answered"
        subject = f"partial {len(now)}/{want}"
    if said:
        text += f": {said[:GPU_TEXT_CHARS]}"
    why = f"nvidia-smi says: {said} — " if said else ""
    return GpuProblem("lost" if gone else "partial", subject, text,
                      f"{len(now)} of {want} GPUs answered; the readings of those are kept. "
                      f"{why}{_action(said)}")


def _gpu_health(tracker: HostTracker, snap: HostSnapshot) -> list[Judgement]:
    want = tracker.instance.expect_gpu
    expected = None if want is None else (want.count or 1)
    problem = gpu_problem(snap.gpu, expected=expected, seen=tracker.gpu_util.keys())
    if problem is None:
        return []
    rule = "U22" if _LOST_ACTION in problem.detail else ""
    return [Judgement("gpu-failed", problem.text, problem.detail, rule_id=rule,
                      subject=problem.subject)]
