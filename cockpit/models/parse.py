"""Parse probe records and the raw outputs inside them into snapshots.

Pure functions over text, tested against recorded outputs (tests/data). Every parser is
total: garbage in gives NA values with a reason, never an exception, because a single odd
line from one box must not take down the whole fleet view. Numbers are bounded where they
enter (`MAX_DIGITS`, `MAX_EPOCH_S`), and each section of a record is parsed on its own: one
that fails anyway is named in `HostSnapshot.bad` and the rest of the record is still used.
"""

from __future__ import annotations

import base64
import binascii
import csv
import dataclasses
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from cockpit.models.snapshot import (
    NA,
    FileStat,
    Gpu,
    GpuProcess,
    GpuReading,
    GpuStatus,
    HostSnapshot,
    LogChunk,
    Memory,
    MigDevice,
    Mount,
    QueueFacts,
    TmuxSession,
)
from cockpit.models.text import visible

GPU_FIELDS = (
    "index,name,uuid,utilization.gpu,memory.used,memory.total,temperature.gpu,"
    "power.draw,power.limit,clocks.sm,clocks.max.sm,mig.mode.current"
)
APP_FIELDS = "gpu_uuid,pid,used_memory"

# cgroup v1 reports "no limit" as a huge page-aligned number near 2**63.
_V1_UNLIMITED = 1 << 60

MAX_DIGITS = 32
"""Digits per number a box may send. The largest real value (bytes of a filesystem, an
inode, a pid) has 20; past 4300 digits int() raises, and a 400-digit float field is inf,
which int() cannot take. A longer number is NA("unparsable"), never an exception."""
MAX_NUMBER_CHARS = 2 * MAX_DIGITS + 2
"""A float field's characters: sign, integer and fraction digits, the point."""
MAX_EPOCH_S = 1e11
"""The latest plausible remote time, in epoch seconds (the year 5138). A time beyond it is
NA: datetime and time.localtime() raise on years past 9999, and the screens format times."""
MAX_REASON_CHARS = 160
"""How much of a parse failure's reason is kept for the box's "bad record" line."""


def _clip(text: str, limit: int = 40) -> str:
    """The start of a field for a reason string, controls made visible (it reaches screens)."""
    return visible(text[:limit])


def na_float(text: str) -> float | NA:
    """A number from nvidia-smi, or NA carrying the marker it printed instead."""
    value = text.strip()
    if not value:
        return NA("empty")
    if value.startswith("[") or value.upper() in {"N/A", "NOT SUPPORTED", "UNKNOWN ERROR"}:
        return NA(_clip(value))
    if len(value) > MAX_NUMBER_CHARS:
        return NA(f"unparsable: {len(value)} characters")
    try:
        number = float(value)
    except ValueError:
        return NA(f"unparsable: {_clip(value)}")
    return number if math.isfinite(number) else NA(f"not finite: {_clip(value)}")


def na_time(text: str) -> float | NA:
    """Epoch seconds (`stat %Y`, `date +%s`, `find %T@`), NA when not a plausible time."""
    value = na_float(text)
    if isinstance(value, NA) or abs(value) <= MAX_EPOCH_S:
        return value
    return NA(f"implausible time: {_clip(text.strip())}")


_INT = re.compile(f"-?[0-9]{{1,{MAX_DIGITS}}}")
_FLOAT = re.compile(f"-?[0-9]{{1,{MAX_DIGITS}}}(\\.[0-9]{{1,{MAX_DIGITS}}})?")


def parse_utc_offset(text: str) -> float | NA:
    """`date +%z` output (`+0800`, `-0330`) as seconds east of UTC."""
    match = re.fullmatch(r"([+-])(\d\d)(\d\d)", text.strip())
    if match is None:
        return NA(f"unreadable UTC offset {text.strip()[:16]!r}")
    sign = -1 if match.group(1) == "-" else 1
    return float(sign * (int(match.group(2)) * 3600 + int(match.group(3)) * 60))


def is_int(text: str) -> bool:
    """ASCII digits only (str.isdigit() also accepts characters int() rejects, like '²')."""
    return _INT.fullmatch(text.strip()) is not None


