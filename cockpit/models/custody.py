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

from cockpit.models.queue import QueueLine

REQUIRED = ("best.pth", "best_metrics.json")
"""What every cell's durable folder must hold (platform-facts §6.4)."""
SAFE_NAME = re.compile(r"^[A-Za-z0-9._-]+$")
"""Cell names that are safe as one path component (platform-facts §4.2)."""
HEADLINE_KEYS = ("psnr", "mAP50", "map50", "dice", "accuracy", "acc", "f1", "loss")


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


@dataclass(frozen=True)
class CellListing:
    """What the remote holds for one expected cell."""

    cell: str
    exists: bool
    files: tuple[FileEntry, ...] = ()
    refused: tuple[str, ...] = ()
    """Entries not pulled: symlinks and anything that is not a regular file."""

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
        doc = {
            "instance": self.instance, "root": self.root, "extras": sorted(self.extras),
            "cells": [{"cell": c.cell, "exists": c.exists, "refused": sorted(c.refused),
                       "files": sorted([f.path, f.size, f.sha256] for f in c.files)}
                      for c in sorted(self.cells, key=lambda c: c.cell)],
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical manifest: names the exact verified state."""
        return hashlib.sha256(self.canonical()).hexdigest()

    def cell(self, name: str) -> CellListing | None:
        """The listing of one cell."""
        return next((c for c in self.cells if c.cell == name), None)


class CellStatus(Enum):
    """Where one expected cell stands in verification."""

    OK = "ok"
    ERROR = "error"
    FAILED_ON_BOX = "failed on box"
    EXCLUDED = "excluded"


@dataclass(frozen=True)
class CellVerdict:
    """One cell's verification: OK with its headline metric, or why not."""

    cell: str
    status: CellStatus
    reasons: tuple[str, ...] = ()
    bytes: int = 0
    metric: str = ""

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
            problems[name].append(f"not a regular file (refused): {refused}")
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
        """N/N with N >= 1: the only state that can unlock an irreversible action."""
        return self.expected >= 1 and self.loaded == self.expected

    def excluding(self, cell: str, reason: str) -> Verification:
        """The same verification with `cell` removed from N by the user (reason recorded)."""
        verdicts = tuple(CellVerdict(v.cell, CellStatus.EXCLUDED, (reason,)) if v.cell == cell else v
                         for v in self.verdicts)
        return Verification(self.instance, self.manifest_digest, verdicts, self.bytes_pulled,
                            self.verified_at, self.extras)

    @property
    def summary(self) -> str:
        """`7/8 loaded` (plus how many were excluded)."""
        text = f"{self.loaded}/{self.expected} loaded"
        if self.excluded:
            text += f" ({len(self.excluded)} excluded)"
        return text


def headline_metric(doc: object) -> str:
    """`epoch=12 psnr=27.31` from a best_metrics.json document (empty when nothing fits)."""
    if not isinstance(doc, dict):
        return ""
    parts = []
    named = doc.get("metric")  # some trainers name their headline key: {"metric": "val_acc"}
    keys = (named, *HEADLINE_KEYS) if isinstance(named, str) else HEADLINE_KEYS
    epoch = doc.get("epoch")
    if isinstance(epoch, int | float) and not isinstance(epoch, bool):
        parts.append(f"epoch={epoch:g}")
    for key in keys:
        value = doc.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            parts.append(f"{key}={value:.4g}")
            break
    return " ".join(parts)
