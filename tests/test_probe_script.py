"""The real remote probe, cockpit/services/transport/probe.sh, run locally under /bin/sh.

Each test starts `/bin/sh probe.sh 0` (or `1` with a fake nvidia-smi), talks the request /
record protocol over its stdin/stdout (see the header of probe.sh) against temp dirs, and
reads the records with cockpit.models.parse.parse_record.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.models.parse import APP_FIELDS, GPU_FIELDS, parse_record
from cockpit.models.snapshot import NA, GpuStatus, HostSnapshot, LogChunk

REPO = Path(__file__).resolve().parents[1]
PROBE = REPO / "cockpit" / "services" / "transport" / "probe.sh"
DATA = Path(__file__).resolve().parent / "data"
CAP = 262144  # probe.sh `cap`: the most bytes of one log delivered per tick

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not Path("/bin/sh").exists() or shutil.which("bash") is None,
    reason="probe.sh targets Linux boxes (GNU stat, /proc); the runner fixtures need bash",
)


class Probe:
    """One long-lived probe process, driven tick by tick like the client does."""

    def __init__(self, env: dict[str, str], cwd: Path, with_gpu: str = "0") -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            ["/bin/sh", str(PROBE), with_gpu],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=env, cwd=cwd,
        )
        self.seq = 0
        self.buffer = b""

    def send(self, lines: list[str]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(("\n".join(lines) + "\n").encode())
        self.proc.stdin.flush()

    def read_until(self, end: bytes, timeout: float = 10.0) -> bytes:
        """Output up to and including `end`."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while end not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise AssertionError(f"no {end!r} within {timeout}s: {self.buffer[-500:]!r}")
            chunk = os.read(fd, 65536)
            if not chunk:
                self.stderr.seek(0)
                raise AssertionError(f"probe exited before {end!r}: {self.stderr.read()!r}")
            self.buffer += chunk
        cut = self.buffer.index(end) + len(end)
        out, self.buffer = self.buffer[:cut], self.buffer[cut:]
        return out

    def raw(self, *items: str) -> bytes:
        self.seq += 1
        self.send([f"tick {self.seq}", *items, f"end {self.seq}"])
        return self.read_until(f"@@end {self.seq}\n".encode())

    def tick(self, *items: str) -> HostSnapshot:
        snap = parse_record(self.raw(*items), instance="local", observed_at=time.time())
        assert snap.seq == self.seq
        return snap

    def close(self) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=5)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
            self.stderr.close()


