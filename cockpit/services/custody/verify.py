"""Pull and verify one instance: roster → remote manifest → pull → hash and load → N/N.

Shared by `cockpit verify` and the TUI's verify screen. Loading runs in a process pool
(spawned, not forked: the parent may hold an event loop and SSH connections), so torch is
never imported in the TUI process and several files load at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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
    RUNBOOK_MANIFEST,
    RUNBOOK_MARKER,
    CellStatus,
    CellVerdict,
    Evidence,
    FailureCause,
    Manifest,
    Mark,
    RosterError,
    Verification,
    reconcile,
    roster,
    runbook_problems,
)
from cockpit.models.queue import parse_queue_file
from cockpit.models.slurm import PENDING as SLURM_PENDING
from cockpit.models.slurm import RUNNING as SLURM_RUNNING
from cockpit.models.sweep import Instance
from cockpit.models.text import visible
from cockpit.services.custody.loadcheck import FileCheck, check_file, warm_worker
from cockpit.services.custody.pull import (
    PART_SUFFIX,
    PullProgress,
    PullResult,
    RemoteState,
    local_path,
    pull,
    remote_manifest,
)
from cockpit.services.transport.remote import Box

MARKER_SUFFIX = ".cockpit-verified.json"
"""The cockpit's receipt is `<pull_dir>/<instance>.cockpit-verified.json`, *beside* the pulled
folder: the runbook's verify_local.py refuses any file in the folder that its manifest does
not list, and writes its own PULL_VERIFIED.json there."""
MARKER_SCHEMA = "cockpit/PULL-VERIFIED/v1"
RUNBOOK_MARKER_SCHEMA = "remote-gpu-trainer/PULL-VERIFIED/v1"
MAX_RUNBOOK_MANIFEST = 64 << 20
"""The runbook's manifest is a few hundred bytes per file; more than this is not one."""
LOG_TAIL_BYTES = 256 << 10
"""How much of a failed cell's log is read to classify it: the end is where it died."""


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


def start_workers(pool: Executor) -> None:
    """Have every worker of `pool` start now (spawn and import torch), not at its first check.

    A spawn-context ProcessPoolExecutor starts one worker per submitted call while none is
    idle, up to its size: a single warm-up call started one worker, and the others were
    spawned by the first checks, cold (spawn and torch import inside the verification). One no-op call
    per worker starts them all; they warm up while the manifest is computed and the pull runs.
    A pool already shut down fails later, visibly, at its first real check."""
    count = int(getattr(pool, "_max_workers", 1))
    with contextlib.suppress(RuntimeError):
        for _ in range(count):
            pool.submit(int)


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


def marker_path(dest: Path) -> Path:
    """Where the cockpit's receipt for the folder `dest` lives (beside it, see MARKER_SUFFIX)."""
    return dest.with_name(dest.name + MARKER_SUFFIX)


def local_extras(dest: Path, cell: str, manifest: Manifest) -> list[str]:
    """Entries in the local cell folder that the manifest does not list (parts excluded):
    extra files, and any symlink or special file (never followed)."""
    folder = dest / cell
    if folder.is_symlink() or not folder.is_dir():
        return [] if not folder.is_symlink() else ["(the cell folder itself is a symlink)"]
    listing = manifest.cell(cell)
    known = {local_path(dest, f) for f in (listing.files if listing else ())}
    extras = []
    for top, dirs, files in os.walk(folder):  # followlinks=False: a linked folder is listed
        here = Path(top)
        for name in files + [d for d in dirs if (here / d).is_symlink()]:
            path = here / name
            if path in known and not path.is_symlink():
                continue
            if name.endswith(PART_SUFFIX) and not path.is_symlink():
                continue
            extras.append(str(path.relative_to(folder)))
    return sorted(extras)


def regular_file(path: Path) -> bool:
    """A regular file that is not a symlink (a planted link is never hashed or loaded)."""
    return not path.is_symlink() and path.is_file()


async def check_files(paths: list[Path], pool: Executor, prefer: str | None = None) -> dict[Path, FileCheck]:
    """Hash and load each file in the pool. A check that fails in any way (a worker killed by
    the kernel, a pool already broken) is that file's failure, never the verification's."""
    loop = asyncio.get_running_loop()
    results = await asyncio.gather(*(loop.run_in_executor(pool, check_file, str(p), prefer)
                                     for p in paths),
                                   return_exceptions=True)
    checks: dict[Path, FileCheck] = {}
    for path, result in zip(paths, results, strict=True):
        if isinstance(result, FileCheck):
            checks[path] = result
        elif isinstance(result, Exception):
            checks[path] = FileCheck(str(path), -1, "", False,
                                     f"the check itself failed ({type(result).__name__}: "
                                     f"{visible(str(result))[:160]}): not counted")
        else:
            raise result  # cancellation and the like are not a file's fault
    return checks


