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


def worst_disk(snap: HostSnapshot) -> float | NA:
    """The fullest mount of a box, by bytes."""
    return worst([m.bytes_pct for m in snap.mounts])


def worst_inodes(snap: HostSnapshot) -> float | NA:
    """The fullest mount of a box, by inodes (full inodes with free bytes: U7)."""
    return worst([m.inodes_pct for m in snap.mounts])


def log_age(snap: HostSnapshot) -> str:
    """Age of the newest log activity (queue log or per-run logs), by the remote clock."""
    mtimes = [s.mtime for s in snap.queue.run_logs if not isinstance(s.mtime, NA)]
    if snap.queue.queue_log is not None and not isinstance(snap.queue.queue_log.mtime, NA):
        mtimes.append(snap.queue.queue_log.mtime)
    if not mtimes or isinstance(snap.remote_time, NA):
        return "n/a"
    return format_duration(max(0.0, snap.remote_time - max(mtimes)))