def na_int(text: str) -> int | NA:
    """An integer field (df, stat), or NA for `-` and garbage."""
    value = text.strip()
    if value in {"", "-"}:
        return NA("not reported" if value == "-" else "empty")
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):  # stat %Y may carry a fraction; never inf or 1e999
        return int(float(value))
    return NA(f"unparsable: {_clip(value)}")


MAX_GPUS = 64
"""GPUs read from one box. The largest single boxes have 16 (HGX-2) and the sweep's
`expect_gpu.count` allows 64; rows past this are ignored, never a panel of a million rows."""
MAX_GPU_LINES = 8 * MAX_GPUS
"""Lines of one nvidia-smi answer read: a row or an error line per GPU plus noise, or for
`nvidia-smi -L` a GPU and its up to 7 MIG devices (probe.sh's `gpu_lines` is the same)."""
MAX_GPU_LINE_CHARS = 512
"""Characters of one nvidia-smi line kept. A real row is about 200 (a name and a UUID are at
most 96 each, per NVML's buffer sizes); an error line is about 110."""
MAX_GPU_MESSAGE = 600
"""Characters of nvidia-smi's failure text kept: the longest real one (`NVIDIA-SMI has failed
because ...`) is 157; a few lines of it fit, a flood does not."""
MAX_GPU_ERRORS = 16
"""Error lines kept next to healthy rows (one per failing GPU, as a rule)."""
MAX_GPU_PROCESSES = 4096
"""Compute processes read from one box: 64 per GPU for MAX_GPUS GPUs (a DataLoader-heavy
8-GPU box lists well under 100)."""
MAX_MIG_PER_GPU = 8
"""MIG devices kept per GPU: A100 and H100 make at most 7."""

_FATAL = ("NVIDIA-SMI has failed", "Failed to initialize NVML", "NVML library version",
          "Driver/library version mismatch")
"""nvidia-smi's words when it cannot talk to the driver at all: no GPU is readable."""
_HANDLE = re.compile(r"Unable to (?:determine|detect) the device handle for GPU\s?(?P<which>.*)")
"""A single GPU NVML cannot open: `... for GPU0000:41:00.0: Unknown Error`, `... for GPU
0000:0B:00.0: Unknown Error`, `... for GPU0: 0000:24:00.0: GPU is lost.  Reboot the system to
recover this GPU` (the wording varies by driver; tests/data/README.md names the sources)."""
_BUS_ID = re.compile(r"[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]")


def _gpu_lines(text: str, most: int = MAX_GPU_LINES) -> list[str]:
    """Non-blank lines, at most `most` of MAX_GPU_LINE_CHARS each."""
    out: list[str] = []
    for line in text.splitlines():
        if line.strip():
            out.append(line[:MAX_GPU_LINE_CHARS])
            if len(out) >= most:
                break
    return out


def handle_error_bus_id(line: str) -> str | None:
    """The PCI bus id an `Unable to determine the device handle` line names (or None)."""
    match = _HANDLE.search(line)
    if match is None:
        return None
    bus = _BUS_ID.search(match.group("which"))
    return bus.group(0) if bus else match.group("which")[:40]


def _gpu_row(row: list[str]) -> Gpu | None:
    if len(row) < 11:
        return None
    index = na_int(row[0])
    if isinstance(index, NA):
        return None
    return Gpu(
        index=index,
        name=row[1].strip(),
        uuid=row[2].strip(),
        util_pct=na_float(row[3]),
        mem_used_mib=na_float(row[4]),
        mem_total_mib=na_float(row[5]),
        temp_c=na_float(row[6]),
        power_w=na_float(row[7]),
        power_limit_w=na_float(row[8]),
        sm_clock_mhz=na_float(row[9]),
        sm_clock_max_mhz=na_float(row[10]),
        mig_mode=_mig(row[11]) if len(row) > 11 else NA("not queried"),
    )


