"""Immutable, timestamped snapshots of one box, as parsed from one probe record.

Every measurement that can be missing is typed `X | NA`: a GPU that reports `[N/A]` for
power, a driver that is not loaded, a mount that does not exist. `NA` carries the reason
so the UI can say *why* a number is missing instead of showing a misleading zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class NA:
    """Not available, with the reason (e.g. `[N/A]`, `[Not Supported]`, `nvidia-smi missing`)."""

    reason: str

    def __str__(self) -> str:
        return "n/a"


def value_or(value: T | NA, default: T) -> T:
    """`value` unless it is NA."""
    return default if isinstance(value, NA) else value


class GpuStatus(Enum):
    """Whether GPU numbers could be read at all."""

    OK = "ok"
    ABSENT = "absent"  # no nvidia-smi / no NVML on this host
    FAILED = "failed"  # present but failing (driver not loaded, ...)


@dataclass(frozen=True)
class GpuProcess:
    """A compute process on a GPU as nvidia-smi / NVML sees it."""

    gpu_uuid: str
    pid: int
    used_mib: float | NA


@dataclass(frozen=True)
class MigDevice:
    """One MIG device of a GPU, as `nvidia-smi -L` lists it under its parent:
    `  MIG 3g.40gb     Device  0: (UUID: MIG-...)`."""

    gpu_index: int
    profile: str
    """The MIG profile name (`1g.10gb`, `3g.40gb`, `1c.3g.20gb`)."""
    device: int
    """The device's number under its parent GPU (0 to 6 on A100/H100)."""
    uuid: str


@dataclass(frozen=True)
class Gpu:
    """One GPU (or MIG-enabled parent GPU)."""

    index: int
    name: str
    uuid: str
    util_pct: float | NA
    mem_used_mib: float | NA
    mem_total_mib: float | NA
    temp_c: float | NA
    power_w: float | NA
    power_limit_w: float | NA
    sm_clock_mhz: float | NA
    sm_clock_max_mhz: float | NA
    mig_mode: str | NA = NA("not queried")
    processes: tuple[GpuProcess, ...] = ()
    mig_devices: tuple[MigDevice, ...] = ()
    """Its MIG devices, when MIG is enabled and `nvidia-smi -L` was asked for them."""

    @property
    def mig_enabled(self) -> bool:
        """Whether MIG mode is on (`mig.mode.current` says `Enabled`)."""
        return self.mig_mode == "Enabled"

    @property
    def mem_pct(self) -> float | NA:
        """Memory used as a percentage of total, when both are known."""
        if isinstance(self.mem_used_mib, NA) or isinstance(self.mem_total_mib, NA):
            return NA("memory not reported")
        if self.mem_total_mib <= 0:
            return NA("zero total memory")
        return 100.0 * self.mem_used_mib / self.mem_total_mib


@dataclass(frozen=True)
class GpuReading:
    """All GPUs of a host, or why there are none."""

    status: GpuStatus
    gpus: tuple[Gpu, ...] = ()
    message: str = ""
    """Why there are no readings (FAILED, ABSENT): nvidia-smi's own words."""
    errors: tuple[str, ...] = ()
    """nvidia-smi's error lines printed next to the rows of the GPUs that answered (e.g.
    `Unable to determine the device handle for GPU0000:41:00.0: Unknown Error` for one GPU
    of eight): the readings of the healthy GPUs are kept, the bad one is named here."""
    rc: int | None = None
    """nvidia-smi's exit status (None when the record did not say)."""
    expected: int | None = None
    """GPUs nvidia-smi enumerated: rows read plus GPUs named by an error line."""
    no_devices: bool = False
    """nvidia-smi said `No devices were found`: a fault only where GPUs are expected."""
    mig_error: str = ""
    """Why MIG devices could not be listed (`nvidia-smi -L` failed) while MIG is on."""

    @property
    def partial(self) -> bool:
        """Some GPUs answered and nvidia-smi reported trouble (a failing GPU, an exit status)."""
        return self.status is GpuStatus.OK and bool(self.gpus) and (
            bool(self.errors) or self.rc not in (0, None))


@dataclass(frozen=True)
class Mount:
    """Bytes and inodes of the filesystem holding `path` (from `df -B1` and `df -i`)."""

    path: str
    target: str | NA
    fstype: str | NA
    bytes_total: int | NA
    bytes_used: int | NA
    bytes_avail: int | NA
    inodes_total: int | NA
    inodes_used: int | NA
    inodes_avail: int | NA
    error: str = ""

    @property
    def bytes_pct(self) -> float | NA:
        """Percentage of space in use, computed like df: used / (used + avail).

        Avail, not size minus used: ext4 reserves blocks, so size - used overstates room.
        """
        if isinstance(self.bytes_used, NA) or isinstance(self.bytes_avail, NA):
            return NA(self.error or "not reported")
        denom = self.bytes_used + self.bytes_avail
        return NA("empty filesystem") if denom <= 0 else 100.0 * self.bytes_used / denom

    @property
    def inodes_pct(self) -> float | NA:
        """Percentage of inodes in use; NA on filesystems without inode accounting."""
        if isinstance(self.inodes_used, NA) or isinstance(self.inodes_avail, NA):
            return NA(self.error or "not reported")
        denom = self.inodes_used + self.inodes_avail
        return NA("no inode accounting") if denom <= 0 else 100.0 * self.inodes_used / denom


