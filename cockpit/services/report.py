"""Render `cockpit status` results as JSON documents or a terminal table.

The table's cells carry text from the boxes (nvidia-smi's messages, state details): each is a
plain `Text` made with `remote_text`, never a str, which Rich would parse as markup (a message
`[/x]` raised MarkupError) and whose escapes would reach the terminal."""

from __future__ import annotations

import dataclasses
import datetime as dt
from enum import Enum
from typing import Any

from cockpit.models.snapshot import NA, HostSnapshot, Reachability
from cockpit.models.summary import mean_util, pct, queue_state, worst_disk, worst_inodes
from cockpit.models.text import remote_text
from cockpit.services.fleet import InstanceStatus


def _iso(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, tz=dt.UTC).isoformat(timespec="seconds")


def to_jsonable(value: Any) -> Any:
    """Dataclasses to dicts; NA becomes `{"na": reason}` so a missing number is explicit."""
    if isinstance(value, NA):
        return {"na": value.reason}
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return len(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    return value


def _snapshot_doc(snap: HostSnapshot) -> dict[str, Any]:
    mounts = []
    for mount in snap.mounts:
        doc = to_jsonable(mount)
        doc["bytes_pct"] = to_jsonable(mount.bytes_pct)
        doc["inodes_pct"] = to_jsonable(mount.inodes_pct)
        mounts.append(doc)
    memory = to_jsonable(snap.memory)
    memory["pct"] = to_jsonable(snap.memory.pct)
    queue = to_jsonable(snap.queue)
    pids = snap.queue.process_pids
    queue["alive"] = None if isinstance(pids, NA) else bool(pids)
    return {
        "observed_at": _iso(snap.observed_at),
        "observed_at_epoch": snap.observed_at,
        "remote_time": to_jsonable(snap.remote_time),
        "hostname": snap.hostname,
        "probe_ms": to_jsonable(snap.probe_ms),
        "gpu": to_jsonable(snap.gpu),
        "mounts": mounts,
        "memory": memory,
        "tmux": to_jsonable(snap.tmux),
        "queue": queue,
        "logs_read": [
            {"path": c.path, "offset": c.offset, "bytes": len(c.data)} for c in snap.log_chunks
        ],
    }


def status_document(results: list[InstanceStatus], sweep_name: str) -> dict[str, Any]:
    """The `cockpit status --json` document."""
    instances = []
    for res in results:
        state = res.state
        doc: dict[str, Any] = {
            "name": res.instance.name,
            "profile": res.instance.profile,
            "host": res.instance.host,
            "reachable": res.snapshot is not None,
            "reachability": state.reachability.value,
            "since": _iso(state.since),
            "detail": state.detail,
            "host_key": to_jsonable(state.host_key),
            "bad_records": state.bad_records,
            "bad_reason": state.bad_reason,
            "watcher_crashes": state.crashes,
        }
        if res.snapshot is not None:
            doc.update(_snapshot_doc(res.snapshot))
        instances.append(doc)
    return {"sweep": sweep_name, "instances": instances}


def status_table(results: list[InstanceStatus]) -> Any:
    """A rich Table with one row per instance."""
    from rich.table import Table

    table = Table(title="cockpit status")
    for column in ("instance", "profile", "state", "GPUs", "util", "worst disk", "worst inodes",
                   "memory", "queue", "observed"):
        table.add_column(column)
    for res in results:
        snap = res.snapshot
        state = res.state.reachability.value
        if res.state.reachability is Reachability.NEEDS_APPROVAL and res.state.host_key:
            state += f" {res.state.host_key.fingerprint}"
        elif res.state.reachability is not Reachability.CONNECTED:
            state += f": {res.state.detail}"[:60]
        if res.state.bad_records:  # the reason is in --json; a count needs no escaping
            state += f" (bad record x{res.state.bad_records})"
        if snap is None:
            cells = [res.instance.name, res.instance.profile, state, *["-"] * 7]
        else:
            gpus = snap.gpu.gpus
            cells = [
                res.instance.name,
                res.instance.profile,
                state,
                str(len(gpus)) if gpus else snap.gpu.message or snap.gpu.status.value,
                pct(mean_util(snap)),
                pct(worst_disk(snap)),
                pct(worst_inodes(snap)),
                pct(snap.memory.pct),
                queue_state(snap),
                _iso(snap.observed_at),
            ]
        table.add_row(*(remote_text(cell) for cell in cells))
    return table