def parse_gpus(text: str, rc: int | None) -> GpuReading:
    """`nvidia-smi --query-gpu=GPU_FIELDS --format=csv,noheader,nounits` output (stderr merged).

    Each line is a GPU row or one of nvidia-smi's error lines. The driver unreachable
    (`NVIDIA-SMI has failed ...`) or no row at all is FAILED with nvidia-smi's words. Rows
    next to error lines or a non-zero exit are kept (a multi-GPU box with one GPU gone
    still shows the others) and the error lines are named in `errors`, with `expected`
    counting the GPUs nvidia-smi enumerated.
    """
    lines = _gpu_lines(text)
    rc_text = f"nvidia-smi exited {rc}" if rc not in (0, None) else ""
    if any(mark in line for line in lines for mark in _FATAL):
        message = " ".join(line.strip() for line in lines).strip() or rc_text
        return GpuReading(GpuStatus.FAILED, (), message[:MAX_GPU_MESSAGE], rc=rc)
    gpus: list[Gpu] = []
    errors: list[str] = []
    handles = 0
    no_devices = False
    for line in lines:
        stripped = line.strip()
        if stripped == "No devices were found":
            no_devices = True
            continue
        if _HANDLE.search(stripped):
            handles += 1
            if len(errors) < MAX_GPU_ERRORS:
                errors.append(visible(stripped))
            continue
        gpu = None
        if len(gpus) < MAX_GPUS:
            gpu = next((_gpu_row(r) for r in csv.reader([stripped], skipinitialspace=True)), None)
        if gpu is not None:
            gpus.append(gpu)
        elif len(gpus) < MAX_GPUS and len(errors) < MAX_GPU_ERRORS:
            errors.append(visible(stripped))
    expected = len(gpus) + handles
    if gpus:
        return GpuReading(GpuStatus.OK, tuple(gpus), rc_text, errors=tuple(errors), rc=rc,
                          expected=expected)
    if no_devices and not errors:
        status = GpuStatus.OK if rc in (0, None) else GpuStatus.FAILED
        message = "no devices were found" if status is GpuStatus.OK else "No devices were found"
        return GpuReading(status, (), message, rc=rc, expected=0, no_devices=True)
    if not lines:
        return GpuReading(GpuStatus.FAILED if rc_text else GpuStatus.OK, (), rc_text, rc=rc,
                          expected=0)
    message = " ".join(line.strip() for line in lines)
    if not rc_text and not handles:
        message = "unrecognised nvidia-smi output: " + lines[0].strip()
    return GpuReading(GpuStatus.FAILED, (), message[:MAX_GPU_MESSAGE], errors=tuple(errors),
                      rc=rc, expected=expected)


_MIG_GPU = re.compile(r"GPU (\d{1,4}): ")
_MIG_DEVICE = re.compile(r"\s+MIG\s+(\S{1,40})\s+Device\s+(\d{1,3}):\s+\(UUID:\s*([^)\s]{1,120})\)")


def parse_mig_list(text: str) -> dict[int, tuple[MigDevice, ...]]:
    """`nvidia-smi -L`: each GPU's MIG devices, listed indented under `GPU i: ...`.

        GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)
          MIG 3g.40gb     Device  0: (UUID: MIG-...)

    At most MAX_MIG_PER_GPU devices per GPU and MAX_GPUS GPUs.
    """
    out: dict[int, list[MigDevice]] = {}
    current: int | None = None
    for line in _gpu_lines(text):
        gpu = _MIG_GPU.match(line)
        if gpu is not None:
            current = int(gpu.group(1))
            if current not in out and len(out) >= MAX_GPUS:
                current = None
            continue
        device = _MIG_DEVICE.match(line)
        if device is None or current is None:
            continue
        found = out.setdefault(current, [])
        if len(found) < MAX_MIG_PER_GPU:
            found.append(MigDevice(current, visible(device.group(1)), int(device.group(2)),
                                   visible(device.group(3))))
    return {index: tuple(devices) for index, devices in out.items()}


def attach_mig(reading: GpuReading, devices: dict[int, tuple[MigDevice, ...]] | None,
               error: str = "") -> GpuReading:
    """Give each GPU its MIG devices (matched by index); `error` when the listing failed."""
    if reading.status is not GpuStatus.OK or (devices is None and not error):
        return reading
    gpus = tuple(dataclasses.replace(gpu, mig_devices=(devices or {}).get(gpu.index, ()))
                 for gpu in reading.gpus)
    return dataclasses.replace(reading, gpus=gpus, mig_error=error[:MAX_GPU_MESSAGE])


def _mig(text: str) -> str | NA:
    value = text.strip()
    if not value:
        return NA("empty")
    return NA(value) if value.startswith("[") or value.upper() == "N/A" else value