class Box:
    """Temp dirs standing in for a remote box: HOME, TMUX_TMPDIR, the probe's cwd, data."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "probe-home"
        self.tmux = root / "tmux-tmpdir"
        self.cwd = root / "probe-cwd"
        self.data = root / "data"
        for d in (self.home, self.tmux, self.cwd, self.data):
            d.mkdir()
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "TMUX_TMPDIR": str(self.tmux),
            "LC_ALL": "C",
        }
        self.probes: list[Probe] = []
        self.runners: list[subprocess.Popen[bytes]] = []

    def probe(self, with_gpu: str = "0", **env: str) -> Probe:
        probe = Probe({**self.env, **env}, self.cwd, with_gpu)
        self.probes.append(probe)
        return probe

    def runner(self, cwd: Path, *args: str) -> int:
        """Start `bash ARGS...` in its own session (a queue runner stand-in); return its pid."""
        proc = subprocess.Popen(["bash", *args], cwd=cwd, start_new_session=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        self.runners.append(proc)
        # bash forks before exec'ing `sleep`; for that instant the child carries bash's argv
        # and is (rightly) another process of the queue. Wait until the child has exec'd so
        # the runner is the only one, or a probe tick can race it.
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            kids = children.read_text().split() if children.exists() else []
            if kids and all(_execd(int(k), args) for k in kids):
                break
            time.sleep(0.01)
        return proc.pid

    def cleanup(self) -> None:
        for probe in self.probes:
            probe.close()
        for proc in self.runners:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _execd(pid: int, args: tuple[str, ...]) -> bool:
    """True once `pid` no longer runs with the argv of the bash that forked it."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True
    return cmdline[:1 + len(args)] != [b"bash", *(a.encode() for a in args)]


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    b = Box(tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


def queue_dir(parent: Path | str, content: str = "python train.py\n") -> Path:
    """A queue directory with script.sh (a long sleep) and queue.txt."""
    d = Path(parent)
    d.mkdir(parents=True, exist_ok=True)
    (d / "script.sh").write_text("sleep 30\n:\n")
    (d / "queue.txt").write_text(content)
    return d


def one_chunk(snap: HostSnapshot) -> LogChunk:
    assert len(snap.log_chunks) == 1, snap.log_chunks
    return snap.log_chunks[0]


# --------------------------------------------------------------------------- mount


def test_mount_reports_bytes_and_inodes_and_errors(box: Box) -> None:
    missing = box.data / "missing"
    snap = box.probe().tick(f"mount {box.data}", f"mount {missing}")
    present, absent = snap.mounts
    assert present.path == str(box.data)
    assert present.error == ""
    assert isinstance(present.target, str) and present.target.startswith("/")
    assert isinstance(present.bytes_total, int) and present.bytes_total > 0
    assert isinstance(present.bytes_avail, int) and isinstance(present.bytes_used, int)
    assert isinstance(present.inodes_total, int)
    assert not isinstance(present.bytes_pct, NA)
    assert absent.path == str(missing)
    assert "No such file or directory" in absent.error
    assert str(missing) in absent.error
    assert isinstance(absent.bytes_total, NA)


def test_batched_mounts_keep_each_row_with_its_path(box: Box) -> None:
    # The probe answers all mount items of a tick with one df; rows must not shift when a
    # path is missing or repeated, and different filesystems must stay apart.
    missing = box.data / "gone"
    items = [str(box.data), str(missing), "/proc", str(box.data), "/proc/self"]
    snap = box.probe().tick(*(f"mount {p}" for p in items))
    assert [m.path for m in snap.mounts] == items
    data, gone, proc, data_again, proc_again = snap.mounts
    assert "No such file or directory" in gone.error
    assert (proc.fstype, proc.target) == ("proc", "/proc")
    assert (proc_again.fstype, proc_again.target) == ("proc", "/proc")
    assert data.error == "" and data.fstype != "proc" and data.target != "/proc"
    assert (data_again.fstype, data_again.target, data_again.bytes_total) == (
        data.fstype, data.target, data.bytes_total)


def test_tilde_expands_to_home(box: Box) -> None:
    (box.home / "x").mkdir()
    snap = box.probe().tick("mount ~", "mount ~/x", "mount ~/absent")
    tilde, sub, absent = snap.mounts
    # The client keys mounts by the path it asked for, so the header keeps the `~`.
    assert (tilde.path, sub.path, absent.path) == ("~", "~/x", "~/absent")
    assert tilde.error == "" and sub.error == ""
    assert isinstance(tilde.bytes_total, int) and isinstance(sub.bytes_total, int)
    assert f"{box.home}/absent" in absent.error


def test_tilde_uses_the_probes_home(box: Box) -> None:
    ghost = box.root / "ghost-home"
    (tilde, sub) = box.probe(HOME=str(ghost)).tick("mount ~", "mount ~/x").mounts
    assert str(ghost) in tilde.error
    assert f"{ghost}/x" in sub.error


# --------------------------------------------------------------------------- log


def test_log_returns_only_new_bytes_then_resets(box: Box) -> None:
    path = box.data / "train.log"
    path.write_bytes(b"one\n")
    ino = path.stat().st_ino
    probe = box.probe()

    first = one_chunk(probe.tick(f"log 0 0 {path}"))
    assert (first.path, first.inode, first.offset) == (str(path), ino, 0)
    assert (first.data, first.reset) == (b"one\n", True)

    with path.open("ab") as f:
        f.write(b"two\n")
    second = one_chunk(probe.tick(f"log {ino} 4 {path}"))
    assert (second.offset, second.data, second.reset) == (4, b"two\n", False)

    idle = one_chunk(probe.tick(f"log {ino} 8 {path}"))
    assert (idle.offset, idle.data, idle.reset) == (8, b"", False)

    # Truncated in place (same inode, now shorter than the client's offset): start again.
    with path.open("r+b") as f:
        f.truncate(0)
        f.write(b"3\n")
    assert path.stat().st_ino == ino
    truncated = one_chunk(probe.tick(f"log {ino} 8 {path}"))
    assert (truncated.inode, truncated.offset, truncated.data, truncated.reset) == (ino, 0, b"3\n", True)

    # Replaced (rotation: a new inode, even though it is longer than the offset): start again.
    fresh = box.data / "train.log.new"
    fresh.write_bytes(b"rotated log, longer than before\n")
    os.replace(fresh, path)
    new_ino = path.stat().st_ino
    assert new_ino != ino
    replaced = one_chunk(probe.tick(f"log {ino} 2 {path}"))
    assert (replaced.inode, replaced.offset, replaced.reset) == (new_ino, 0, True)
    assert replaced.data == b"rotated log, longer than before\n"


def test_log_negative_offset_returns_the_last_bytes(box: Box) -> None:
    path = box.data / "tail.log"
    content = b"".join(b"line %03d\n" % i for i in range(100))
    path.write_bytes(content)
    ino = path.stat().st_ino
    probe = box.probe()
    tail = one_chunk(probe.tick(f"log 0 -27 {path}"))
    assert (tail.inode, tail.offset, tail.reset) == (ino, len(content) - 27, True)
    assert tail.data == content[-27:]
    # A tail longer than the file starts at 0.
    whole = one_chunk(probe.tick(f"log {ino} -65536 {path}"))
    assert (whole.offset, whole.data, whole.reset) == (0, content, True)


def test_log_over_the_cap_arrives_over_several_ticks(box: Box) -> None:
    path = box.data / "big.log"
    content = bytes(range(256)) * 2343 + b"\xff\xfe tail\n"  # ~600 KB, not valid UTF-8
    path.write_bytes(content)
    probe = box.probe()
    received, inode, offset, ticks = b"", 0, 0, 0
    while True:
        chunk = one_chunk(probe.tick(f"log {inode} {offset} {path}"))
        ticks += 1
        assert chunk.offset == offset or chunk.reset
        assert len(chunk.data) <= CAP
        if not chunk.data:
            break
        received += chunk.data
        inode, offset = chunk.inode, chunk.offset + len(chunk.data)
        assert ticks < 10
    assert ticks == 4  # 256 KiB + 256 KiB + the rest + an empty answer
    assert received == content


def test_missing_log_gives_no_chunk(box: Box) -> None:
    raw = box.probe().raw(f"log 0 0 {box.data}/nope.log")
    assert f"@@log {box.data}/nope.log\nmissing\n".encode() in raw
    assert parse_record(raw, instance="local", observed_at=0.0).log_chunks == ()


# --------------------------------------------------------------------------- proc


def test_proc_finds_the_queue_runner_by_relative_and_absolute_path(box: Box) -> None:
    a = queue_dir(box.data / "sweep-a")
    b = queue_dir(box.data / "sweep-b")
    relative = box.runner(a, "script.sh", "queue.txt")
    dotted = box.runner(a, "script.sh", "./queue.txt")
    absolute = box.runner(box.cwd, str(a / "script.sh"), str(a / "queue.txt"))
    other = box.runner(b, "script.sh", "queue.txt")
    snap_a = box.probe().tick(f"proc {a.resolve()}/queue.txt")
    assert not isinstance(snap_a.queue.process_pids, NA)
    assert set(snap_a.queue.process_pids) == {relative, dotted, absolute}
    assert other not in snap_a.queue.process_pids
    snap_b = box.probe().tick(f"proc {b.resolve()}/queue.txt")
    assert snap_b.queue.process_pids == (other,)
    snap_none = box.probe().tick(f"proc {box.data.resolve()}/sweep-c/queue.txt")
    assert snap_none.queue.process_pids == ()


# --------------------------------------------------------------------------- read-only, lifetime


def test_probe_creates_no_files(box: Box) -> None:
    q = queue_dir(box.data / "sweep")
    (q / "run.log").write_bytes(b"hello\n")
    (q / "ckpt").mkdir()
    (q / "ckpt" / "step_1.pt").write_bytes(b"weights")
    before = sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in box.root.rglob("*"))
    probe = box.probe()
    for _ in range(4):
        snap = probe.tick(f"mount {q}", "mount ~", f"stat queue_log {q}/run.log", f"text {q}/queue.txt",
                          f"dir {q}", f"ckpt {q}/ckpt", f"proc {q}/queue.txt", f"log 0 0 {q}/run.log")
        assert snap.tmux == (() if shutil.which("tmux") else NA("tmux not installed"))
    assert probe.close() == 0
    # tmux must not have created its socket dir, and nothing else appeared anywhere.
    assert list(box.tmux.iterdir()) == []
    assert list(box.home.iterdir()) == []
    assert list(box.cwd.iterdir()) == []
    after = sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in box.root.rglob("*"))
    assert after == before


