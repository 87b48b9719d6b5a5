"""Custody of results: the roster, the remote manifest, and what verification proved.

Pure data and rules (platform-facts §4.1–4.2, §8.4): the roster comes from the queue file
(cell name = cfg basename without `.yaml`), never from what happens to be on disk; a count
or a size is never proof; zero expected cells is a failure, never "0/0 OK"; a manifest's
own SHA-256 identifies the exact state that was verified.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum

from cockpit.models.queue import FINISH_RE, START_RE, QueueLine
from cockpit.models.text import visible

REQUIRED = ("best.pth", "best_metrics.json")
"""What every cell's durable folder must hold (platform-facts §6.4)."""
SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
"""Cell names that are safe as one path component (platform-facts §4.2)."""
HEADLINE_KEYS = (
    "val_acc", "val_accuracy", "eval_accuracy", "test_acc", "accuracy", "acc", "top1", "acc1",
    "val_f1", "eval_f1", "f1", "mAP", "map", "mAP50", "map50", "mAP50-95", "mIoU", "miou", "iou",
    "dice", "psnr", "ssim", "bleu", "rouge", "auc", "val_auc", "wer", "cer",
    "val_loss", "eval_loss", "test_loss", "loss",
)
"""The headline metric of a best_metrics.json, first match wins (after the sweep's `metric:`
and the file's own `"metric"` key naming one): validation/eval quality scores before generic
ones, losses last. Keys are matched exactly, then ignoring case."""
MAX_COMPONENT_BYTES = 255
"""Longest file-name component any local file system takes (ext4, APFS, NTFS): a longer name
from the box cannot be pulled under its own name, so it is refused, not truncated."""
MAX_EXIT_DIGITS = 6
"""An exit code has at most 3 digits; a FINISHED mark with more is garbled, not evidence."""
_PLAIN_COMPONENT = re.compile(r"^[^\x00-\x1f\x7f-\x9f/\\]+$")


def plain_component(name: str) -> bool:
    """Whether `name` is an ordinary file or folder name that is safe to create locally: not
    empty, not `.`/`..`, no leading dot (no `.git/`, `.ssh/`, `.bashrc`: a pulled `.git`
    folder makes `git status` run the box's `core.fsmonitor` on the user's machine), no
    control characters or separators, valid UTF-8, at most MAX_COMPONENT_BYTES bytes."""
    if not name or name.startswith(".") or not _PLAIN_COMPONENT.fullmatch(name):
        return False
    try:
        return len(name.encode("utf-8")) <= MAX_COMPONENT_BYTES
    except UnicodeEncodeError:  # a byte that was not UTF-8 on the box (surrogateescape)
        return False


def plain_path(rel: str) -> bool:
    """Whether every component of the `/`-separated relative path `rel` is plain."""
    return not rel.startswith("/") and all(plain_component(part) for part in rel.split("/"))


class RosterError(ValueError):
    """The roster itself is wrong (duplicate or unsafe names, no cells): nothing can be verified."""


def roster(lines: Iterable[QueueLine], source: str = "queue") -> tuple[str, ...]:
    """Expected cell names in queue order; duplicates, unsafe names or none at all are errors."""
    seen: dict[str, int] = {}
    problems: list[str] = []
    for line in lines:
        if not SAFE_NAME.fullmatch(line.name) or line.name in (".", ".."):
            problems.append(f"{source}:{line.lineno}: cell name {line.name!r} is not a safe folder "
                            f"name (letters, digits, . _ - only)")
        elif line.name in seen:
            problems.append(f"{source}:{line.lineno}: cell {line.name!r} again (first on line "
                            f"{seen[line.name]}): two queue lines would write one folder")
        else:
            seen[line.name] = line.lineno
    if problems:
        raise RosterError("; ".join(problems))
    if not seen:
        raise RosterError(f"{source}: no cells: zero expected cells is a failure, never 0/0 OK")
    return tuple(seen)