def parse_apps(text: str) -> list[GpuProcess]:
    """`nvidia-smi --query-compute-apps=APP_FIELDS --format=csv,noheader,nounits` output."""
    procs: list[GpuProcess] = []
    for row in csv.reader(_gpu_lines(text, MAX_GPU_PROCESSES), skipinitialspace=True):
        if len(row) < 3:
            continue
        pid = na_int(row[1])
        if isinstance(pid, NA):
            continue
        procs.append(GpuProcess(gpu_uuid=row[0].strip(), pid=pid, used_mib=na_float(row[2])))
    return procs


def attach_apps(reading: GpuReading, procs: Sequence[GpuProcess]) -> GpuReading:
    """Give each GPU the compute processes that run on it (matched by UUID)."""
    if not procs or reading.status is not GpuStatus.OK:
        return reading
    by_uuid: dict[str, list[GpuProcess]] = {}
    for proc in procs:  # grouped once: GPUs x processes was quadratic on a hostile record
        by_uuid.setdefault(proc.gpu_uuid, []).append(proc)
    gpus = tuple(dataclasses.replace(gpu, processes=tuple(by_uuid.get(gpu.uuid, ())))
                 for gpu in reading.gpus)
    return dataclasses.replace(reading, gpus=gpus)


def _df_error(path: str, message: str) -> Mount:
    na = NA(message)
    return Mount(path, na, na, na, na, na, na, na, na, error=message)