@dataclass(frozen=True)
class Memory:
    """Memory of the box's cgroup (v2 or v1), or of the host when there is no limit."""

    source: str  # "cgroup-v2", "cgroup-v1", "meminfo" or "none"
    current_bytes: int | NA
    max_bytes: int | NA  # NA("unlimited") when the cgroup has no limit
    oom_kills: int | NA

    @property
    def pct(self) -> float | NA:
        """Current as a percentage of max."""
        if isinstance(self.current_bytes, NA) or isinstance(self.max_bytes, NA):
            return NA("no limit")
        return NA("zero limit") if self.max_bytes <= 0 else 100.0 * self.current_bytes / self.max_bytes


@dataclass(frozen=True)
class TmuxSession:
    """A tmux session on the box."""

    name: str
    windows: int
    created: float  # remote epoch seconds


@dataclass(frozen=True)
class FileStat:
    """Size and modification time of a remote file (or why it could not be read)."""

    path: str
    size: int | NA
    mtime: float | NA
    inode: int | NA = NA("not read")
    name_b64: str = ""
    """The path's exact bytes, base64, when `path` cannot carry them: a name that is not
    UTF-8 (shown with U+FFFD) or holds a newline or another control character. The probe is
    then asked for the file by these bytes, never by a line of text."""


@dataclass(frozen=True)
class LogChunk:
    """Bytes appended to a remote log since the last read, starting at `offset`.

    `reset` is True when the file was truncated or replaced (rotation): the client must
    drop what it believed about the file and start again at `offset` (0).
    """

    path: str
    inode: int
    offset: int
    data: bytes
    reset: bool = False


@dataclass(frozen=True)
class QueueFacts:
    """Evidence about the queue: live processes, log files and the newest checkpoint."""

    process_pids: tuple[int, ...] | NA
    queue_log: FileStat | None
    run_logs: tuple[FileStat, ...]
    newest_checkpoint: FileStat | None
    queue_text: str | None = None  # the queue file, when it changed since the last record
    queue_stat: FileStat | None = None
    queue_marks: str | None = None
    """STARTING/FINISHED/QUEUE DONE lines of the whole queue log (first contact only)."""


class Reachability(Enum):
    """How the cockpit's *connection* to a box stands. Says nothing about the remote run."""

    CONNECTING = "connecting"
    CONNECTED = "connected"
    STALE = "stale"  # was reachable, the link is gone; the run may be fine
    UNREACHABLE = "unreachable"  # never reached in this session
    NEEDS_APPROVAL = "needs-approval"  # unknown host key; user must approve the fingerprint
    KEY_CHANGED = "key-changed"  # known host presented a different key: refused
    AUTH_FAILED = "auth-failed"


@dataclass(frozen=True)
class HostKeyInfo:
    """A presented host key: algorithm and SHA-256 fingerprint, plus the known ones."""

    algorithm: str
    fingerprint: str
    known_fingerprints: tuple[str, ...] = ()


@dataclass(frozen=True)
class HostState:
    """Connection state of one instance at a moment."""

    instance: str
    reachability: Reachability
    since: float  # epoch seconds when this state began (the "stale since T")
    detail: str = ""
    host_key: HostKeyInfo | None = None
    attempts: int = 0
    bad_records: int = 0
    """Records (or sections of records) from this box that could not be parsed, so far.
    Watching goes on; the count and the latest reason are shown on the box."""
    bad_reason: str = ""
    """Why the latest bad record was bad (control characters already made visible)."""
    crashes: int = 0
    """Times this box's watcher died of an unexpected error and was restarted."""


@dataclass(frozen=True)
class HostSnapshot:
    """Everything one probe record said about a box, with when it was observed."""

    instance: str
    observed_at: float  # local epoch seconds when the record was complete
    remote_time: float | NA
    seq: int
    hostname: str
    gpu: GpuReading
    mounts: tuple[Mount, ...]
    memory: Memory
    tmux: tuple[TmuxSession, ...] | NA
    queue: QueueFacts
    log_chunks: tuple[LogChunk, ...] = field(default=())
    probe_ms: float | NA = NA("not measured")
    utc_offset: float | NA = NA("not reported")
    """The remote's UTC offset in seconds (`date +%z`): log timestamps are remote local time."""
    uptime_s: float | NA = NA("not reported")
    """Seconds since the box booted (`/proc/uptime`): what it has been billing for, at least."""
    parents: dict[int, int] | NA | None = None
    """pid -> parent pid of every process, when asked this tick (to judge zombie VRAM)."""
    kernel_lines: tuple[str, ...] | NA | None = None
    """Xid and OOM-killer lines of the kernel log, when asked this tick; NA if unreadable."""
    bad: tuple[str, ...] = ()
    """Sections of this record that could not be parsed, each with the reason; the rest of
    the record is used as usual (one odd section never costs the whole box its data)."""
