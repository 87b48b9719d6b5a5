"""The probe protocol: build a tick's request, read its framed record, track log offsets.

The remote side is `probe.sh` (POSIX sh, read-only, exits when stdin closes). The client
owns all state (log offsets, which files to follow) so a restarted probe, or a reconnect,
continues exactly where the last record left off.
"""

from __future__ import annotations

import base64
import shlex
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
LOG_BUDGET = 262144
"""Bytes of log text asked for per tick, summed over all logs (`budget_per_tick` in
probe.sh, which enforces it too). A record must fit the SSH channel's 2 MiB window or it is
never read: 40 run logs at 64 KiB each made every record too big. The budget is shared out
fairly (small needs in full, the rest split evenly) and logs catch up over the next ticks."""
MAX_LOGS_PER_TICK = 64
"""Logs read in one tick (each costs the box a stat, a tail and a base64); with more logs
pending, those served longest ago go first, so every log is read within a few ticks."""
MASTER_READ = 16384
"""The master log is asked for on every tick (its marks are the queue's state and must not
wait for the next listing) with at least this many bytes of the budget."""
MAX_CURSOR = 1 << 60
"""An inode or offset past this came from a confused or hostile box: start that log again
rather than send the probe a number its shell arithmetic cannot take."""


@cache
def probe_script() -> str:
    """The POSIX sh source of the remote probe."""
    return (Path(__file__).with_name("probe.sh")).read_text(encoding="utf-8")


PROBE_NAME = "cockpit-probe"
"""What `ps`/`htop` on the box show for the probe (its argv[0] where the login shell can set
it, and always its $0): a short, recognisable line instead of 14 KB of script."""
SCRIPT_END = "#cockpit-probe-script-end"
"""The line that ends the script sent on stdin (probe.sh never holds this line)."""
BOOT = ('N=$(printf "\\nx"); N=${N%x}; s=; while IFS= read -r l && [ "$l" != "'
        + SCRIPT_END + '" ]; do s="$s$l$N"; done; eval "$s"')
"""The whole of the probe's command line: read the script from stdin up to `SCRIPT_END`
(POSIX `read` takes a pipe byte by byte, so the requests after it stay unread), then run it.
One line, no newline in argv. Nothing is written on the box: the script lives only in the
shell's memory."""


def probe_argv(with_gpu: bool) -> list[str]:
    """argv of a probe: `cockpit-probe -c BOOT cockpit-probe 0|1`, run by /bin/sh (argv[0] is
    the name `ps` shows; the script comes on stdin, `probe_stdin()`)."""
    return [PROBE_NAME, "-c", BOOT, PROBE_NAME, "1" if with_gpu else "0"]


def probe_command(with_gpu: bool = True) -> str:
    """The single remote command that starts a probe (one exec per connection, not per tick).

    Whatever the login shell, /bin/sh runs it. Where bash exists its `exec -a` names the
    probe's shell `cockpit-probe` (`ps`: `cockpit-probe -c N=$(printf …` ); elsewhere
    (busybox) a plain exec (`/bin/sh -c N=$(printf … cockpit-probe 1`). Either way the 14 KB
    script is not in argv: `probe_stdin()` is written to the process's stdin first."""
    flag = "1" if with_gpu else "0"
    named = 'exec -a ' + PROBE_NAME + ' /bin/sh -c "$0" ' + PROBE_NAME + ' "$1"'
    inner = (f"if command -v bash >/dev/null 2>&1; then exec bash -c {shlex.quote(named)} "
             f"{shlex.quote(BOOT)} {flag}; else exec /bin/sh -c {shlex.quote(BOOT)} "
             f"{PROBE_NAME} {flag}; fi")
    return f"exec /bin/sh -c {shlex.quote(inner)}"


def probe_stdin() -> bytes:
    """What the client writes before its first request: the script, then `SCRIPT_END`."""
    script = probe_script()
    if not script.endswith("\n"):
        script += "\n"
    return f"{script}{SCRIPT_END}\n".encode()


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


def share_budget(needs: list[int], budget: int) -> list[int]:
    """Split `budget` bytes over logs that need `needs` bytes each (max-min fair).

    Smaller needs are met in full; what is left is split evenly among the larger ones. The
    grants never sum past `budget`.
    """
    grants = [0] * len(needs)
    left = budget
    order = sorted(range(len(needs)), key=lambda i: needs[i])
    for rank, i in enumerate(order):
        share = left // (len(needs) - rank)
        grants[i] = min(needs[i], share)
        left -= grants[i]
    return grants


def _single_line(text: str) -> bool:
    return "\n" not in text and "\r" not in text


@dataclass
class LogCursor:
    """Where the client is in one remote log."""

    inode: int = 0
    offset: int = -FIRST_READ_TAIL


