"""The append-only audit log of irreversible decisions: exclusions and teardowns.

JSON lines in `$XDG_DATA_HOME/cockpit/audit.jsonl` (`COCKPIT_DATA_DIR` overrides the
folder). Each record is one `write` on an O_APPEND descriptor, then fsynced, so concurrent
writers never interleave within a line and a crash loses at most the line being written.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from cockpit.services.config.paths import data_dir


def audit_path() -> Path:
    """The audit log file."""
    return data_dir() / "audit.jsonl"


def append_audit(record: dict[str, Any], path: Path | None = None) -> Path:
    """Append one record (a `time` field is added) and fsync it."""
    target = path or audit_path()
    line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **record},
                      ensure_ascii=False, sort_keys=True) + "\n"
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return target


def read_audit(path: Path | None = None) -> list[dict[str, Any]]:
    """Every record, oldest first (for the UI and tests)."""
    target = path or audit_path()
    if not target.exists():
        return []
    return [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines() if line]
