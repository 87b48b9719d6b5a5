"""Pure one-line summaries of a snapshot, shared by `cockpit status` and the fleet table."""

from __future__ import annotations

import time

from cockpit.models.durations import format_duration
from cockpit.models.snapshot import NA, HostSnapshot, HostState, Reachability


def pct(value: float | NA) -> str:
    """`42%` or `n/a`."""
    return "n/a" if isinstance(value, NA) else f"{value:.0f}%"


def state_text(state: HostState, now: float | None = None, short: bool = False) -> str:
    """`connected`, `stale since 10:42 (3m)`, `needs approval`, ..."""
    now = time.time() if now is None else now
    reach = state.reachability
    if reach is Reachability.CONNECTED:
        return "connected"
    if reach is Reachability.STALE:
        clock = str(time.strftime("%H:%M", time.localtime(state.since)))
        return f"stale since {clock}" if short else (
            f"stale since {clock} ({format_duration(now - state.since)})")
    return str(reach.value).replace("-", " ")


def gpu_summary(snap: HostSnapshot) -> tuple[str, str]:
    """Aggregate GPU util and memory over all GPUs of a box."""
    gpus = snap.gpu.gpus
    if not gpus:
        return (snap.gpu.message or snap.gpu.status.value)[:24], ""
    mems = [g.mem_pct for g in gpus]
    known = [m for m in mems if not isinstance(m, NA)]
    util = f"{pct(mean_util(snap))} x{len(gpus)}"
    return util, pct(sum(known) / len(known)) if known else "n/a"


def queue_state(snap: HostSnapshot) -> str:
    """`running`, `no process`, or `n/a` when processes could not be listed."""
    pids = snap.queue.process_pids
    return "n/a" if isinstance(pids, NA) else ("running" if pids else "no process")


def mean_util(snap: HostSnapshot) -> float | NA:
    """Mean GPU utilisation over the GPUs that report one."""
    utils = [g.util_pct for g in snap.gpu.gpus if not isinstance(g.util_pct, NA)]
    return sum(utils) / len(utils) if utils else NA("no GPU reports utilisation")


def worst(values: list[float | NA]) -> float | NA:
    """The largest known value, or NA when none is known."""
    known = [v for v in values if not isinstance(v, NA)]
    return max(known) if known else NA("none known")


def log_age(snap: HostSnapshot) -> str:
    """Age of the newest log activity (queue log or per-run logs), by the remote clock."""
    mtimes = [s.mtime for s in snap.queue.run_logs if not isinstance(s.mtime, NA)]
    if snap.queue.queue_log is not None and not isinstance(snap.queue.queue_log.mtime, NA):
        mtimes.append(snap.queue.queue_log.mtime)
    if not mtimes or isinstance(snap.remote_time, NA):
        return "n/a"
    return format_duration(max(0.0, snap.remote_time - max(mtimes)))
