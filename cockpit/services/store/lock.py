"""One writer per store: an exclusive `flock` on `<db>.lock`, which also says who holds it.

The writing process (`cockpit watch`, or a TUI that records because no watcher runs) opens
`<db>.lock`, takes `LOCK_EX | LOCK_NB` on it and writes its pid, start time, role and host as
JSON into it. The kernel drops the lock when the process ends in any way (exit, crash,
`kill -9`), so a stale file never blocks a new writer, and `find_writer` never trusts the
file's contents alone: it asks the kernel, with a non-blocking shared lock, whether anyone
still holds it. The JSON only says who that is.

`flock` locks belong to an open file description, so a second `open` in the same process
conflicts like another process would (the tests rely on that). Over NFS `flock` may be
emulated or local-only; keep the store on a local disk (the XDG data folder is).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

MAX_LOCK_BYTES = 4096
"""Bytes of the lock file read: it holds one small JSON object; anything longer is not ours."""
MAX_FIELD = 200
"""Characters kept of the role and host named in the lock file (another user could write it)."""
LOCK_TRIES = 5
LOCK_RETRY_S = 0.02
"""A writer retries the lock this often, this far apart, before giving up (see `find_writer`)."""


def lock_path(db_path: Path) -> Path:
    """The lock file beside the DB."""
    return db_path.with_name(db_path.name + ".lock")


@dataclass(frozen=True)
class WriterInfo:
    """The process that holds a store's writer lock, as it described itself."""

    pid: int | None
    started_at: float | None
    role: str
    host: str

    def describe(self) -> str:
        """`cockpit watch (pid 4242 on vps1, since 2026-11-24 10:00 UTC)`."""
        since = (time.strftime(" since %Y-%m-%d %H:%M UTC", time.gmtime(self.started_at))
                 if self.started_at is not None else "")
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        return f"cockpit {self.role or 'writer'} ({pid} on {self.host or '?'}{since})"


class WriterBusy(Exception):
    """Another process already writes this store."""

    def __init__(self, path: Path, info: WriterInfo | None) -> None:
        who = info.describe() if info is not None else "another process"
        super().__init__(f"{who} already writes {path}")
        self.path = path
        self.info = info


def _read_info(fd: int) -> WriterInfo:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, MAX_LOCK_BYTES)
    try:
        doc = json.loads(raw.decode("utf-8", errors="replace"))
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    pid = doc.get("pid")
    started = doc.get("started_at")
    return WriterInfo(
        pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        float(started) if isinstance(started, int | float) and not isinstance(started, bool)
        else None,
        str(doc.get("role", ""))[:MAX_FIELD], str(doc.get("host", ""))[:MAX_FIELD])


class WriterLock:
    """The held writer lock; `release()` (or process exit) lets the next writer in."""

    def __init__(self, db_path: Path, role: str) -> None:
        self.path = lock_path(db_path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        for attempt in range(LOCK_TRIES):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt + 1 < LOCK_TRIES:
                    # `find_writer` holds a shared lock for a few microseconds: try again
                    # briefly before calling the store busy.
                    time.sleep(LOCK_RETRY_S)
                    continue
                info = _read_info(fd)
                os.close(fd)
                raise WriterBusy(db_path, info) from None
        self.fd: int | None = fd
        self.info = WriterInfo(os.getpid(), time.time(), role, socket.gethostname())
        body = json.dumps({"pid": self.info.pid, "started_at": self.info.started_at,
                           "role": role, "host": self.info.host}).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, body, 0)

    def release(self) -> None:
        """Unlock (idempotent). The file stays: removing it would race a writer that just
        opened it, and its stale contents mean nothing without the lock."""
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def find_writer(db_path: Path) -> WriterInfo | None:
    """Who writes the store at `db_path` now, or None when no live process holds the lock.

    Asks the kernel (a non-blocking shared `flock`), not the pid in the file: a writer that was
    killed leaves its JSON behind but not its lock."""
    path = lock_path(db_path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