def test_probe_exits_promptly_when_stdin_closes(box: Box) -> None:
    probe = box.probe()
    probe.tick(f"mount {box.data}")
    started = time.monotonic()
    assert probe.close() == 0
    assert time.monotonic() - started < 5


def test_probe_exits_at_once_without_any_request(box: Box) -> None:
    started = time.monotonic()
    proc = subprocess.run(["/bin/sh", str(PROBE), "0"], input=b"", capture_output=True,
                          env=box.env, cwd=box.cwd, timeout=5)
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert time.monotonic() - started < 5


# --------------------------------------------------------------------------- hostile paths


def hostile_names(marker: str) -> list[str]:
    return [
        "with space",
        "it's \"quoted\"",
        f"$(touch {marker})",
        f"`touch {marker}`",
        f"semi; touch {marker}; x",
        f"amp && touch {marker} | cat",
        "glob * ? [x] $HOME ${PATH}",
        "tab\there",
        "-delete",
        "  padded  ",
    ]


def test_hostile_paths_are_literal_and_never_executed(box: Box) -> None:
    marker = f"/tmp/pwned-{uuid.uuid4().hex}"
    base = box.data / "hostile"
    probe = box.probe()
    try:
        for name in hostile_names(marker):
            d = f"{base}/{name}"
            queue_dir(d, content=f"queue in {name}\n")
            log = f"log of {name}\n".encode()
            Path(d, "run.log").write_bytes(log)
            Path(d, "ckpt").mkdir()
            Path(d, "ckpt", "model.pt").write_bytes(b"0123456789")
            pid = box.runner(Path(d), "script.sh", "queue.txt")
            snap = probe.tick(f"mount {d}", f"stat queue_log {d}/run.log", f"text {d}/queue.txt",
                              f"dir {d}", f"ckpt {d}/ckpt", f"proc {d}/queue.txt", f"log 0 0 {d}/run.log")
            (mount,) = snap.mounts
            assert (mount.path, mount.error) == (d, ""), name
            assert isinstance(mount.bytes_total, int), name
            q = snap.queue
            assert q.queue_log is not None, name
            assert (q.queue_log.path, q.queue_log.size) == (f"{d}/run.log", len(log)), name
            assert q.queue_text == f"queue in {name}\n", name
            assert [s.path for s in q.run_logs] == [f"{d}/run.log"], name
            assert q.newest_checkpoint is not None, name
            assert (q.newest_checkpoint.path, q.newest_checkpoint.size) == (f"{d}/ckpt/model.pt", 10), name
            assert q.process_pids == (pid,), name
            chunk = one_chunk(snap)
            assert (chunk.path, chunk.data) == (f"{d}/run.log", log), name
            assert not Path(marker).exists(), name
        assert probe.close() == 0
        assert not Path(marker).exists()
        assert list(box.cwd.iterdir()) == []
    finally:
        Path(marker).unlink(missing_ok=True)


