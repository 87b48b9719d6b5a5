"""The probe protocol: build a tick's request, read its framed record, track log offsets.

The remote side is `probe.sh` (POSIX sh, read-only, exits when stdin closes). The client
owns all state (log offsets, which files to follow) so a restarted probe, or a reconnect,
continues exactly where the last record left off.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from cockpit.models.profile import Profile
from cockpit.models.snapshot import NA, FileStat, HostSnapshot, LogChunk
from cockpit.models.sweep import Instance

KMSG_EVERY = 30
"""Ask for the kernel's Xid lines on the first tick and every 30th (a minute at 2 s)."""
FIRST_READ_TAIL = 65536
"""On first contact with a log, read only its last 64 KiB (attaching to a long run)."""


@cache
def probe_script() -> str:
    """The POSIX sh source of the remote probe."""
    return (Path(__file__).with_name("probe.sh")).read_text(encoding="utf-8")


def probe_command(with_gpu: bool = True) -> str:
    """The single remote command that starts a probe (one exec per connection, not per tick)."""
    return f"exec /bin/sh -c {shlex.quote(probe_script())} cockpit-probe {1 if with_gpu else 0}"


def watched_mounts(instance: Instance, profile: Profile) -> list[str]:
    """Profile tier paths (overridden per instance), extra mounts and the sweep's paths."""
    paths = [instance.mounts.get(tier.id, tier.path) for tier in profile.storage.tiers]
    paths += list(instance.extra_mounts)
    paths += [p for p in (instance.durable_root, instance.run_logs, instance.checkpoints) if p]
    out: list[str] = []
    for path in paths:
        # Profile paths such as /lambda/nfs/<name>, /scratch/$USER or "off-box" are not
        # mount points until the sweep names the real path.
        if not path.startswith(("/", "~")) or any(c in path for c in "<$(") or path in out:
            continue
        out.append(path)
    return out


@dataclass
class LogCursor:
    """Where the client is in one remote log."""

    inode: int = 0
    offset: int = -FIRST_READ_TAIL


@dataclass
class ProbePlan:
    """Per-host request state: what to ask for and how far each log has been read."""

    instance: Instance
    profile: Profile
    seq: int = 0
    cursors: dict[str, LogCursor] = field(default_factory=dict)
    _sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    _queue_stat: FileStat | None = None
    _queue_changed: bool = True
    queue_text: str | None = None
    """The queue file as last read; it is re-read only when its size or mtime changes."""
    gpu_apps: bool = False
    """The last record listed GPU processes: ask for the process tree to place them."""

    def request(self) -> tuple[int, bytes]:
        """The next tick's request and its sequence number."""
        self.seq += 1
        inst = self.instance
        lines = [f"tick {self.seq}"]
        lines += [f"mount {m}" for m in watched_mounts(inst, self.profile)]
        if inst.queue_log:
            lines.append(f"stat queue_log {inst.queue_log}")
        if inst.queue:
            lines.append(f"stat queue {inst.queue}")
            if self._queue_changed:
                lines.append(f"text {inst.queue}")
        if inst.queue_log and self.cursors.get(inst.queue_log, LogCursor()).offset < 0:
            lines.append(f"marks {inst.queue_log}")
        if inst.run_logs:
            lines.append(f"dir {inst.run_logs}")
        if inst.checkpoints:
            lines.append(f"ckpt {inst.checkpoints}")
        if inst.queue:
            lines.append(f"proc {inst.queue}")
        if self.gpu_apps:
            lines.append("ptree")
        if self.seq % KMSG_EVERY == 1:
            lines.append("kmsg")
        for path in self._logs_to_read():
            cur = self.cursors.setdefault(path, LogCursor())
            lines.append(f"log {cur.inode} {cur.offset} {path}")
        lines.append(f"end {self.seq}")
        return self.seq, ("\n".join(lines) + "\n").encode()

    def _logs_to_read(self) -> Iterable[str]:
        wanted = []
        if self.instance.queue_log:
            wanted.append(self.instance.queue_log)
        wanted += sorted(self._sizes)
        for path in dict.fromkeys(wanted):
            cur = self.cursors.get(path)
            size_inode = self._sizes.get(path)
            if cur is None or size_inode is None or cur.offset < 0 or size_inode != (cur.offset, cur.inode):
                yield path

    def absorb(self, snap: HostSnapshot) -> None:
        """Advance cursors past the bytes received and remember current log sizes."""
        for chunk in snap.log_chunks:
            self.cursors[chunk.path] = LogCursor(chunk.inode, chunk.offset + len(chunk.data))
        sizes = {}
        for stat in snap.queue.run_logs:
            if not isinstance(stat.size, NA) and not isinstance(stat.inode, NA):
                sizes[stat.path] = (stat.size, stat.inode)
        self._sizes = sizes
        if snap.queue.queue_text is not None:
            self.queue_text = snap.queue.queue_text
        queue_stat = snap.queue.queue_stat
        self._queue_changed = (
            queue_stat is None or queue_stat != self._queue_stat or self.queue_text is None
        )
        self._queue_stat = queue_stat
        self.gpu_apps = any(gpu.processes for gpu in snap.gpu.gpus)


def end_marker(seq: int) -> bytes:
    """The line that closes record `seq`."""
    return f"@@end {seq}\n".encode()


def chunk_text(chunk: LogChunk) -> str:
    """Decode a log chunk (bytes from the remote) leniently: logs are not always UTF-8."""
    return chunk.data.decode("utf-8", errors="replace")
