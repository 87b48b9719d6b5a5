"""Issue 13: nothing one box sends can stop, fool or starve the watcher.

Hostile records (valid framing, hostile values: 5000-digit numbers, 400-digit floats, NaN,
markup, OSC/CSI, NUL, invalid UTF-8, newlines in names) go through parse -> tracker ->
the UI's render helpers and the CLI's status renderers, and no exception escapes; a second
box fed good records keeps updating while the first is fed garbage. The probe itself runs
for real (under /bin/sh, and over the loopback sshd) for file names with newlines and `@@`,
and for 40 run logs of 100 KB that once made every record too big to read.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import csv
import io
import json
import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from cockpit.models.events import HostStateChanged, SnapshotTaken
from cockpit.models.hostview import HostTracker
from cockpit.models.parse import MAX_DIGITS, MAX_GPU_MESSAGE, parse_record
from cockpit.models.profile import Profile
from cockpit.models.queue import QueueLog, parse_queue_file
from cockpit.models.snapshot import (
    NA,
    FileStat,
    GpuReading,
    GpuStatus,
    HostSnapshot,
    HostState,
    LogChunk,
    Memory,
    QueueFacts,
    Reachability,
)
from cockpit.models.sweep import Instance
from cockpit.services.alerts.report import status_document, status_table
from cockpit.services.config.profiles import load_named
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import Fleet, HostWatcher, InstanceStatus
from cockpit.services.transport.probe import LOG_BUDGET, ProbePlan, share_budget
from cockpit.ui.render import (
    Palette,
    cell_row,
    disk_panel,
    fleet_cells,
    gpu_panel,
    health_lines,
    queue_header,
    state_cell,
)
from tests.sshd import Sshd
from tests.test_probe_script import PROBE, Box
from tests.test_status_sshd import connected_watcher
from tests.waiting import until

RULEBOOK = load_rulebook(user=False)
AUTODL = load_named("autodl")
PALETTE = Palette("green", "yellow", "red", "grey50")
MASTER = "/q/master.log"
LOGS = "/q/logs"
HUGE = "9" * 5000
HUGE_FLOAT = "1" * 400 + ".5"
NUL = b"\0"


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_named("autodl")


def instance(name: str = "a1") -> Instance:
    return Instance(name=name, profile="autodl", host="h", queue="/q/queue.txt",
                    queue_log=MASTER, run_logs=LOGS)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def record(seq: int, body: str, *, at: str = "1795000000") -> bytes:
    return f"@@begin {seq} {at} box\n@@tz +0000\n{body}@@end {seq}\n".encode(
        "utf-8", errors="surrogateescape")


def parse(data: bytes, name: str = "a1") -> HostSnapshot:
    return parse_record(data, instance=name, observed_at=time.time())


def render_everything(tracker: HostTracker, now: float) -> str:
    """Every render helper that shows a box, and both CLI status renderers, as text."""
    console = Console(file=io.StringIO(), width=140, color_system=None)
    console.print(state_cell(tracker.state, PALETTE, now))
    for cell in fleet_cells(tracker, PALETTE, now).values():
        console.print(cell)
    console.print(gpu_panel(tracker, PALETTE))
    console.print(disk_panel(tracker, PALETTE))
    console.print(queue_header(tracker, PALETTE))
    for cell_view in tracker.queue_view().cells:
        console.print(*cell_row(cell_view, PALETTE))
    console.print(health_lines(tracker, PALETTE, now))
    results = [InstanceStatus(tracker.instance, tracker.state, tracker.snapshot)]
    console.print(status_table(results))
    json.dumps(status_document(results, "sweep"))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


# --------------------------------------------------------------------------- one bad number

OVERLONG = [
    pytest.param(f"@@begin {HUGE} {HUGE} box\n@@end 1\n", id="begin-seq-and-clock"),
    pytest.param(f"@@begin 1 {HUGE_FLOAT} box\n@@end 1\n", id="begin-400-digit-float"),
    pytest.param(f"@@begin 1 1 b\n@@uptime {HUGE_FLOAT}\n@@end 1\n", id="uptime"),
    pytest.param(f"@@begin 1 1 b\n@@stat queue_log /q/m.log\n{HUGE} {HUGE} {HUGE}\n@@end 1\n",
                 id="stat-5000-digits"),
    pytest.param(f"@@begin 1 1 b\n@@stat queue_log /q/m.log\n{HUGE_FLOAT} {HUGE_FLOAT} 1\n@@end 1\n",
                 id="stat-400-digit-float"),
    pytest.param(f"@@begin 1 1 b\n@@proc /q/queue.txt\n{HUGE}\n@@end 1\n", id="proc"),
    pytest.param(f"@@begin 1 1 b\n@@log {MASTER}\n{HUGE} {HUGE} 1 {HUGE}\nAAAA\n@@end 1\n",
                 id="log-head"),
    pytest.param(f"@@begin 1 1 b\n@@tmux\n{HUGE} {HUGE} train\n{HUGE_FLOAT} 1 x\n@@end 1\n",
                 id="tmux"),
    pytest.param(f"@@begin 1 1 b\n@@mount /\n{HUGE} 1 1 {HUGE_FLOAT} 1 1 ext4 /\n@@end 1\n",
                 id="mount"),
    pytest.param(f"@@begin 1 1 b\n@@mem cgroup-v2\ncurrent {HUGE}\nmax {HUGE_FLOAT}\n"
                 f"oom_kill {HUGE}\n@@meminfo\nMemTotal: {HUGE} kB\n@@end 1\n", id="memory"),
    pytest.param(f"@@begin 1 1 b\n@@gpu\n{HUGE}, A100, GPU-1, {HUGE_FLOAT}, {HUGE}, 1, 1, 1, 1, 1, "
                 f"1, Disabled\n@@rc {HUGE}\n@@apps\nGPU-1, {HUGE}, {HUGE_FLOAT}\n@@rc 0\n@@end 1\n",
                 id="gpu-csv"),
    pytest.param(f"@@begin 1 1 b\n@@dir {LOGS}\n{HUGE} {HUGE_FLOAT} {HUGE} {LOGS}/a.log\n@@end 1\n",
                 id="dir"),
    pytest.param(f"@@begin 1 1 b\n@@ckpt /q/ck\n{HUGE_FLOAT} {HUGE} /q/ck/a.pt\n@@end 1\n", id="ckpt"),
    pytest.param(f"@@begin 1 1 b\n@@ptree\n{HUGE} {HUGE}\n@@end 1\n", id="ptree"),
]


@pytest.mark.parametrize("text", OVERLONG)
def test_an_overlong_number_in_any_section_is_na_not_an_exception(text: str, profile: Profile) -> None:
    snap = parse(text.encode())  # raised ValueError / OverflowError before
    tracker = HostTracker(instance(), profile, RULEBOOK)
    tracker.absorb(snap)
    assert tracker.bad_records == 0, tracker.bad_reason  # NA values, not a failure
    render_everything(tracker, time.time())


def test_numbers_past_max_digits_are_na_and_within_it_are_read() -> None:
    ok = "1" * MAX_DIGITS
    snap = parse(record(1, f"@@stat queue_log {MASTER}\n{ok} 1700000000 {ok + '1'}\n"))
    stat = snap.queue.queue_log
    assert stat is not None
    assert stat.size == int(ok)
    assert isinstance(stat.inode, NA)


def run_log(path: str, data: bytes, *, offset: int = 0, reset: bool = True) -> LogChunk:
    return LogChunk(path, 7, offset, data, reset=reset)


def snapshot(name: str, seq: int, *, chunks: tuple[LogChunk, ...] = (), marks: str | None = None,
             queue_text: str | None = None, run_logs: tuple[FileStat, ...] = (),
             kernel: tuple[str, ...] | None = None) -> HostSnapshot:
    na = NA("x")
    return HostSnapshot(
        instance=name, observed_at=1795000000.0 + seq, remote_time=1795000000.0 + seq, seq=seq,
        hostname=name, gpu=GpuReading(GpuStatus.ABSENT, (), "none"), mounts=(),
        memory=Memory("none", na, na, na), tmux=(),
        queue=QueueFacts(process_pids=(), queue_log=None, run_logs=run_logs,
                         newest_checkpoint=None, queue_text=queue_text, queue_marks=marks),
        log_chunks=chunks, utc_offset=0.0, kernel_lines=kernel)


def test_an_epoch_line_with_5000_digits_is_not_progress(profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    log = f"{LOGS}/c1.log"
    tracker.absorb(snapshot("a1", 1, chunks=(run_log(log, f"Epoch {HUGE}/5\nEpoch 2/5\n".encode()),)))
    assert tracker.bad_records == 0  # raised ValueError (int of 5000 digits) before
    assert (tracker.progress["c1"].epoch, tracker.progress["c1"].epochs) == (2, 5)


def test_master_log_marks_with_month_13_or_5000_digits_are_skipped() -> None:
    log = QueueLog()
    done = log.feed([
        "[2026-13-21 10:00:00] [1/2] STARTING a (recon, 2ep)",  # month 13: ValueError before
        f"[2026-11-21 10:00:00] [{HUGE}/2] STARTING b (recon, {HUGE}ep)",
        f"[2026-11-21 10:00:00] [1/{HUGE}] FINISHED b (exit={HUGE})",
        f"=== Queue q: {HUGE} ablations, starting from {HUGE} on h ===",
        "[2026-11-21 10:00:00] [2/2] STARTING c (recon, 2ep)",
        "[2026-11-21 10:01:00] [2/2] FINISHED c (exit=0)",
    ], 0.0)
    assert list(log.started) == ["c"]
    assert [name for name, _ in done] == ["c"]


def test_a_queue_file_with_a_5000_digit_epochs_field_uses_the_default() -> None:
    (line,) = parse_queue_file(f"configs/a.yaml recon {HUGE}\n")
    assert line.epochs == 20  # raised ValueError before


def test_a_section_that_fails_is_named_and_the_rest_of_the_record_is_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A GPU row past csv's 128 KiB field limit made csv raise; lines are now cut at
    # MAX_GPU_LINE_CHARS first, so the row is just unrecognised output.
    body = ("@@gpu\n0, " + "A" * 200_000 + ", GPU-1, 1, 1, 1, 1, 1, 1, 1, 1, Disabled\n@@rc 0\n"
            "@@mount /\n 10 1 9 100 10 90 ext4 /\n")
    snap = parse(record(3, body))
    assert [m.path for m in snap.mounts] == ["/"] and snap.bad == ()
    assert snap.gpu.status is GpuStatus.FAILED and len(snap.gpu.message) <= MAX_GPU_MESSAGE
    # Every parser is total now, so a failing one is made to fail: the section is named, the
    # mount still counts.
    import cockpit.models.parse as parse_module

    def broken(text: str, rc: int | None) -> None:
        raise csv.Error("field larger than field limit (131072)")

    monkeypatch.setattr(parse_module, "parse_gpus", broken)
    snap = parse(record(3, body))
    assert [m.path for m in snap.mounts] == ["/"]
    assert len(snap.bad) == 1 and snap.bad[0].startswith("@@gpu: Error"), snap.bad
    assert snap.seq == 3


def test_forty_thousand_proc_sections_give_their_union() -> None:
    body = "".join(f"@@proc /q/{i}\n{i}\n" for i in range(40_000))
    snap = parse(record(1, body))  # re-sorted per section before: quadratic, 21 s
    assert snap.queue.process_pids == tuple(range(40_000))


def test_a_record_the_tracker_cannot_absorb_is_counted_and_the_next_one_is_used(
        profile: Profile) -> None:
    tracker = HostTracker(instance(), profile, RULEBOOK)
    broken = snapshot("a1", 1, kernel=(b"not text",))  # type: ignore[arg-type]
    tracker.absorb(broken)
    assert tracker.bad_records == 1 and "AttributeError" in tracker.bad_reason
    assert any(j.kind == "bad-record" for j in tracker.judgements(time.time()))
    tracker.absorb(snapshot("a1", 2))
    assert tracker.snapshot is not None and tracker.snapshot.seq == 2
    assert "bad record x1" in render_everything(tracker, time.time())


def test_status_json_carries_the_bad_record_count_and_reason(profile: Profile) -> None:
    state = HostState("a1", Reachability.CONNECTED, 0.0, bad_records=3,
                      bad_reason="record 7: @@gpu: Error: field larger than field limit")
    doc = status_document([InstanceStatus(instance(), state, None)], "s")
    (inst,) = doc["instances"]
    assert (inst["bad_records"], inst["bad_reason"]) == (3, state.bad_reason)


# --------------------------------------------------------------------------- property tests

HOSTILE_TEXT = st.one_of(
    st.sampled_from([
        HUGE, HUGE_FLOAT, "NaN", "nan", "inf", "-inf", "1e999", "-0", "", " ", "-", "[N/A]",
        "[/bold]", "[@click=app.quit]x", "[link=http://x]y[/link]", "\x1b]52;c;cHduZWQ=\x07",
        "\x1b[2J", "\x00", "\u202e", "\ud800", "99999999999999999999999999999999",
        "@@end 1", "2026-13-45 99:99:99", "\r", "a\tb",
    ]),
    st.text(max_size=40),
    st.from_regex(r"-?[0-9]{1,60}(\.[0-9]{1,60})?", fullmatch=True),
)
NAME = st.text(min_size=1, max_size=30).filter(lambda s: "/" not in s and "\x00" not in s)


@st.composite
def hostile_records(draw: st.DrawFn) -> bytes:
    """Valid framing, hostile values, in the probe's own sections."""
    v = lambda: draw(HOSTILE_TEXT)  # noqa: E731 - a short name for many draws
    names = draw(st.lists(NAME, max_size=4))
    listing = b"".join(f"{v()} {v()} {v()} {LOGS}/".encode("utf-8", "surrogatepass")
                       + n.encode("utf-8", "surrogatepass") + b".log\0" for n in names)
    marks = "\n".join(
        f"[{v()}] [{v()}/{v()}] {draw(st.sampled_from(['STARTING', 'FINISHED']))} {n} "
        f"({v()}, {v()}ep) (exit={v()})" for n in names)
    ckpt = f"{v()} {v()} /q/ck/{v()}".encode("utf-8", "surrogatepass") + NUL
    sections = [
        f"@@uptime {v()}\n",
        f"@@gpu\n{v()}, {v()}, GPU-1, {v()}, {v()}, {v()}, {v()}, {v()}, {v()}, {v()}, {v()}, {v()}\n"
        f"@@rc {v()}\n@@apps\nGPU-1, {v()}, {v()}\n@@rc 0\n",
        f"@@mem cgroup-v2\ncurrent {v()}\nmax {v()}\noom_kill {v()}\n@@meminfo\nMemTotal: {v()} kB\n",
        f"@@tmux\n{v()} {v()} {v()}\n",
        f"@@mount {v()}\n{v()} {v()} {v()} {v()} {v()} {v()} {v()} {v()}\n",
        f"@@stat queue_log {MASTER}\n{v()} {v()} {v()}\n",
        f"@@text /q/queue.txt\n{b64(f'{v()} {v()} {v()}'.encode('utf-8', 'surrogatepass'))}\n",
        f"@@marks {MASTER}\n{b64(marks.encode('utf-8', 'surrogatepass'))}\n",
        f"@@dir64 {LOGS}\n{b64(listing)}\n",
        f"@@ckpt64 /q/ck\n{b64(ckpt)}\n",
        f"@@proc /q/queue.txt\n{v()}\n",
        f"@@ptree\n{v()} {v()}\n",
        f"@@kmsg\n{v()}\n",
    ]
    for n in names:
        data = f"Epoch {v()}/{v()}\n{v()}\nTraceback (most recent call last):\n{v()}\n"
        sections.append(f"@@log64 {b64(f'{LOGS}/{n}.log'.encode('utf-8', 'surrogatepass'))}\n"
                        f"{draw(st.sampled_from(['7 0 1', v() + ' ' + v() + ' 0']))} 1\n"
                        f"{b64(data.encode('utf-8', 'surrogatepass'))}\n")
    master = f"[2026-11-21 10:00:00] [{v()}/{v()}] STARTING x ({v()}, {v()}ep)\n"
    sections.append(f"@@log {MASTER}\n7 0 1 1\n{b64(master.encode('utf-8', 'surrogatepass'))}\n")
    chosen = draw(st.permutations(sections))
    seq = draw(st.sampled_from(["1", HUGE, v()]))
    clock = draw(st.sampled_from(["1795000000", v()]))
    return f"@@begin {seq} {clock} {v()}\n@@tz {v()}\n{''.join(chosen)}@@end 1\n".encode(
        "utf-8", "surrogatepass")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=hostile_records())