def test_hostile_tick_and_end_arguments_are_not_executed(box: Box) -> None:
    marker = f"/tmp/pwned-{uuid.uuid4().hex}"
    probe = box.probe()
    try:
        probe.send([f"tick $(touch {marker})", f"end `touch {marker}`"])
        raw = probe.read_until(f"@@end `touch {marker}`\n".encode())
        assert f"@@begin $(touch {marker}) ".encode() in raw
        assert probe.close() == 0
        assert not Path(marker).exists()
    finally:
        Path(marker).unlink(missing_ok=True)


def _sh_echo_interprets_backslashes() -> bool:
    out = subprocess.run(["/bin/sh", "-c", 'echo "a\\tb"'], capture_output=True, check=False).stdout
    return out != b"a\\tb\n"


def test_backslashes_in_paths_survive_section_headers(box: Box) -> None:
    d = box.data / "back\\tslash\\c"
    d.mkdir()
    (d / "run.log").write_bytes(b"x\n")
    snap = box.probe().tick(f"mount {d}", f"log 0 0 {d}/run.log")
    assert [m.path for m in snap.mounts] == [str(d)]
    assert [c.path for c in snap.log_chunks] == [f"{d}/run.log"]


# --------------------------------------------------------------------------- gpu section


FAKE_NVIDIA_SMI = """#!/bin/sh
# Answers exactly the probe's two queries from fixture files; anything else is an error.
if [ "$#" -ne 2 ] || [ "$2" != "--format=csv,noheader,nounits" ]; then echo "bad args: $*"; exit 99; fi
case "$1" in
  "--query-gpu={gpu}") cat "$FAKE_GPU"; exit "$FAKE_GPU_RC" ;;
  "--query-compute-apps={apps}") cat "$FAKE_APPS"; exit "$FAKE_APPS_RC" ;;
esac
echo "unexpected query: $1"
exit 99
"""