@dataclass
class ProbePlan:
    """Per-host request state: what to ask for and how far each log has been read.

    State is kept only for logs the box lists now (and the master log): log names that
    change on every tick must not grow it.
    """

    instance: Instance
    profile: Profile
    seq: int = 0
    cursors: dict[str, LogCursor] = field(default_factory=dict)
    _sizes: dict[str, FileStat] = field(default_factory=dict)
    _served: dict[str, int] = field(default_factory=dict)
    _asked: set[str] = field(default_factory=set)
    _queue_stat: FileStat | None = None
    _queue_changed: bool = True
    queue_text: str | None = None
    """The queue file as last read; it is re-read only when its size or mtime changes."""
    gpu_apps: bool = False
    """The last record listed GPU processes: ask for the process tree to place them."""
    rebase_every: int = 0
    """Ask for the master log's marks again every this many ticks (0: only on first contact),
    so a record that can start a replay (a *base*) recurs: `cockpit watch` keeps records from
    the latest base for TUIs that follow it instead of probing the boxes themselves."""
    marks: str = ""
    """Why the latest request starts a base: `first` (first contact), `rebase`, or "" (an
    instance without a master log has no marks to ask for; its first record is its base)."""

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
        self.marks = ""
        if inst.queue_log and self.cursors.get(inst.queue_log, LogCursor()).offset < 0:
            self.marks = "first"
        elif not inst.queue_log and self.seq == 1:
            self.marks = "first"  # no master log: any record can start a replay
        elif self.rebase_every > 0 and self.seq % self.rebase_every == 0:
            self.marks = "rebase"
        if self.marks and inst.queue_log:
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
        # A path from the sweep is one request line; one with a line break is never sent.
        lines = [line for line in lines if _single_line(line)]
        lines += self._log_requests()
        lines.append(f"end {self.seq}")
        return self.seq, ("\n".join(lines) + "\n").encode("utf-8", errors="replace")

    def _log_requests(self) -> list[str]:
        """`read`/`read64` lines for the logs with new bytes, within `LOG_BUDGET`."""
        queue_log = self.instance.queue_log
        wanted: list[tuple[str, int]] = []
        if queue_log:
            wanted.append((queue_log, max(MASTER_READ, self._need(queue_log))))
        wanted += [(path, self._need(path)) for path in sorted(self._sizes) if path != queue_log]
        wanted = [(path, need) for path, need in wanted if need > 0]
        if len(wanted) > MAX_LOGS_PER_TICK:
            first = wanted[:1] if queue_log and wanted[0][0] == queue_log else []
            rest = sorted(wanted[len(first):], key=lambda w: self._served.get(w[0], -1))
            wanted = first + rest[: MAX_LOGS_PER_TICK - len(first)]
        grants = share_budget([need for _, need in wanted], LOG_BUDGET)
        self._asked = set()
        out = []
        for (path, _), grant in zip(wanted, grants, strict=True):
            if grant <= 0:
                continue
            cur = self.cursors.setdefault(path, LogCursor())
            stat = self._sizes.get(path)
            exact = stat.name_b64 if stat is not None else ""
            if not exact and not (path.isprintable() and _single_line(path)):
                exact = base64.b64encode(path.encode("utf-8", errors="replace")).decode()
            if exact:
                out.append(f"read64 {cur.inode} {cur.offset} {grant} {exact}")
            else:
                out.append(f"read {cur.inode} {cur.offset} {grant} {path}")
            self._asked.add(path)
            self._served[path] = self.seq
        return out

    def _need(self, path: str) -> int:
        """Bytes of `path` not yet read, as far as the last listing tells (unknown: all the
        budget; 0: nothing new, so it is not asked for)."""
        cur = self.cursors.get(path)
        stat = self._sizes.get(path)
        size = None if stat is None or isinstance(stat.size, NA) else stat.size
        inode = None if stat is None or isinstance(stat.inode, NA) else stat.inode
        if size is None or inode is None:
            return LOG_BUDGET
        if cur is None or cur.offset < 0:
            return max(1, min(size, FIRST_READ_TAIL if cur is None else -cur.offset))
        if inode != cur.inode or size < cur.offset:
            return max(1, size)  # replaced or truncated: the probe starts it again
        return size - cur.offset

    def absorb(self, snap: HostSnapshot) -> None:
        """Advance cursors past the bytes received and remember current log sizes."""
        for chunk in snap.log_chunks:
            if chunk.path not in self._asked:
                continue  # never asked for: a confused or hostile box
            end = chunk.offset + len(chunk.data)
            if 0 <= chunk.inode < MAX_CURSOR and chunk.offset >= 0 and end < MAX_CURSOR:
                self.cursors[chunk.path] = LogCursor(chunk.inode, end)
            else:
                self.cursors[chunk.path] = LogCursor()
        sizes: dict[str, FileStat] = {}
        queue_log = snap.queue.queue_log
        if self.instance.queue_log and queue_log is not None:
            sizes[self.instance.queue_log] = queue_log
        for stat in snap.queue.run_logs:
            if not isinstance(stat.size, NA) and not isinstance(stat.inode, NA):
                sizes[stat.path] = stat
        self._sizes = sizes
        keep = set(sizes) | ({self.instance.queue_log} if self.instance.queue_log else set())
        for table in (self.cursors, self._served):
            for path in [p for p in table if p not in keep]:
                del table[path]
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