def result_cells(expected: tuple[str, ...], state: RemoteState, excluded: Mapping[str, str]) -> list[str]:
    """The cells whose files are worth pulling and loading: not excluded, not running (their
    files are still being written), not failed on the box, and without a roster problem.
    An unproven cell is pulled (its files are checked and kept) but cannot count."""
    manifest = state.manifest
    problems = reconcile(expected, manifest)
    out = []
    for cell in expected:
        evidence = manifest.evidence_of(cell)
        if cell in excluded or problems[cell] or evidence.mark is Mark.STARTED:
            continue
        if evidence.mark is Mark.FINISHED and evidence.exit_code != 0 and evidence.exit_code is not None:
            continue
        out.append(cell)
    return out


async def verify_pulled(
    instance: str,
    expected: tuple[str, ...],
    state: RemoteState,
    dest: Path,
    pool: Executor,
    *,
    excluded: Mapping[str, str] | None = None,
    causes: Mapping[str, FailureCause] | None = None,
    queue_log: str | None = None,
    metric: str | None = None,
) -> Verification:
    """Verdict per expected cell from the queue log's evidence and the local copies.

    A cell is OK only with a FINISHED exit=0 mark for its latest run *and* every file pulled,
    hashed and loaded with content. `excluded`: cells the user removed from N (cell ->
    recorded reason). `causes`: the classified failure of a cell that failed on the box.
    `metric`: the sweep's headline metric for best_metrics.json.
    """
    excluded = excluded or {}
    causes = causes or {}
    manifest = state.manifest
    problems = reconcile(expected, manifest)
    wanted = set(result_cells(expected, state, excluded))
    to_check = [local_path(dest, f) for f in manifest.files if f.cell in wanted]
    checks = await check_files([p for p in to_check if regular_file(p)], pool, metric)
    verdicts = []
    for name in expected:
        evidence = manifest.evidence_of(name)
        if name in excluded:
            verdicts.append(CellVerdict(name, CellStatus.EXCLUDED, (excluded[name],),
                                        ended=evidence.ended, cause=causes.get(name)))
            continue
        if evidence.mark is Mark.STARTED:
            verdicts.append(CellVerdict(name, CellStatus.RUNNING, (
                f"started, no FINISHED mark yet: still running, or died without one "
                f"({visible(evidence.line[:160])})",)))
            continue
        if evidence.ended and evidence.exit_code not in (0, None):
            cause = causes.get(name)
            detail = f", {cause.text}" if cause else ""
            verdicts.append(CellVerdict(name, CellStatus.FAILED_ON_BOX, (
                f"failed on the box (exit={evidence.exit_code}{visible(detail)}); its files are not "
                f"a finished result",), ended=True, cause=cause))
            continue
        file_problems = list(problems[name])
        if not file_problems and name in wanted:
            file_verdict = _cell_verdict(name, manifest, dest, checks)
            file_problems = list(file_verdict.reasons)
        else:
            file_verdict = None
        if not evidence.proven_ok:
            verdicts.append(CellVerdict(name, CellStatus.UNPROVEN,
                                        (evidence.why_unproven(queue_log), *file_problems),
                                        metric=file_verdict.metric if file_verdict else "",
                                        ended=evidence.ended))
        elif file_problems or file_verdict is None:
            verdicts.append(CellVerdict(name, CellStatus.ERROR, tuple(file_problems), ended=True))
        else:
            verdicts.append(CellVerdict(name, file_verdict.status, file_verdict.reasons,
                                        file_verdict.bytes, file_verdict.metric, ended=True))
    pulled = sum(v.bytes for v in verdicts if v.status is CellStatus.OK)
    blockers = tuple(runbook_check(dest, manifest, expected))
    return Verification(instance, manifest.digest, tuple(verdicts), pulled, time.time(),
                        manifest.extras, blockers)


def runbook_check(dest: Path, manifest: Manifest, expected: tuple[str, ...]) -> list[str]:
    """Cross-check the runbook's PULL_MANIFEST.json (pulled to `dest`) with our manifest."""
    entry = manifest.runbook_manifest
    if entry is None:
        return []
    path = dest / RUNBOOK_MANIFEST
    if not regular_file(path) or path.stat().st_size != entry.size:
        return [f"the box has the runbook's {RUNBOOK_MANIFEST}, but it was not pulled"]
    if entry.size > MAX_RUNBOOK_MANIFEST:
        return [f"{RUNBOOK_MANIFEST} is {entry.size} bytes: too large to be a manifest"]
    try:
        doc = json.loads(path.read_bytes())
    except (ValueError, RecursionError) as exc:
        return [f"{RUNBOOK_MANIFEST} is not valid JSON ({visible(str(exc))[:120]})"]
    return runbook_problems(doc, manifest, expected)