def test_hostile_records_go_through_parse_track_and_render(data: bytes) -> None:
    snap = parse(data)
    tracker = HostTracker(instance(), AUTODL, RULEBOOK)
    tracker.absorb(snap)
    tracker.absorb(snap)  # the same record twice: overlapping marks and tails
    assert tracker.absorb_failures == 0, tracker.bad_reason
    out = render_everything(tracker, 1795000000.0)
    assert "\x1b" not in out and "\x00" not in out


@settings(max_examples=150, deadline=None)
@given(data=st.binary(max_size=3000))
def test_random_bytes_go_through_parse_track_and_render(data: bytes) -> None:
    tracker = HostTracker(instance(), AUTODL, RULEBOOK)
    tracker.absorb(parse(b"@@begin 1 1 b\n" + data))
    assert tracker.absorb_failures == 0, tracker.bad_reason
    render_everything(tracker, time.time())


@settings(max_examples=60, deadline=None)
@given(garbage=st.lists(hostile_records(), min_size=1, max_size=4))
def test_a_second_box_keeps_updating_while_the_first_is_fed_garbage(garbage: list[bytes]) -> None:
    profile = AUTODL
    bad = HostTracker(instance("a1"), profile, RULEBOOK)
    good = HostTracker(instance("a2"), profile, RULEBOOK)
    for seq, data in enumerate(garbage, start=1):
        bad.absorb(parse(data, "a1"))
        line = f"Epoch {seq}/9\n".encode()
        good.absorb(parse(record(seq, f"@@log {LOGS}/g.log\n7 {seq * 100} {int(seq == 1)} "
                                      f"{len(line)}\n{b64(line)}\n"), "a2"))
        render_everything(bad, time.time())
        assert good.snapshot is not None and good.snapshot.seq == seq
        assert good.progress["g"].epoch == seq