def fake_nvidia_smi(box: Box) -> str:
    bindir = box.root / "fakebin"
    bindir.mkdir()
    script = bindir / "nvidia-smi"
    script.write_text(FAKE_NVIDIA_SMI.format(gpu=GPU_FIELDS, apps=APP_FIELDS))
    script.chmod(0o755)
    return f"{bindir}:{box.env['PATH']}"


def test_gpu_section_round_trip_through_the_probe(box: Box) -> None:
    path = fake_nvidia_smi(box)
    snap = box.probe("1", PATH=path, FAKE_GPU=str(DATA / "nvidia-smi/a100-sxm4-80gb-x8.csv"), FAKE_GPU_RC="0",
                     FAKE_APPS=str(DATA / "nvidia-smi/a100-sxm4-80gb-x8.apps.csv"), FAKE_APPS_RC="0").tick()
    assert snap.gpu.status is GpuStatus.OK, snap.gpu.message
    assert len(snap.gpu.gpus) == 8
    assert [len(g.processes) for g in snap.gpu.gpus] == [1, 1, 0, 2, 0, 0, 1, 0]


def test_gpu_driver_failure_through_the_probe(box: Box) -> None:
    path = fake_nvidia_smi(box)
    failure = str(DATA / "nvidia-smi/driver-failure.txt")
    snap = box.probe("1", PATH=path, FAKE_GPU=failure, FAKE_GPU_RC="9",
                     FAKE_APPS=failure, FAKE_APPS_RC="9").tick()
    assert snap.gpu.status is GpuStatus.FAILED
    assert snap.gpu.message.startswith("NVIDIA-SMI has failed because it couldn't communicate")


