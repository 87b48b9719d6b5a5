"""Render `cockpit status` results as JSON documents or a terminal table.

The table's cells carry text from the boxes (nvidia-smi's messages, state details): each is a
plain `Text` made with `remote_text`, never a str, which Rich would parse as markup (a message
`[/x]` raised MarkupError) and whose escapes would reach the terminal."""

from __future__ import annotations

import dataclasses
import datetime as dt
from enum import Enum
from typing import Any

from cockpit.models.health import GpuProblem, gpu_problem
from cockpit.models.hostview import cell_name
from cockpit.models.progress import read_run_lines
from cockpit.models.queue import (
    LineSplitter,
    QueueLog,
    QueueView,
    RunProgress,
    build_view,
    parse_queue_file,
)
from cockpit.models.snapshot import NA, HostSnapshot, Reachability
from cockpit.models.summary import mean_util, pct, queue_state, worst_disk, worst_inodes
from cockpit.models.sweep import Instance
from cockpit.models.text import remote_text
from cockpit.services.transport.fleet import InstanceStatus


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


def queue_view_of(instance: Instance, snap: HostSnapshot) -> QueueView:
    """The queue's cells from one probe record: the queue file, the master log's marks (and
    its tail, when the record carries it) and the cells' own logs the record carries."""
    log = QueueLog()
    if snap.queue.queue_marks:
        log.feed(snap.queue.queue_marks.splitlines(), snap.utc_offset)
    progress: dict[str, RunProgress] = {}
    for chunk in snap.log_chunks:
        lines = LineSplitter().feed(chunk.data.decode(errors="replace") + "\n")
        if chunk.path == instance.queue_log:
            log.feed(lines, snap.utc_offset)
            continue
        read_run_lines(progress.setdefault(cell_name(chunk.path), RunProgress()), lines)
    pids = snap.queue.process_pids
    alive = None if isinstance(pids, NA) else bool(pids)
    now = snap.observed_at if isinstance(snap.remote_time, NA) else snap.remote_time
    return build_view(parse_queue_file(snap.queue.queue_text or ""), log, progress,
                      alive=alive, now=now)


def queue_document(instance: Instance, snap: HostSnapshot) -> dict[str, Any]:
    """k/N, each cell's state with the evidence it rests on, and (when nothing runs) the
    command that would resume it: the `queue_view` part of `status --json`."""
    from cockpit.services.queue.launch import resume_hint

    view = queue_view_of(instance, snap)
    doc: dict[str, Any] = {
        "finished": view.finished,
        "total": len(view.cells),
        "progress": f"{view.finished}/{len(view.cells)}" if view.cells else None,
        "summary": view.summary,
        "cells": [{"index": c.index, "name": c.name, "state": c.state.value,
                   "state_text": c.state_text, "exit_code": c.exit_code, "proven": c.proven,
                   "evidence": c.evidence, "epoch": c.epoch, "epochs": c.epochs}
                  for c in view.cells],
        "resume_from": view.resume_from,
        "unproven_before_resume": [c.name for c in view.unproven_before_resume],
        "resume_hint": None,
    }
    pids = snap.queue.process_pids
    if view.resume_from is not None and not isinstance(pids, NA) and not pids:
        command, note = resume_hint(instance, view.resume_from)
        doc["resume_hint"] = {"command": command, "note": note}
    return doc


def status_gpu_problem(res: InstanceStatus) -> GpuProblem | None:
    """The box's GPU failure as one probe record shows it (nvidia-smi or NVML failed, some
    GPUs did not answer, fewer than the sweep's `expect_gpu`): `status` exits 1 for it."""
    if res.snapshot is None:
        return None
    want = res.instance.expect_gpu
    return gpu_problem(res.snapshot.gpu, expected=None if want is None else (want.count or 1))


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
            doc["queue_view"] = queue_document(res.instance, res.snapshot)
            doc["gpu_problem"] = to_jsonable(status_gpu_problem(res))
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
            problem = status_gpu_problem(res)
            cells = [
                res.instance.name,
                res.instance.profile,
                state,
                problem.text if problem else (
                    str(len(gpus)) if gpus else snap.gpu.message or snap.gpu.status.value),
                pct(mean_util(snap)),
                pct(worst_disk(snap)),
                pct(worst_inodes(snap)),
                pct(snap.memory.pct),
                queue_state(snap),
                _iso(snap.observed_at),
            ]
        table.add_row(*(remote_text(cell) for cell in cells))
    return table