# --------------------------------------------------------------------------- state stays bounded

def test_log_names_that_change_every_tick_leave_no_state_behind(profile: Profile) -> None:
    inst = instance()
    plan = ProbePlan(inst, profile)
    tracker = HostTracker(inst, profile, RULEBOOK)
    for tick in range(200):
        plan.request()
        paths = [f"{LOGS}/run-{tick}-{i}.log" for i in range(5)]
        stats = tuple(FileStat(p, 10, 1795000000.0, 1000 + i) for i, p in enumerate(paths))
        chunks = tuple(run_log(p, b"Epoch 1/2\n") for p in paths)
        snap = snapshot("a1", tick + 1, chunks=chunks, run_logs=stats)
        plan.absorb(snap)
        tracker.absorb(snap)
    # Before, every name ever seen kept a cursor, a splitter, a decoder and a classifier.
    assert len(plan.cursors) <= 6
    assert len(tracker._splitters) <= 6 and len(tracker._classifiers) <= 6
    assert len(tracker.progress) <= 5


def test_a_master_log_naming_a_new_cell_on_every_line_is_bounded() -> None:
    from cockpit.models.queue import MAX_CELLS

    log = QueueLog()
    lines = [f"[2026-11-21 10:00:00] [1/1] STARTING c{i} (recon, 2ep)" for i in range(MAX_CELLS + 500)]
    log.feed(lines, 0.0)
    assert len(log.order) <= MAX_CELLS and len(log.started) <= MAX_CELLS
    assert log.last_started == f"c{MAX_CELLS + 499}"