@dataclass(frozen=True)
class FileEntry:
    """One file of a cell as the remote hashed it."""

    cell: str
    path: str
    """Relative to the cell folder, `/`-separated, never absolute and never with `..`."""
    size: int
    sha256: str


class Mark(Enum):
    """What the queue log says about a cell's latest run."""

    FINISHED = "finished"
    """Its latest STARTING mark is followed by a FINISHED mark (with an exit code)."""
    STARTED = "started"
    """Its latest STARTING mark has no FINISHED after it: running, or died without a mark."""
    NONE = "none"
    """The queue log names it nowhere (never run, or the log was truncated by a resume)."""
    NO_QUEUE_LOG = "no queue_log"
    """The sweep names no queue_log: there are no exit codes at all."""
    LOG_MISSING = "queue_log missing"
    """The sweep names a queue_log that is not on the box."""


@dataclass(frozen=True)
class Evidence:
    """The queue log's evidence about one cell: its latest run and how it ended."""

    mark: Mark
    exit_code: int | None = None
    """The FINISHED mark's exit code; None when there is none or it is garbled."""
    line: str = ""
    """The mark itself, as evidence to show."""

    @property
    def proven_ok(self) -> bool:
        """A FINISHED mark with exit 0 for the cell's latest run: the only proof of success."""
        return self.mark is Mark.FINISHED and self.exit_code == 0

    @property
    def ended(self) -> bool:
        """The cell's latest run provably ended (whatever its exit code)."""
        return self.mark is Mark.FINISHED

    def canonical(self) -> str:
        """What the manifest digest covers: the state, not the mark's text."""
        return f"{self.mark.value}:{self.exit_code}"

    def why_unproven(self, queue_log: str | None) -> str:
        """Why this evidence proves nothing, for an UNPROVEN cell."""
        if self.mark is Mark.NO_QUEUE_LOG:
            return ("no queue_log: exit codes unknown — add queue_log to the sweep, or exclude "
                    "the cell by typing its name")
        if self.mark is Mark.LOG_MISSING:
            return (f"queue_log {queue_log} is not on the box: exit codes unknown — fix "
                    f"queue_log, or exclude the cell by typing its name")
        if self.mark is Mark.FINISHED and self.exit_code is None:
            return f"garbled FINISHED mark ({self.line[:120]}): exit code unknown"
        if self.line:  # the source said why (e.g. the scheduler ran no task of this cell)
            return f"{self.line} — re-run it, or exclude it by typing its name"
        return (f"no FINISHED mark in {queue_log or 'the queue log'} (never run here, or the "
                f"log was truncated by a resume) — re-run it, or exclude it by typing its name")


def cell_evidence(expected: Sequence[str], mark_lines: Iterable[str] | None,
                  log_found: bool = True) -> dict[str, Evidence]:
    """Each expected cell's latest run from the queue log's STARTING/FINISHED marks, in order.

    `mark_lines` None: the sweep names no queue log. A FINISHED mark counts for a cell only
    when it comes after that cell's latest STARTING mark (a re-run that is still going does
    not inherit the earlier run's exit 0)."""
    if mark_lines is None:
        return dict.fromkeys(expected, Evidence(Mark.NO_QUEUE_LOG))
    if not log_found:
        return dict.fromkeys(expected, Evidence(Mark.LOG_MISSING))
    wanted = set(expected)
    found: dict[str, Evidence] = {}
    for line in mark_lines:
        if (m := FINISH_RE.search(line)) is not None and m["name"] in wanted:
            rc = m["rc"]
            code = int(rc) if len(rc.lstrip("-")) <= MAX_EXIT_DIGITS else None
            found[m["name"]] = Evidence(Mark.FINISHED, code, line.strip())
        elif (m := START_RE.search(line)) is not None and m["name"] in wanted:
            found[m["name"]] = Evidence(Mark.STARTED, None, line.strip())
    return {name: found.get(name, Evidence(Mark.NONE)) for name in expected}


