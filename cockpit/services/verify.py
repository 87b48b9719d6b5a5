"""Pull and verify one instance: roster → remote manifest → pull → hash and load → N/N.

Shared by `cockpit verify` and the TUI's verify screen. Loading runs in a process pool
(spawned, not forked: the parent may hold an event loop and SSH connections), so torch is
never imported in the TUI process and several files load at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.models.custody import (
    CellStatus,
    CellVerdict,
    Manifest,
    RosterError,
    Verification,
    reconcile,
    roster,
)
from cockpit.models.queue import FINISH_RE, parse_queue_file
from cockpit.models.sweep import Instance
from cockpit.services.loadcheck import FileCheck, check_file, warm_worker
from cockpit.services.pull import (
    PART_SUFFIX,
    PullProgress,
    PullResult,
    RemoteState,
    local_path,
    pull,
    remote_manifest,
)
from cockpit.services.remote import Box

MARKER = "PULL_VERIFIED.json"
MARKER_SCHEMA = "cockpit/PULL-VERIFIED/v1"


def make_pool(workers: int | None = None, *, quiet: bool = False) -> ProcessPoolExecutor:
    """Worker processes for hashing and loading (spawned: safe next to an event loop).

    With `quiet`, the workers' stdout and stderr go nowhere (under the TUI they would
    scribble on the screen). Every worker imports torch as it starts.

    multiprocessing's resource tracker is started here with the process's real stderr: under
    Textual `sys.stderr` is a capture object without a usable file descriptor, and starting
    the tracker from there fails (`bad value(s) in fds_to_keep`).
    """
    from multiprocessing import resource_tracker

    saved = sys.stderr
    try:
        sys.stderr = sys.__stderr__
        resource_tracker.ensure_running()
    finally:
        sys.stderr = saved
    count = workers or max(1, min(4, os.cpu_count() or 1))
    return ProcessPoolExecutor(max_workers=count, mp_context=multiprocessing.get_context("spawn"),
                               initializer=warm_worker, initargs=(quiet,))


class VerifyError(Exception):
    """Verification could not even start (no queue file, a bad roster, no durable root)."""


async def read_roster(box: Box, instance: Instance) -> tuple[str, ...]:
    """Expected cells from the instance's queue file on the box."""
    if not instance.queue:
        raise VerifyError(f"{instance.name}: the sweep names no queue file, so there is no roster")
    script = 'case "$1" in "~/"*) set -- "$HOME/${1#"~/"}" ;; esac; cat -- "$1"'
    result = await box.run(["/bin/sh", "-c", script, "cockpit-roster", instance.queue], 60)
    if result.status != 0:
        detail = result.stderr.decode(errors="replace").strip()[-200:]
        raise VerifyError(f"{instance.name}: cannot read the queue file {instance.queue}: {detail}")
    try:
        return roster(parse_queue_file(result.stdout.decode("utf-8", errors="replace")),
                      source=instance.queue)
    except RosterError as exc:
        raise VerifyError(str(exc)) from None


def box_exit_codes(finished_lines: tuple[str, ...]) -> dict[str, int]:
    """The last FINISHED exit code of each cell in the queue log."""
    codes: dict[str, int] = {}
    for line in finished_lines:
        match = FINISH_RE.search(line)
        if match is not None:
            codes[match["name"]] = int(match["rc"])
    return codes


def local_extras(dest: Path, cell: str, manifest: Manifest) -> list[str]:
    """Files in the local cell folder that the manifest does not list (parts excluded)."""
    folder = dest / cell
    if not folder.is_dir():
        return []
    listing = manifest.cell(cell)
    known = {local_path(dest, f) for f in (listing.files if listing else ())}
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and p not in known and not p.name.endswith(PART_SUFFIX))


async def check_files(paths: list[Path], pool: Executor) -> dict[Path, FileCheck]:
    """Hash and load each file in the pool."""
    loop = asyncio.get_running_loop()
    results = await asyncio.gather(*(loop.run_in_executor(pool, check_file, str(p)) for p in paths))
    return dict(zip(paths, results, strict=True))


def result_cells(expected: tuple[str, ...], state: RemoteState, excluded: Mapping[str, str]) -> list[str]:
    """The cells whose files are worth pulling and loading: not excluded, finished with exit 0
    on the box (or not finished yet), and without a roster problem."""
    problems = reconcile(expected, state.manifest)
    exits = box_exit_codes(state.finished_lines)
    return [c for c in expected if c not in excluded and not problems[c] and exits.get(c, 0) == 0]