def runbook_marker(dest: Path) -> str | None:
    """The runbook's own PULL_VERIFIED.json in `dest`, described (shown, never trusted)."""
    path = dest / RUNBOOK_MARKER
    if not regular_file(path):
        return None
    try:
        doc = json.loads(path.read_bytes()[:1 << 20])
    except (ValueError, RecursionError):
        return f"{RUNBOOK_MARKER} present but unreadable (not trusted)"
    when = doc.get("verified_at_utc") if isinstance(doc, dict) else None
    return (f"{RUNBOOK_MARKER} from the runbook's verify_local.py present"
            f"{' (' + visible(str(when))[:40] + ')' if when else ''}: shown, not trusted — the "
            f"cockpit verifies by itself")


def _cell_verdict(name: str, manifest: Manifest, dest: Path, checks: dict[Path, FileCheck]) -> CellVerdict:
    listing = manifest.cell(name)
    assert listing is not None
    reasons: list[str] = []
    metric = ""
    total = 0
    for entry in listing.files:
        path = local_path(dest, entry)
        check = checks.get(path)
        shown = visible(entry.path)
        if check is None:
            reasons.append(f"{shown}: not pulled")
            continue
        if not check.sha256:  # it could not even be read or hashed
            reasons.append(f"{shown}: {visible(check.reason)}")
        elif check.size != entry.size:
            reasons.append(f"{shown}: {check.size} bytes, the manifest says {entry.size}")
        elif check.sha256 != entry.sha256:
            reasons.append(f"{shown}: SHA-256 differs from the manifest")
        elif check.loaded is False:
            reasons.append(f"{shown}: {visible(check.reason)}")
        total += max(check.size, 0)
        if check.metric:
            metric = visible(check.metric)
    reasons += [f"{visible(extra)}: unexpected local file (not in the manifest)"
                for extra in local_extras(dest, name, manifest)]
    status = CellStatus.ERROR if reasons else CellStatus.OK
    return CellVerdict(name, status, tuple(reasons), total, metric)


def write_marker(folder: Path, verification: Verification, sweep: str) -> Path | None:
    """Write the cockpit's receipt atomically when N/N; otherwise remove a stale one (it
    would lie). It lives beside `folder` (see MARKER_SUFFIX); a receipt of ours left inside
    the folder by an older cockpit is removed, so the runbook's verify_local.py can pass."""
    marker = marker_path(folder)
    legacy = folder / RUNBOOK_MARKER
    if regular_file(legacy) and _our_schema(legacy):
        legacy.unlink()
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
    # ASCII-escaped: a lone surrogate in a metric string can never make the write fail halfway.
    text = json.dumps(doc, indent=2, ensure_ascii=True) + "\n"
    marker.parent.mkdir(parents=True, exist_ok=True)
    tmp = marker.with_name(f".{marker.name}.tmp")
    try:
        with tmp.open("w", encoding="ascii") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, marker)
    finally:
        tmp.unlink(missing_ok=True)
    return marker


def _our_schema(path: Path) -> bool:
    try:
        doc = json.loads(path.read_bytes()[:1 << 20])
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == MARKER_SCHEMA


def read_marker(folder: Path) -> dict[str, object] | None:
    """The cockpit's last receipt for the pulled folder `folder`, if any."""
    marker = marker_path(folder)
    try:
        doc = json.loads(marker.read_bytes()[:1 << 20])
    except (OSError, ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) and doc.get("schema") == MARKER_SCHEMA else None


def is_slurm(instance: Instance) -> bool:
    """A Slurm instance: its cells' evidence is the scheduler's, not a master log's."""
    return instance.profile == "slurm"