@dataclass(frozen=True)
class CellListing:
    """What the remote holds for one expected cell."""

    cell: str
    exists: bool
    files: tuple[FileEntry, ...] = ()
    refused: tuple[str, ...] = ()
    """Entries not pulled: symlinks, anything that is not a regular file, and names that are
    not plain path components (dot-folders such as `.git/`, control characters, too long)."""

    def file(self, name: str) -> FileEntry | None:
        """The entry for `name` at the top of the cell folder."""
        return next((f for f in self.files if f.path == name), None)


@dataclass(frozen=True)
class Manifest:
    """Sizes and SHA-256 of every file under each expected cell folder, plus extra folders."""

    instance: str
    root: str
    cells: tuple[CellListing, ...]
    extras: tuple[str, ...] = ()
    """Folders under the durable root that no queue line names."""
    evidence: tuple[tuple[str, Evidence], ...] = ()
    """Each expected cell's queue-log evidence, read in the same remote command."""
    runbook_manifest: FileEntry | None = None
    """The runbook's own `PULL_MANIFEST.json` at the durable root, when there is one."""

    @property
    def files(self) -> tuple[FileEntry, ...]:
        """Every file of every cell."""
        return tuple(f for c in self.cells for f in c.files)

    @property
    def total_bytes(self) -> int:
        """Bytes of every file of every cell."""
        return sum(f.size for f in self.files)

    def canonical(self) -> bytes:
        """The manifest as canonical JSON (sorted, no whitespace): what its hash covers."""
        marks = dict(self.evidence)
        runbook = self.runbook_manifest
        doc = {
            "instance": self.instance, "root": self.root, "extras": sorted(self.extras),
            "cells": [{"cell": c.cell, "exists": c.exists, "refused": sorted(c.refused),
                       "files": sorted([f.path, f.size, f.sha256] for f in c.files),
                       "evidence": marks[c.cell].canonical() if c.cell in marks else None}
                      for c in sorted(self.cells, key=lambda c: c.cell)],
            "runbook_manifest": [runbook.size, runbook.sha256] if runbook else None,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical manifest: names the exact verified state."""
        return hashlib.sha256(self.canonical()).hexdigest()

    def cell(self, name: str) -> CellListing | None:
        """The listing of one cell."""
        return next((c for c in self.cells if c.cell == name), None)

    def evidence_of(self, name: str) -> Evidence:
        """The queue-log evidence of one cell (no queue log at all when none was read)."""
        return dict(self.evidence).get(name, Evidence(Mark.NO_QUEUE_LOG))


class CellStatus(Enum):
    """Where one expected cell stands in verification."""

    OK = "ok"
    """FINISHED exit=0 for its latest run, and every file pulled, hashed and loaded."""
    ERROR = "error"
    """Its files are missing, differ from the manifest, or do not load with content."""
    FAILED_ON_BOX = "failed on box"
    """FINISHED with a non-zero exit code: its files are not a finished result."""
    RUNNING = "running"
    """STARTED with no FINISHED mark yet: its files are still being written."""
    UNPROVEN = "unproven"
    """No evidence that its latest run finished (no queue log, no mark): never OK."""
    EXCLUDED = "excluded"
    """Removed from N by the user, who typed its name."""


EXCLUDABLE = frozenset({CellStatus.FAILED_ON_BOX, CellStatus.UNPROVEN, CellStatus.RUNNING})
"""Cells the user may remove from N by typing the name: the ones without a finished result.
An ERROR cell is not: its result exists and must be pulled again, not written off."""


@dataclass(frozen=True)
class FailureCause:
    """The classified cause of a cell that failed on the box (rule id, class, first line)."""

    rule: str
    klass: str
    title: str
    excerpt: str = ""

    @property
    def text(self) -> str:
        """`CUDA out of memory (PyTorch allocator) [M2]`."""
        return f"{self.title} [{self.rule}]" if self.rule else self.title


@dataclass(frozen=True)
class CellVerdict:
    """One cell's verification: OK with its headline metric, or why not."""

    cell: str
    status: CellStatus
    reasons: tuple[str, ...] = ()
    bytes: int = 0
    metric: str = ""
    ended: bool = False
    """The queue log proves the cell's latest run ended (FINISHED, any exit code)."""
    cause: FailureCause | None = None
    """For a cell that failed on the box: what the classifier found in its log."""

    @property
    def reason(self) -> str:
        """All reasons in one line."""
        return "; ".join(self.reasons)


def reconcile(expected: Sequence[str], manifest: Manifest) -> dict[str, list[str]]:
    """Roster problems per cell (before any byte is pulled): a missing folder, a zero-byte
    `best.pth`, a missing `best_metrics.json`, refused entries. `""` holds the extra folders."""
    problems: dict[str, list[str]] = {name: [] for name in expected}
    for name in expected:
        listing = manifest.cell(name)
        if listing is None or not listing.exists:
            problems[name].append(f"missing directory {manifest.root}/{name}/")
            continue
        best = listing.file("best.pth")
        if best is None:
            problems[name].append("best.pth missing")
        elif best.size == 0:
            problems[name].append("best.pth is zero bytes")
        if listing.file("best_metrics.json") is None:
            problems[name].append("best_metrics.json missing")
        for refused in listing.refused:
            shown = visible(refused)
            if plain_path(refused):
                problems[name].append(f"not a regular file (refused): {shown}")
            else:
                problems[name].append(f"not an ordinary file name, not pulled (a dot-folder such "
                                      f"as .git/, a control character, or too long): {shown}")
    if manifest.extras:
        problems[""] = [f"unexpected extra directory: {name}/" for name in manifest.extras]
    return problems


@dataclass(frozen=True)
class Verification:
    """The outcome for one instance: verdicts, counts, and the manifest it was checked against."""

    instance: str
    manifest_digest: str
    verdicts: tuple[CellVerdict, ...]
    bytes_pulled: int
    verified_at: float
    extras: tuple[str, ...] = field(default=())
    blockers: tuple[str, ...] = field(default=())
    """Problems of the instance as a whole that forbid N/N (e.g. the runbook's own
    PULL_MANIFEST.json disagrees with what the cockpit hashed)."""

    @property
    def expected(self) -> int:
        """N: expected cells minus the ones the user excluded explicitly."""
        return sum(v.status is not CellStatus.EXCLUDED for v in self.verdicts)

    @property
    def loaded(self) -> int:
        """Cells whose every file matched and whose checkpoints loaded safely."""
        return sum(v.status is CellStatus.OK for v in self.verdicts)

    @property
    def excluded(self) -> tuple[CellVerdict, ...]:
        """Cells the user removed from N, with the reason recorded."""
        return tuple(v for v in self.verdicts if v.status is CellStatus.EXCLUDED)

    @property
    def complete(self) -> bool:
        """N/N with N >= 1 and nothing blocking: the only state that unlocks an action that
        destroys data."""
        return self.expected >= 1 and self.loaded == self.expected and not self.blockers

    @property
    def running(self) -> tuple[str, ...]:
        """Cells (not excluded) whose latest run is not proven to have ended."""
        ended = (CellStatus.EXCLUDED, CellStatus.OK, CellStatus.FAILED_ON_BOX)
        return tuple(v.cell for v in self.verdicts if v.status not in ended and not v.ended)

    def excluding(self, cell: str, reason: str) -> Verification:
        """The same verification with `cell` removed from N by the user (reason recorded)."""
        verdicts = tuple(CellVerdict(v.cell, CellStatus.EXCLUDED, (reason,), cause=v.cause)
                         if v.cell == cell else v for v in self.verdicts)
        return Verification(self.instance, self.manifest_digest, verdicts, self.bytes_pulled,
                            self.verified_at, self.extras, self.blockers)

    @property
    def summary(self) -> str:
        """`7/8 loaded` (plus how many were excluded)."""
        text = f"{self.loaded}/{self.expected} loaded"
        if self.excluded:
            text += f" ({len(self.excluded)} excluded)"
        if self.blockers:
            text += f", {len(self.blockers)} blocking problem(s)"
        return text


def headline_metric(doc: object, prefer: str | None = None) -> str:
    """`epoch=12 psnr=27.31` from a best_metrics.json document (empty when nothing fits).

    The key is, in order: `prefer` (the sweep's `metric:`), the document's own `"metric"` key
    when it names one (`{"metric": "val_acc", "val_acc": 0.91}`), then HEADLINE_KEYS."""
    if not isinstance(doc, dict):
        return ""
    parts = []
    named = doc.get("metric")
    wanted = [k for k in (prefer, named) if isinstance(k, str) and k] + list(HEADLINE_KEYS)
    epoch = doc.get("epoch")
    if isinstance(epoch, int | float) and not isinstance(epoch, bool):
        parts.append(f"epoch={epoch:g}")
    numbers = {k: v for k, v in doc.items() if isinstance(k, str) and not isinstance(v, bool)
               and isinstance(v, int | float) and k != "epoch"}
    folded = {k.lower(): k for k in numbers}
    for key in wanted:
        found = key if key in numbers else folded.get(key.lower())
        if found is not None:
            parts.append(f"{found}={numbers[found]:.4g}")
            break
    return " ".join(parts)


RUNBOOK_MANIFEST = "PULL_MANIFEST.json"
"""The runbook's own manifest (its build_pull_manifest.py) at the durable root."""
RUNBOOK_MARKER = "PULL_VERIFIED.json"
"""The runbook's own marker (its verify_local.py): shown when present, never trusted."""
RUNBOOK_SCHEMA = "remote-gpu-trainer/PULL/v1"
MAX_RUNBOOK_PROBLEMS = 20
"""Differences listed one by one; the rest are counted (a wholly different manifest would
otherwise flood the screen)."""


def runbook_problems(doc: object, manifest: Manifest, expected: Sequence[str]) -> list[str]:
    """Where the runbook's PULL_MANIFEST.json disagrees with what the cockpit hashed.

    Every file it lists under an expected cell must be in the cockpit's manifest with the same
    size and SHA-256, and every file the cockpit hashed must be in it; its roster
    (`top_level_dirs`) must be the queue's. Any difference blocks N/N: one of the two is not
    describing what is on the box now (a cell re-run after the manifest was built, or a
    manifest built over the wrong folder)."""
    if not isinstance(doc, dict) or doc.get("schema") != RUNBOOK_SCHEMA:
        return [f"{RUNBOOK_MANIFEST} is not the runbook's schema {RUNBOOK_SCHEMA!r}"]
    entries = doc.get("files")
    if not isinstance(entries, list):
        return [f"{RUNBOOK_MANIFEST} has no file list"]
    problems: list[str] = []
    theirs: dict[str, tuple[object, object]] = {}
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str):
            theirs[entry["path"]] = (entry.get("bytes"), str(entry.get("sha256", "")).lower())
    ours = {f"{f.cell}/{f.path}": (f.size, f.sha256) for f in manifest.files}
    wanted = set(expected)
    for path in sorted(set(theirs) | set(ours)):
        if path.split("/", 1)[0] not in wanted:
            continue
        if path not in ours:
            problems.append(f"{RUNBOOK_MANIFEST} lists {visible(path)}, which is not on the box now")
        elif path not in theirs:
            problems.append(f"{visible(path)} is on the box but not in {RUNBOOK_MANIFEST}")
        elif theirs[path] != ours[path]:
            problems.append(f"{visible(path)}: size or SHA-256 differs from {RUNBOOK_MANIFEST} "
                            f"(changed after the runbook's manifest was built)")
    dirs = doc.get("top_level_dirs")
    if isinstance(dirs, list):
        missing = sorted(wanted - {d for d in dirs if isinstance(d, str)})
        if missing:
            problems.append(f"{RUNBOOK_MANIFEST} does not list cell(s) "
                            f"{', '.join(visible(m) for m in missing[:10])}")
    if len(problems) > MAX_RUNBOOK_PROBLEMS:
        problems = [*problems[:MAX_RUNBOOK_PROBLEMS],
                    f"… and {len(problems) - MAX_RUNBOOK_PROBLEMS} more differences"]
    return problems