async def verify_pulled(
    instance: str,
    expected: tuple[str, ...],
    state: RemoteState,
    dest: Path,
    pool: Executor,
    *,
    excluded: Mapping[str, str] | None = None,
    causes: Mapping[str, str] | None = None,
) -> Verification:
    """Verdict per expected cell from the local copies, the manifest and the box's exit codes.

    `excluded`: cells the user removed from N (cell -> recorded reason). `causes`: the
    classified failure of a cell, for the FAILED_ON_BOX reason.
    """
    excluded = excluded or {}
    causes = causes or {}
    manifest = state.manifest
    problems = reconcile(expected, manifest)
    exits = box_exit_codes(state.finished_lines)
    wanted = set(result_cells(expected, state, excluded))
    to_check = [local_path(dest, f) for f in manifest.files if f.cell in wanted]
    checks = await check_files([p for p in to_check if p.is_file()], pool)
    verdicts = []
    for name in expected:
        if name in excluded:
            verdicts.append(CellVerdict(name, CellStatus.EXCLUDED, (excluded[name],)))
            continue
        code = exits.get(name)
        if code is not None and code != 0:
            cause = causes.get(name, "")
            verdicts.append(CellVerdict(name, CellStatus.FAILED_ON_BOX, (
                f"failed on the box (exit={code}{', ' + cause if cause else ''}); its files are "
                f"not a finished result",)))
            continue
        if problems[name]:
            verdicts.append(CellVerdict(name, CellStatus.ERROR, tuple(problems[name])))
            continue
        verdicts.append(_cell_verdict(name, manifest, dest, checks))
    pulled = sum(v.bytes for v in verdicts if v.status is CellStatus.OK)
    return Verification(instance, manifest.digest, tuple(verdicts), pulled, time.time(),
                        manifest.extras)


def _cell_verdict(name: str, manifest: Manifest, dest: Path, checks: dict[Path, FileCheck]) -> CellVerdict:
    listing = manifest.cell(name)
    assert listing is not None
    reasons: list[str] = []
    metric = ""
    total = 0
    for entry in listing.files:
        path = local_path(dest, entry)
        check = checks.get(path)
        if check is None:
            reasons.append(f"{entry.path}: not pulled")
            continue
        if check.size != entry.size:
            reasons.append(f"{entry.path}: {check.size} bytes, the manifest says {entry.size}")
        elif check.sha256 != entry.sha256:
            reasons.append(f"{entry.path}: SHA-256 differs from the manifest")
        elif check.loaded is False:
            reasons.append(f"{entry.path}: {check.reason}")
        total += max(check.size, 0)
        if check.metric:
            metric = check.metric
    reasons += [f"{extra}: unexpected local file (not in the manifest)"
                for extra in local_extras(dest, name, manifest)]
    status = CellStatus.ERROR if reasons else CellStatus.OK
    return CellVerdict(name, status, tuple(reasons), total, metric)