async def slurm_evidence(box: Box, instance: Instance, sweep: str,
                         expected: tuple[str, ...]) -> dict[str, Evidence]:
    """Each cell's evidence from the array jobs this cockpit submitted for the instance (task i
    is cell i; a later job overrides an earlier one for the cells it ran): COMPLETED exit 0 is
    the scheduler's proof of success; a terminal failure state is a FINISHED with its exit code
    (1 when Slurm gives none); RUNNING is STARTED; pending or never submitted proves nothing."""
    from cockpit.services.queue.slurm import recorded_jobs, states

    found: dict[str, Evidence] = {}
    for job in recorded_jobs(sweep, instance.name):
        for task, state in (await states(box, instance, job, len(expected))).items():
            if not 1 <= task <= len(expected):
                continue
            cell = expected[task - 1]
            line = f"slurm job {job}_{task}: {state.text}"
            if state.state in SLURM_RUNNING:
                found[cell] = Evidence(Mark.STARTED, None, line)
            elif state.state == "COMPLETED" and not state.exit_code:
                found[cell] = Evidence(Mark.FINISHED, 0, line)
            elif state.state not in SLURM_PENDING:
                found[cell] = Evidence(Mark.FINISHED, state.exit_code or 1, line)
    return {cell: found.get(cell, Evidence(Mark.NONE, None, "no Slurm task of this cell ran "
                                           "(or its job was not submitted by this cockpit)"))
            for cell in expected}


async def remote_state(box: Box, instance: Instance, sweep: str, expected: tuple[str, ...]) -> RemoteState:
    """The remote manifest with each cell's evidence: the queue log's marks, or for a Slurm
    instance the scheduler's states. Used for verification and for the fresh check before a
    teardown runs, so both name the same state the same way."""
    assert instance.durable_root is not None
    state = await remote_manifest(box, instance.name, instance.durable_root,
                                  None if is_slurm(instance) else instance.queue_log, expected)
    if not is_slurm(instance):
        return state
    evidence = await slurm_evidence(box, instance, sweep, expected)
    manifest = dataclasses.replace(state.manifest, evidence=tuple(evidence.items()))
    return RemoteState(manifest, state.hasher, state.mark_lines)


async def classify_failed(box: Box, instance: Instance, codes: Mapping[str, int]) -> dict[str, FailureCause]:
    """The classified cause of each cell that failed on the box, from the tail of its log
    (`run_logs/<cell>.log`, else the durable copy `<durable_root>/<cell>/<cell>.log`); a cell
    whose log says nothing is named by its exit code's rule, if any."""
    from cockpit.models.classify import classify_bytes
    from cockpit.services.config.rulebook import load_rulebook
    from cockpit.services.config.yamlfile import ConfigError

    try:
        rulebook = load_rulebook()
    except ConfigError:  # a broken user rule file is reported by `classify`; ship's rules here
        rulebook = load_rulebook(user=False)
    script = 'for p in "$@"; do if [ -f "$p" ]; then tail -c "$0" -- "$p"; exit 0; fi; done; exit 3'
    causes: dict[str, FailureCause] = {}
    for cell, code in codes.items():
        paths = [f"{base.rstrip('/')}/{suffix}" for base, suffix in (
            (instance.run_logs, f"{cell}.log"), (instance.durable_root, f"{cell}/{cell}.log")) if base]
        findings = []
        try:
            result = await box.run(["/bin/sh", "-c", script, str(LOG_TAIL_BYTES), *paths], 60)
            if result.status == 0:
                findings = classify_bytes(rulebook, [result.stdout[-LOG_TAIL_BYTES:]])
        except Exception:  # no log is no finding; the exit code still speaks
            findings = []
        severe = [f for f in findings if f.rule.severe] or findings
        if severe:
            found = severe[-1]
            causes[cell] = FailureCause(found.rule.id, found.rule.klass, found.rule.spec.title,
                                        visible(found.excerpt)[:300])
        elif (rule := rulebook.for_exit(code, runner_known=is_slurm(instance))) is not None:
            causes[cell] = FailureCause(rule.id, rule.klass, rule.spec.title, f"exit={code}")
    return causes