def test_the_log_budget_is_shared_fairly_and_never_exceeded() -> None:
    grants = share_budget([100, 10**9, 5, 10**9], LOG_BUDGET)
    assert grants[0] == 100 and grants[2] == 5
    assert abs(grants[1] - grants[3]) <= 1 and sum(grants) <= LOG_BUDGET
    assert sum(share_budget([10**6] * 40, LOG_BUDGET)) <= LOG_BUDGET


def test_probe_sh_and_the_client_agree_on_the_budget() -> None:
    assert f"budget_per_tick={LOG_BUDGET}\n" in PROBE.read_text()


# --------------------------------------------------------------------------- the real probe

def hostile_log_names() -> list[bytes]:
    return [
        b"a.log\n@@proc queue.txt\n4242\n@@end 1\nb.log",  # fake section, early end
        b"\n@@end 1\n.log",
        b"trailing newline.log\n",  # not *.log: never listed
        b"x\nfake.log",
        b"not-utf8-\xff\xfe.log",
        b"esc-\x1b[2J-\x1b]52;c;cHduZWQ=\x07.log",
        b"[bold][@click=app.quit]x[link=y].log",
    ]


def write_bytes(path: bytes, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    b = Box(tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


def test_file_names_with_newlines_and_sections_cannot_inject_one(box: Box) -> None:
    logs = box.data / "logs"
    logs.mkdir()
    names = hostile_log_names()
    for i, name in enumerate(names):
        write_bytes(os.path.join(os.fsencode(logs), name), b"line %d of a hostile name\n" % i)
    probe = box.probe()
    first = probe.tick(f"dir {logs}", f"proc {box.data}/queue.txt")
    assert first.bad == ()
    assert first.queue.process_pids == ()  # 4242 was injected as a live queue process before
    listed = {s.path: s for s in first.queue.run_logs}
    expected = {os.fsencode(logs) + b"/" + n for n in names if n.endswith(b".log")}
    assert {base64.b64decode(s.name_b64) if s.name_b64 else s.path.encode()
            for s in listed.values()} == expected
    # Each of them is then read by its exact bytes, through the same plan the fleet uses.
    inst = Instance(name="b", profile="generic-ssh", host="h", run_logs=str(logs))
    plan = ProbePlan(inst, load_named("generic-ssh"))
    plan.absorb(first)
    _, request = plan.request()
    reads = [line for line in request.decode().splitlines() if line.startswith("read")]
    probe.seq += 1
    assert probe.seq == 2
    probe.send([f"tick {probe.seq}", *reads, f"end {probe.seq}"])
    second = parse_record(probe.read_until(b"@@end 2\n"), instance="b", observed_at=0.0)
    got = {c.path: c.data for c in second.log_chunks}
    assert set(got) == set(listed)
    for i, name in enumerate(names):
        full = os.fsencode(logs) + b"/" + name
        if full in expected:
            path = full.decode("utf-8", errors="replace")
            assert got[path] == b"line %d of a hostile name\n" % i, path


def test_a_hostname_with_a_newline_cannot_start_a_section() -> None:
    # The probe keeps `uname -n` to one printable line; shown here on the same tr pipeline.
    text = PROBE.read_text()
    assert "host=$(uname -n | tr -c '[:graph:]\\n' '?' | tr -d '\\n')" in text


@pytest.mark.sshd
async def test_forty_logs_of_100_kb_are_all_watched_over_ssh(sshd: Sshd, tmp_path: Path) -> None:
    box, watcher = await connected_watcher(sshd, tmp_path)
    logs = box / "runs" / "logs"
    contents = {}
    for i in range(40):
        data = b"".join(b"cell %02d line %05d Epoch 1/2 loss 0.5\n" % (i, j) for j in range(2700))
        (logs / f"cell{i:02d}.log").write_bytes(data)
        contents[str(logs / f"cell{i:02d}.log")] = data
    received: dict[str, bytearray] = {}
    try:
        for _ in range(40):
            snap = await watcher.tick()  # raised ProbeLost (record over the window) before
            assert sum(len(c.data) for c in snap.log_chunks) <= LOG_BUDGET
            for chunk in snap.log_chunks:
                buf = received.setdefault(chunk.path, bytearray())
                if chunk.reset:
                    buf.clear()
                    buf.extend(b"\0" * chunk.offset)  # the first read starts at the tail
                assert len(buf) == chunk.offset, chunk.path
                buf.extend(chunk.data)
            if all(len(received.get(p, b"")) == len(d) for p, d in contents.items()):
                break
        for path, data in contents.items():
            tail = bytes(received[path])
            start = len(data) - len(tail.lstrip(b"\0"))
            assert tail[start:] == data[start:], path
            assert len(tail) == len(data), path
    finally:
        await watcher.close()


# --------------------------------------------------------------------------- the fleet

def local_sweep(root: Path) -> Path:
    for name in ("a", "b"):
        logs = root / name / "logs"
        logs.mkdir(parents=True)
        (root / name / "queue.txt").write_text("configs/c1.yaml recon 5\n")
        (root / name / "master.log").write_text("[2026-11-21 10:00:00] [1/1] STARTING c1 (recon, 5ep)\n")
        (logs / "c1.log").write_text("Epoch 1/5\n")
    hostile = root / "a" / "logs"
    for name in hostile_log_names():
        write_bytes(os.path.join(os.fsencode(hostile), name),
                    b"Epoch " + HUGE.encode() + b"/5\n\x1b[2J\xff\n")
    with (root / "a" / "master.log").open("a") as handle:
        handle.write(f"[2026-13-21 10:00:00] [{HUGE}/1] STARTING x (recon, {HUGE}ep)\n")
    with (root / "a" / "logs" / "c1.log").open("a") as handle:
        handle.write(f"Epoch {HUGE}/5\n")
    sweep = root / "sweep.yaml"
    sweep.write_text("sweep: hostile\ninterval: 0.2s\ninstances:\n" + "".join(
        f"  - name: {n}\n    profile: local\n    host: local\n    queue: \"{root / n}/queue.txt\"\n"
        f"    queue_log: \"{root / n}/master.log\"\n    run_logs: \"{root / n}/logs\"\n"
        for n in ("a", "b")))
    return sweep


@contextlib.asynccontextmanager
async def fleet_feeding(fleet: Fleet, trackers: dict[str, HostTracker]) -> AsyncIterator[None]:
    """The app's loop: every event into its box's tracker (no Textual needed)."""

    async def feed() -> None:
        async for event in fleet.events():
            if isinstance(event, HostStateChanged):
                trackers[event.state.instance].absorb_state(event.state)
            elif isinstance(event, SnapshotTaken):
                trackers[event.snapshot.instance].absorb(event.snapshot)

    fleet.start()
    task = asyncio.create_task(feed())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await fleet.stop()


async def test_a_hostile_box_never_stops_the_watcher_of_another(tmp_path: Path) -> None:
    loaded = load_sweep(local_sweep(tmp_path))
    fleet = Fleet(loaded.sweep, loaded.profiles, loaded.directory)
    trackers = {i.name: HostTracker(i, loaded.profiles[i.profile], RULEBOOK)
                for i in loaded.sweep.instances}
    good_log = tmp_path / "b" / "logs" / "c1.log"
    async with fleet_feeding(fleet, trackers):
        for epoch in (2, 3, 4):
            with good_log.open("a") as handle:
                handle.write(f"Epoch {epoch}/5\n")
            await until(f"box b shows epoch {epoch}",
                        lambda e=epoch: "c1" in trackers["b"].progress  # type: ignore[misc]
                        and trackers["b"].progress["c1"].epoch == e, 30)
        hostile = trackers["a"]
        await until("box a was read", lambda: hostile.snapshot is not None
                    and len(hostile.snapshot.queue.run_logs) >= 5, 30)
    assert hostile.absorb_failures == 0, hostile.bad_reason
    snap = hostile.snapshot
    assert snap is not None and snap.queue.process_pids == ()  # no injected pid
    assert hostile.state.reachability is Reachability.CONNECTED
    render_everything(hostile, time.time())


class CrashOnce(HostWatcher):
    """A watcher with a bug that strikes on its second tick (the supervisor's test double)."""

    ticks = 0

    async def tick(self) -> HostSnapshot:
        CrashOnce.ticks += 1
        if CrashOnce.ticks == 2:
            raise RuntimeError("a bug in the watcher")
        return await super().tick()


async def test_a_crashed_watcher_is_shown_and_restarted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import cockpit.services.transport.fleet as fleet_module

    loaded = load_sweep(local_sweep(tmp_path))
    monkeypatch.setattr(fleet_module, "HostWatcher", CrashOnce)
    CrashOnce.ticks = 0
    fleet = Fleet(loaded.sweep, loaded.profiles, loaded.directory,
                  backoff=fleet_module.Backoff(base=0.05, cap=0.1))
    trackers = {i.name: HostTracker(i, loaded.profiles[i.profile], RULEBOOK)
                for i in loaded.sweep.instances}
    crashed: list[HostState] = []
    async with fleet_feeding(fleet, trackers):
        await until("a crash is shown", lambda: any(t.state.crashes for t in trackers.values()), 30)
        name = next(n for n, t in trackers.items() if t.state.crashes)
        crashed.append(trackers[name].state)
        seq = trackers[name].snapshot.seq if trackers[name].snapshot else 0
        await until("the crashed watcher is restarted and reads again",
                    lambda: trackers[name].snapshot is not None
                    and trackers[name].snapshot.seq > seq
                    and trackers[name].state.reachability is Reachability.CONNECTED, 30)
    (state,) = crashed
    assert state.reachability is Reachability.STALE
    assert "the watcher crashed (RuntimeError: a bug in the watcher); restarted 1x" in state.detail
    assert "crashed x1" in render_everything(trackers[name], time.time())


# --------------------------------------------------------------------------- the app's worker

async def test_the_apps_fleet_worker_survives_a_bad_event_and_is_restarted_if_it_dies(
        tmp_path: Path) -> None:
    from cockpit.services.config.acks import AckStore
    from cockpit.ui.app import CockpitApp
    from tests.replay import NOW, replay_events, replay_sweep

    loaded = replay_sweep(tmp_path)
    good = [e for e in replay_events(with_key_problem=False) if isinstance(e, SnapshotTaken)]
    unknown = SnapshotTaken(snapshot("no-such-box", 1))  # absorb raises KeyError
    calls = []

    async def source() -> AsyncIterator[object]:
        calls.append(1)
        if len(calls) == 1:
            yield unknown  # one event that fails: shown and dropped, the rest still flow
            for event in good[:2]:
                yield event
            raise RuntimeError("the event source broke")  # the worker dies: restarted
        for event in good[2:]:
            yield event

    app = CockpitApp(loaded, source=source, clock=lambda: NOW,  # type: ignore[arg-type]
                     acks=AckStore(tmp_path / "acks.json"), banners=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await until("the worker is restarted and the rest arrives",
                    lambda: len(calls) >= 2 and all(
                        app.trackers[e.snapshot.instance].snapshot is not None
                        and app.trackers[e.snapshot.instance].snapshot.seq >= 3  # type: ignore[union-attr]
                        for e in good[-2:]), 30)
        await pilot.pause()
        assert app.fleet_errors == 1
        assert app.fleet_crashes == 1
        assert "the fleet watcher crashed 1x, restarted (RuntimeError" in app.sub_title