def write_marker(folder: Path, verification: Verification, sweep: str) -> Path | None:
    """Write PULL_VERIFIED.json atomically when N/N; otherwise remove a stale one (it would lie)."""
    marker = folder / MARKER
    if not verification.complete:
        marker.unlink(missing_ok=True)
        return None
    doc = {
        "schema": MARKER_SCHEMA,
        "sweep": sweep,
        "instance": verification.instance,
        "manifest_sha256": verification.manifest_digest,
        "verified_at_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(verification.verified_at)),
        "expected": verification.expected,
        "loaded": verification.loaded,
        "excluded": [{"cell": v.cell, "reason": v.reason} for v in verification.excluded],
        "cells": [{"cell": v.cell, "metric": v.metric, "bytes": v.bytes}
                  for v in verification.verdicts if v.status is CellStatus.OK],
        "bytes": verification.bytes_pulled,
    }
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{MARKER}.tmp"
    with tmp.open("w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, marker)
    return marker


def read_marker(folder: Path) -> dict[str, object] | None:
    """The last PULL_VERIFIED.json of an instance, if any."""
    marker = folder / MARKER
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == MARKER_SCHEMA else None


@dataclass
class VerifyReport:
    """Everything one verification run found, for the CLI and the verify screen."""

    instance: str
    expected: tuple[str, ...] = ()
    state: RemoteState | None = None
    pull: PullResult | None = None
    verification: Verification | None = None
    marker: Path | None = None
    error: str = ""
    stages: list[str] = field(default_factory=list)


async def run_verification(
    box: Box,
    instance: Instance,
    dest: Path,
    sweep: str,
    pool: Executor,
    *,
    excluded: Mapping[str, str] | None = None,
    causes: Mapping[str, str] | None = None,
    on_stage: Callable[[str], None] | None = None,
    on_progress: Callable[[PullProgress], None] | None = None,
) -> VerifyReport:
    """The whole path for one instance. Errors end up in the report, never as a crash."""
    report = VerifyReport(instance.name)

    def stage(text: str) -> None:
        report.stages.append(text)
        if on_stage is not None:
            on_stage(text)

    if not instance.durable_root:
        report.error = f"{instance.name}: the sweep names no durable_root to pull from"
        return report
    # Start the workers now: they import torch while the manifest and the pull run.
    with contextlib.suppress(RuntimeError):  # a pool already shut down fails later, visibly
        pool.submit(int)
    from cockpit.services.pull import ManifestError

    try:
        stage("reading the roster from the queue file")
        report.expected = await read_roster(box, instance)
        stage(f"hashing {len(report.expected)} cell folder(s) on the box")
        report.state = await remote_manifest(box, instance.name, instance.durable_root,
                                             instance.queue_log, report.expected)
    except (VerifyError, ManifestError) as exc:
        report.error = str(exc)
        return report
    except TimeoutError:
        report.error = f"{instance.name}: the box did not answer in time"
        return report
    state = report.state
    pullable = result_cells(report.expected, state, excluded or {})
    stage(f"pulling {len(pullable)} cell(s), {state.manifest.total_bytes} bytes listed")
    report.pull = await pull(box, state.manifest, dest, pullable, on_progress=on_progress)
    stage("hashing and loading the local copies")
    report.verification = await verify_pulled(instance.name, report.expected, state, dest, pool,
                                              excluded=excluded, causes=causes)
    report.marker = write_marker(dest, report.verification, sweep)
    stage(report.verification.summary)
    return report


def pull_folder(pull_dir: Path, instance: str) -> Path:
    """Where one instance's cells are pulled: `<pull_dir>/<instance>/`."""
    return pull_dir / instance


async def open_box(instance: Instance, target_for: Callable[[Instance], object]) -> Box:
    """A Box for `instance`: this machine for `host: local`, else a new SSH connection."""
    from cockpit.services import ssh
    from cockpit.services.remote import LocalBox, SshBox

    if instance.is_local:
        return LocalBox()
    target = target_for(instance)
    assert isinstance(target, ssh.Target)
    return SshBox(await ssh.connect(target), owns=True)


def report_json(report: VerifyReport) -> dict[str, object]:
    """One instance's report as JSON (for `cockpit verify --json`)."""
    v = report.verification
    return {
        "instance": report.instance,
        "error": report.error or None,
        "expected": v.expected if v else None,
        "loaded": v.loaded if v else None,
        "complete": bool(v and v.complete),
        "manifest_sha256": v.manifest_digest if v else None,
        "bytes": v.bytes_pulled if v else 0,
        "marker": str(report.marker) if report.marker else None,
        "extras": list(v.extras) if v else [],
        "pull_failures": [f"{o.entry.cell}/{o.entry.path}: {o.detail}"
                          for o in (report.pull.failures if report.pull else ())],
        "cells": [{"cell": c.cell, "status": c.status.value, "reasons": list(c.reasons),
                   "metric": c.metric or None, "bytes": c.bytes} for c in (v.verdicts if v else ())],
    }


def report_text(report: VerifyReport) -> str:
    """One instance's report for a terminal."""
    lines = [f"== {report.instance}"]
    if report.error:
        return "\n".join([*lines, f"ERROR {report.error}", "NOT VERIFIED", ""])
    v = report.verification
    assert v is not None
    for verdict in v.verdicts:
        if verdict.status is CellStatus.OK:
            lines.append(f"OK      {verdict.cell}  {verdict.metric}  ({verdict.bytes} bytes)")
        else:
            lines.append(f"{verdict.status.value.upper():<7} {verdict.cell}: {verdict.reason}")
    for extra in v.extras:
        lines.append(f"NOTE    unexpected extra directory on the box: {extra}/")
    for outcome in report.pull.failures if report.pull else ():
        lines.append(f"PULL    {outcome.entry.cell}/{outcome.entry.path}: {outcome.detail}")
    lines.append(f"{v.summary}, {v.bytes_pulled} bytes, manifest {v.manifest_digest[:16]}")
    lines.append(f"PULL VERIFIED: {report.marker}" if report.marker else "NOT VERIFIED")
    return "\n".join([*lines, ""])