@dataclass
class VerifyReport:
    """Everything one verification run found, for the CLI and the verify screen."""

    instance: str
    expected: tuple[str, ...] = ()
    state: RemoteState | None = None
    pull: PullResult | None = None
    verification: Verification | None = None
    marker: Path | None = None
    runbook_marker: str | None = None
    """The runbook's own PULL_VERIFIED.json, described when present (never trusted)."""
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
    causes: Mapping[str, FailureCause] | None = None,
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
    start_workers(pool)
    from cockpit.services.custody.pull import ManifestError
    from cockpit.services.queue.launch import LaunchRefused
    from cockpit.services.transport.remote import OutputTooLarge

    try:
        stage("reading the roster from the queue file")
        report.expected = await read_roster(box, instance)
        stage(f"hashing {len(report.expected)} cell folder(s) on the box")
        report.state = await remote_state(box, instance, sweep, report.expected)
    except (VerifyError, ManifestError, OutputTooLarge, LaunchRefused) as exc:
        report.error = str(exc)  # LaunchRefused: a Slurm listing that could not be read whole
        return report
    except TimeoutError:
        report.error = f"{instance.name}: the box did not answer in time"
        return report
    state = report.state
    manifest = state.manifest
    pullable = result_cells(report.expected, state, excluded or {})
    runbook = (manifest.runbook_manifest,) if manifest.runbook_manifest else ()
    stage(f"pulling {len(pullable)} cell(s), {manifest.total_bytes} bytes listed")
    report.pull = await pull(box, manifest, dest, pullable, extra=runbook, on_progress=on_progress)
    failed = {c: e.exit_code for c in report.expected
              if (e := manifest.evidence_of(c)).ended and e.exit_code not in (0, None)}
    known = dict(causes or {})
    missing = {c: code for c, code in failed.items() if c not in known and code is not None}
    if missing:
        stage(f"classifying {len(missing)} failed cell(s) from their logs")
        known.update(await classify_failed(box, instance, missing))
    stage("hashing and loading the local copies")
    report.verification = await verify_pulled(instance.name, report.expected, state, dest, pool,
                                              excluded=excluded, causes=known,
                                              queue_log=instance.queue_log, metric=instance.metric)
    report.marker = write_marker(dest, report.verification, sweep)
    report.runbook_marker = runbook_marker(dest)
    stage(report.verification.summary)
    return report


def pull_folder(pull_dir: Path, instance: str) -> Path:
    """Where one instance's cells are pulled: `<pull_dir>/<instance>/`."""
    return pull_dir / instance


async def open_box(instance: Instance, target_for: Callable[[Instance], object]) -> Box:
    """A Box for `instance`: this machine for `host: local`, else a new SSH connection."""
    from cockpit.services.transport import ssh
    from cockpit.services.transport.remote import LocalBox, SshBox

    if instance.is_local:
        return LocalBox()
    target = target_for(instance)
    assert isinstance(target, ssh.Target)
    return SshBox(await ssh.connect(target), owns=True, target=target)


def _cell_json(c: CellVerdict) -> dict[str, object]:
    cause = c.cause
    return {"cell": c.cell, "status": c.status.value, "reasons": list(c.reasons),
            "metric": c.metric or None, "bytes": c.bytes, "ended": c.ended,
            "rule": cause.rule if cause else None, "class": cause.klass if cause else None,
            "title": cause.title if cause else None, "excerpt": cause.excerpt if cause else None}


def report_json(report: VerifyReport) -> dict[str, object]:
    """One instance's report as JSON (for `cockpit verify --json`): each failed cell carries
    its classified rule id, class and excerpt."""
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
        "runbook_marker": report.runbook_marker,
        "blockers": list(v.blockers) if v else [],
        "extras": list(v.extras) if v else [],
        "pull_failures": [f"{o.entry.cell}/{o.entry.path}: {o.detail}"
                          for o in (report.pull.failures if report.pull else ())],
        "cells": [_cell_json(c) for c in (v.verdicts if v else ())],
    }


def report_text(report: VerifyReport) -> str:
    """One instance's report for a terminal (every remote string made visible, never obeyed)."""
    lines = [f"== {visible(report.instance)}"]
    if report.error:
        return "\n".join([*lines, f"ERROR {visible(report.error)}", "NOT VERIFIED", ""])
    v = report.verification
    assert v is not None
    for verdict in v.verdicts:
        cell = visible(verdict.cell)
        if verdict.status is CellStatus.OK:
            lines.append(f"OK        {cell}  {visible(verdict.metric)}  ({verdict.bytes} bytes)")
        else:
            lines.append(f"{verdict.status.value.upper():<9} {cell}: {visible(verdict.reason)}")
            if verdict.cause is not None and verdict.cause.excerpt:
                lines.append(f"          {visible(verdict.cause.excerpt)}")
    for extra in v.extras:
        lines.append(f"NOTE      unexpected extra directory on the box: {visible(extra)}/")
    for blocker in v.blockers:
        lines.append(f"BLOCKED   {visible(blocker)}")
    if report.runbook_marker:
        lines.append(f"NOTE      {visible(report.runbook_marker)}")
    for outcome in report.pull.failures if report.pull else ():
        lines.append(f"PULL      {visible(outcome.entry.cell)}/{visible(outcome.entry.path)}: "
                     f"{visible(outcome.detail)}")
    lines.append(f"{v.summary}, {v.bytes_pulled} bytes, manifest {v.manifest_digest[:16]}")
    lines.append(f"PULL VERIFIED: {report.marker}" if report.marker else "NOT VERIFIED")
    return "\n".join([*lines, ""])