def test_gpu_absent_without_nvidia_smi(box: Box) -> None:
    bindir = box.root / "bin-without-nvidia-smi"
    bindir.mkdir()
    for tool in ("awk", "base64", "cat", "date", "df", "find", "grep", "head", "id", "ps", "readlink",
                 "sort", "stat", "tail", "tmux", "tr", "uname"):
        found = shutil.which(tool)
        if found:
            (bindir / tool).symlink_to(found)
    snap = box.probe("1", PATH=str(bindir)).tick(f"mount {box.data}")
    assert snap.gpu.status is GpuStatus.ABSENT
    assert snap.gpu.message == "nvidia-smi not found on this host"
    assert snap.mounts[0].error == ""


def test_option_like_and_tilde_paths_are_literal(tmp_path: Path) -> None:
    """A path such as `-delete` must never reach find/stat/df as an option, and `~/x`
    resolves to $HOME/x in every request item, not only in `mount`."""
    home = tmp_path / "home"
    (home / "-delete").mkdir(parents=True)
    keep = home / "-delete" / "keep.pth"
    keep.write_bytes(b"weights")
    (home / "logs").mkdir()
    (home / "logs" / "a.log").write_text("line\n")
    (home / "q.txt").write_text("cfg.yaml task 2\n")
    request = (
        "tick 1\nckpt -delete\nstat queue ~/q.txt\ntext ~/q.txt\ndir ~/logs\n"
        "log 0 -10 ~/logs/a.log\nlog 0 $(touch${IFS}pwn) ~/logs/a.log\nend 1\n"
    )
    out = subprocess.run(["/bin/sh", str(PROBE), "0"], input=request.encode(), cwd=home,
                         env={"HOME": str(home), "PATH": os.environ["PATH"]},
                         capture_output=True, timeout=20).stdout
    assert keep.read_bytes() == b"weights", "find read the path as an option"
    assert not (home / "pwn").exists()
    snap = parse_record(out, instance="t", observed_at=0.0)
    assert snap.queue.newest_checkpoint is not None
    assert snap.queue.newest_checkpoint.path.endswith("-delete/keep.pth")
    assert snap.queue.queue_text == "cfg.yaml task 2\n"
    assert [Path(s.path).name for s in snap.queue.run_logs] == ["a.log"]
    assert [c.data for c in snap.log_chunks] == [b"line\n"]  # the bad offset is refused


# --------------------------------------------------------------------------- ptree, kmsg


def test_ptree_places_a_process_under_its_parent(box: Box) -> None:
    q = queue_dir(box.data / "sweep")
    runner = box.runner(q, "script.sh", "queue.txt")
    snap = box.probe().tick("ptree")
    parents = snap.parents
    assert isinstance(parents, dict)
    child = int(Path(f"/proc/{runner}/task/{runner}/children").read_text().split()[0])
    assert parents[child] == runner  # `sleep` under the runner's bash
    assert parents[runner] == int(Path(f"/proc/{runner}/stat").read_text().split(") ")[1].split()[1])
    assert box.probe().tick().parents is None, "not asked: not sent"


def test_kmsg_is_read_when_permitted_or_reported_unreadable(box: Box) -> None:
    bin_dir = box.root / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dmesg"
    fake.write_text("#!/bin/sh\nprintf '%s\\n' '[  1.0] usb 1-1: new device' "
                    "'[  9.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, GPU has fallen off the bus.'\n")
    fake.chmod(0o755)
    path = f"{bin_dir}:{box.env['PATH']}"
    snap = box.probe(PATH=path).tick("kmsg")
    xid = "[  9.1] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, GPU has fallen off the bus."
    assert snap.kernel_lines == (xid,)
    fake.write_text("#!/bin/sh\necho 'dmesg: read kernel buffer failed: Operation not permitted' >&2\n"
                    "exit 1\n")
    denied = box.probe(PATH=path).tick("kmsg")
    assert isinstance(denied.kernel_lines, NA)