def parse_df_output(path: str, text: str) -> Mount:
    """`df -B1 --output=itotal,iused,iavail,size,used,avail,fstype,target -- PATH`.

    The mount point is the last column and may contain spaces, so split at most 7 times.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    data = [line for line in lines if not line.lstrip().startswith("Inodes")]
    errors = [line for line in data if line.startswith("df:")]
    rows = [line for line in data if not line.startswith("df:")]
    if not rows:
        return _df_error(path, errors[0][4:].strip() if errors else "df printed nothing")
    parts = rows[-1].split(None, 7)
    if len(parts) < 8:
        return _df_error(path, f"unrecognised df line: {rows[-1][:120]}")
    itotal, iused, iavail, size, used, avail, fstype, target = parts
    return Mount(
        path=path,
        target=target,
        fstype=fstype,
        bytes_total=na_int(size),
        bytes_used=na_int(used),
        bytes_avail=na_int(avail),
        inodes_total=na_int(itotal),
        inodes_used=na_int(iused),
        inodes_avail=na_int(iavail),
    )


def parse_df_posix(path: str, bytes_text: str, inode_text: str) -> Mount:
    """Fallback for df without `--output`: `df -P -B1` plus `df -P -i` (6 columns each)."""

    def last_row(text: str) -> list[str] | None:
        rows = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("df:", "Filesystem"))]
        if not rows:
            return None
        parts = rows[-1].split()
        # The mount point is everything after the 5th column (it may contain spaces); the
        # source is assumed to have none.
        return [*parts[:5], " ".join(parts[5:])] if len(parts) >= 6 else None

    brow, irow = last_row(bytes_text), last_row(inode_text)
    if brow is None:
        err = next((ln for ln in bytes_text.splitlines() if ln.startswith("df:")), "df: no output")
        return _df_error(path, err[4:].strip())
    na = NA("inodes not reported")
    return Mount(
        path=path,
        target=brow[5],
        fstype=NA("not reported by df -P"),
        bytes_total=na_int(brow[1]),
        bytes_used=na_int(brow[2]),
        bytes_avail=na_int(brow[3]),
        inodes_total=na_int(irow[1]) if irow else na,
        inodes_used=na_int(irow[2]) if irow else na,
        inodes_avail=na_int(irow[3]) if irow else na,
    )


def parse_memory(source: str, lines: Iterable[str], meminfo: Iterable[str]) -> Memory:
    """cgroup v2/v1 memory current/max/oom_kill, falling back to /proc/meminfo."""
    values: dict[str, str] = {}
    for line in lines:
        key, _, value = line.strip().partition(" ")
        values[key] = value.strip()
    info: dict[str, int] = {}
    for line in meminfo:
        key, _, value = line.partition(":")
        number = value.strip().split(" ")[0]
        if is_int(number):
            info[key.strip()] = int(number) * 1024  # meminfo reports kB
    if source in {"cgroup-v2", "cgroup-v1"}:
        current = na_int(values.get("current", ""))
        raw_max = values.get("max", "")
        limit: int | NA
        if raw_max == "max":
            limit = NA("unlimited")
        else:
            limit = na_int(raw_max)
            if isinstance(limit, int) and limit >= _V1_UNLIMITED:
                limit = NA("unlimited")
        oom = na_int(values["oom_kill"]) if "oom_kill" in values else NA("no oom_kill counter")
        if isinstance(limit, NA) and "MemTotal" in info:
            # No cgroup limit: the host's memory is the real ceiling.
            limit = info["MemTotal"]
        return Memory(source, current, limit, oom)
    if "MemTotal" in info and "MemAvailable" in info:
        return Memory("meminfo", info["MemTotal"] - info["MemAvailable"], info["MemTotal"],
                      NA("no cgroup"))
    na = NA("memory not readable")
    return Memory("none", na, na, na)


def parse_tmux(lines: Iterable[str]) -> tuple[TmuxSession, ...]:
    """`tmux ls -F '#{session_created} #{session_windows} #{session_name}'`."""
    sessions = []
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) == 3 and is_int(parts[0]) and is_int(parts[1]):
            created = na_time(parts[0])
            sessions.append(TmuxSession(parts[2], int(parts[1]),
                                        0.0 if isinstance(created, NA) else created))
    return tuple(sessions)


def _stat_line(path: str, line: str) -> FileStat:
    parts = line.split()
    if len(parts) < 3:
        na = NA("missing")
        return FileStat(path, na, na, na)
    return FileStat(path, na_int(parts[0]), na_time(parts[1]), na_int(parts[2]))


def _b64(lines: Iterable[str]) -> bytes:
    try:
        return base64.b64decode("".join(lines), validate=False)
    except (binascii.Error, ValueError):
        return b""


def remote_path(raw: bytes) -> tuple[str, str]:
    """A path's bytes from the box as (text, base64 of the exact bytes or "").

    The text is what the cockpit shows and keys its state by (undecodable bytes as U+FFFD);
    the base64 is kept only when the text cannot carry the bytes (not UTF-8, or a newline
    or other control character), so that the probe can be asked for that very file.
    """
    text = raw.decode("utf-8", errors="replace")
    exact = text.isprintable() and text.encode("utf-8", errors="replace") == raw
    return text, "" if exact else base64.b64encode(raw).decode("ascii")


def _nul_entries(data: bytes, fields: int) -> Iterator[tuple[list[bytes], bytes]]:
    """`f1 f2 ... name\0` entries (a name may hold any byte but NUL); a cut last one is
    dropped (the probe caps the listing's bytes)."""
    for entry in data.split(b"\0")[:-1]:
        parts = entry.split(b" ", fields)
        if len(parts) == fields + 1:
            yield parts[:fields], parts[fields]


def _text(raw: bytes) -> str:
    return raw.decode("ascii", errors="replace")


def parse_dir64(body: Iterable[str]) -> list[FileStat]:
    """`@@dir64`: base64 of `SIZE MTIME INODE PATH\0` per log, names never printed raw."""
    out = []
    for (size, mtime, inode), raw in _nul_entries(_b64(body), 3):
        path, exact = remote_path(raw)
        out.append(FileStat(path, na_int(_text(size)), na_time(_text(mtime)),
                            na_int(_text(inode)), exact))
    return out


def parse_ckpt64(body: Iterable[str]) -> FileStat | None:
    """`@@ckpt64`: base64 of `MTIME SIZE PATH\0`, the newest checkpoint."""
    entries = list(_nul_entries(_b64(body), 2))
    if not entries:
        return None
    (mtime, size), raw = entries[-1]
    path, exact = remote_path(raw)
    return FileStat(path, na_int(_text(size)), na_time(_text(mtime)), name_b64=exact)


@dataclass
class _Section:
    head: str
    arg: str
    lines: list[str] = field(default_factory=list)


def split_sections(text: str) -> list[_Section]:
    """Split a record into `@@name arg` sections with their body lines."""
    sections: list[_Section] = []
    for line in text.split("\n"):
        if line.startswith("@@"):
            head, _, arg = line[2:].partition(" ")
            sections.append(_Section(head, arg))
        elif sections:
            sections[-1].lines.append(line)
    return sections


def _rc(section: _Section | None) -> int | None:
    if section is None or not is_int(section.arg):
        return None
    return int(section.arg)


@dataclass
class _Record:
    """What the sections of one record said so far (filled in section by section)."""

    seq: int = 0
    hostname: str = ""
    remote_time: float | NA = field(default_factory=lambda: NA("no header"))
    gpu: GpuReading = field(default_factory=lambda: GpuReading(GpuStatus.ABSENT, (), "not probed"))
    apps: list[GpuProcess] = field(default_factory=list)
    mig: dict[int, tuple[MigDevice, ...]] | None = None
    mig_error: str = ""
    mounts: list[Mount] = field(default_factory=list)
    memory: Memory = field(default_factory=lambda: Memory(
        "none", NA("not probed"), NA("not probed"), NA("not probed")))
    tmux: tuple[TmuxSession, ...] | NA = field(default_factory=lambda: NA("not probed"))
    stats: dict[str, FileStat] = field(default_factory=dict)
    run_logs: list[FileStat] = field(default_factory=list)
    checkpoint: FileStat | None = None
    pids: set[int] | None = None
    queue_text: str | None = None
    queue_marks: str | None = None
    chunks: list[LogChunk] = field(default_factory=list)
    utc_offset: float | NA = field(default_factory=lambda: NA("not reported"))
    parents: dict[int, int] | NA | None = None
    kernel: tuple[str, ...] | NA | None = None
    uptime: float | NA = field(default_factory=lambda: NA("not reported"))
    bad: list[str] = field(default_factory=list)


def _section(rec: _Record, sections: list[_Section], i: int) -> int:
    """Absorb section `i` into `rec`; returns how many following sections it also used."""
    sec = sections[i]
    nxt = sections[i + 1] if i + 1 < len(sections) else None
    body = [ln for ln in sec.lines if ln.strip()]
    head = sec.head
    if head == "begin":
        parts = sec.arg.split(" ", 2)
        rec.seq = int(parts[0]) if parts and is_int(parts[0]) else 0
        rec.remote_time = na_time(parts[1]) if len(parts) > 1 else NA("no clock")
        rec.hostname = parts[2] if len(parts) > 2 else ""
    elif head == "tz":
        rec.utc_offset = parse_utc_offset(sec.arg)
    elif head == "uptime":
        rec.uptime = na_time(sec.arg)
    elif head == "gpu":
        if sec.arg == "absent":
            rec.gpu = GpuReading(GpuStatus.ABSENT, (), "nvidia-smi not found on this host")
        elif sec.arg != "skipped":
            rec.gpu = parse_gpus("\n".join(sec.lines), _rc(nxt if nxt and nxt.head == "rc" else None))
    elif head == "apps" and nxt is not None and nxt.head == "rc" and _rc(nxt) == 0:
        rec.apps = parse_apps("\n".join(sec.lines))
    elif head == "mig":  # `nvidia-smi -L`, sent only when some GPU has MIG enabled
        rc = _rc(nxt if nxt is not None and nxt.head == "rc" else None)
        text = "\n".join(sec.lines)
        if rc in (0, None):
            rec.mig = parse_mig_list(text)
        else:
            said = " ".join(line.strip() for line in _gpu_lines(text))
            rec.mig_error = visible(f"nvidia-smi -L exited {rc}: {said}"[:MAX_GPU_MESSAGE])
    elif head == "mem":
        info = nxt if nxt is not None and nxt.head == "meminfo" else None
        rec.memory = parse_memory(sec.arg, body, info.lines if info else [])
    elif head == "tmux":
        rec.tmux = NA("tmux not installed") if sec.arg == "absent" else (
            () if sec.arg == "none" else parse_tmux(body))
    elif head == "mount":
        if nxt is not None and nxt.head == "posix":
            inodes = sections[i + 2] if i + 2 < len(sections) else _Section("", "")
            rec.mounts.append(parse_df_posix(sec.arg, "\n".join(nxt.lines), "\n".join(inodes.lines)))
            return 2
        rec.mounts.append(parse_df_output(sec.arg, "\n".join(sec.lines)))
    elif head == "stat":
        key, _, path = sec.arg.partition(" ")
        rec.stats[key] = _stat_line(path, body[0] if body else "")
    elif head == "text":
        rec.queue_text = _b64(body).decode("utf-8", errors="replace") if body else None
    elif head == "marks":
        rec.queue_marks = _b64(body).decode("utf-8", errors="replace")
    elif head == "dir":  # the old listing (recorded fixtures): names printed raw
        for line in body:
            parts = line.split(" ", 3)
            if len(parts) == 4:
                rec.run_logs.append(FileStat(parts[3], na_int(parts[0]), na_time(parts[1]),
                                             na_int(parts[2])))
    elif head == "dir64":
        rec.run_logs += parse_dir64(body)
    elif head == "ckpt":
        if body:
            parts = body[-1].split(" ", 2)
            if len(parts) == 3:
                rec.checkpoint = FileStat(parts[2], na_int(parts[1]), na_time(parts[0]))
    elif head == "ckpt64":
        rec.checkpoint = parse_ckpt64(body)
    elif head == "proc":
        # A set, sorted once at the end: re-sorting per section was quadratic (40k
        # sections took 21 s on the event loop).
        if rec.pids is None:
            rec.pids = set()
        rec.pids.update(int(ln) for ln in body if is_int(ln))
    elif head == "ptree":
        rec.parents = NA("ps not installed") if sec.arg == "absent" else _parents(body)
    elif head == "kmsg":
        rec.kernel = NA("kernel log not readable") if sec.arg == "denied" else tuple(
            ln.strip() for ln in body)
    elif head in ("log", "log64") and body and body[0] != "missing":
        parts = body[0].split()
        if len(parts) == 4 and all(is_int(h) for h in parts):
            path = sec.arg if head == "log" else remote_path(_b64([sec.arg]))[0]
            rec.chunks.append(LogChunk(path, int(parts[0]), int(parts[1]), _b64(body[1:]),
                                       reset=parts[2] == "1"))
    return 0


def parse_record(
    record: bytes, *, instance: str, observed_at: float, probe_ms: float | NA | None = None
) -> HostSnapshot:
    """One framed probe record (from `@@begin` to `@@end`) into a HostSnapshot.

    Total: a section that fails to parse is skipped and named, with the reason, in
    `HostSnapshot.bad`; every other section is used as usual.
    """
    text = record.decode("utf-8", errors="replace")
    sections = split_sections(text)
    rec = _Record()
    i = 0
    while i < len(sections):
        try:
            i += _section(rec, sections, i)
        except Exception as exc:  # isolation: one section, never the whole record
            reason = f"@@{sections[i].head}: {type(exc).__name__}: {exc}"
            rec.bad.append(visible(reason[:MAX_REASON_CHARS]))
        i += 1
    pids: tuple[int, ...] | NA = NA("not probed") if rec.pids is None else tuple(sorted(rec.pids))
    return HostSnapshot(
        instance=instance,
        observed_at=observed_at,
        remote_time=rec.remote_time,
        seq=rec.seq,
        hostname=rec.hostname,
        gpu=_attach(rec),
        mounts=tuple(rec.mounts),
        memory=rec.memory,
        tmux=rec.tmux,
        queue=QueueFacts(
            process_pids=pids,
            queue_log=rec.stats.get("queue_log"),
            run_logs=tuple(rec.run_logs),
            newest_checkpoint=rec.checkpoint,
            queue_text=rec.queue_text,
            queue_marks=rec.queue_marks,
            queue_stat=rec.stats.get("queue"),
        ),
        log_chunks=tuple(rec.chunks),
        probe_ms=NA("not measured") if probe_ms is None else probe_ms,
        utc_offset=rec.utc_offset,
        parents=rec.parents,
        kernel_lines=rec.kernel,
        uptime_s=rec.uptime,
        bad=tuple(rec.bad),
    )


def _attach(rec: _Record) -> GpuReading:
    try:
        return attach_mig(attach_apps(rec.gpu, rec.apps), rec.mig, rec.mig_error)
    except Exception as exc:  # isolation, as for a section
        rec.bad.append(visible(f"@@apps: {type(exc).__name__}: {exc}"[:MAX_REASON_CHARS]))
        return rec.gpu


def _parents(lines: list[str]) -> dict[int, int]:
    out: dict[int, int] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and is_int(parts[0]) and is_int(parts[1]):
            out[int(parts[0])] = int(parts[1])
    return out
