"""GPU health: a failed nvidia-smi / NVML call or a lost GPU is an alert; partial answers keep
the healthy rows; MIG mode and devices are read (and asked for only when MIG is on).

Parsers run on the recordings in tests/data/nvidia-smi (formats and sources in
tests/data/README.md); the probe runs under /bin/sh with a fake nvidia-smi that answers from
those files; the end-to-end test goes through a real OpenSSH sshd whose sessions find that fake
nvidia-smi first on PATH.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from cockpit.models.alerts import AlertLatch, material
from cockpit.models.health import gpu_problem
from cockpit.models.hostview import HostTracker
from cockpit.models.parse import (
    GPU_FIELDS,
    MAX_GPU_LINE_CHARS,
    MAX_GPUS,
    MAX_MIG_PER_GPU,
    attach_mig,
    handle_error_bus_id,
    parse_gpus,
    parse_mig_list,
    parse_record,
)
from cockpit.models.profile import Profile
from cockpit.models.snapshot import GpuReading, GpuStatus, HostSnapshot
from cockpit.services.config.profiles import load_named
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.transport.fleet import HostWatcher
from cockpit.ui.render import Palette, fleet_cells, gpu_panel
from tests.sshd import SSHD, Sshd, require
from tests.test_hostview import RULEBOOK, instance, snapshot
from tests.test_probe_script import Box
from tests.test_status_sshd import run_cli, write_box, write_sweep

DATA = Path(__file__).resolve().parent / "data" / "nvidia-smi"
UNKNOWN_ERROR = "Unable to determine the device handle for GPU0000:41:00.0: Unknown Error"
GPU_LOST = ("Unable to determine the device handle for GPU1: 0000:0A:00.0: GPU is lost.  "
            "Reboot the system to recover this GPU")
PALETTE = Palette("green", "yellow", "red", "grey50")


def text(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_named("autodl")


def with_gpu(reading: GpuReading, **extra: object) -> HostSnapshot:
    return dataclasses.replace(snapshot(**extra), gpu=reading)  # type: ignore[arg-type]


def rendered(renderable: object, width: int = 200) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


# --------------------------------------------------------------------------- parsers
def test_partial_answer_keeps_the_healthy_rows_and_names_the_bad_gpu() -> None:
    reading = parse_gpus(text("a100-x8-gpu2-unknown-error.txt"), 255)
    assert reading.status is GpuStatus.OK
    assert [g.index for g in reading.gpus] == [0, 1, 3, 4, 5, 6, 7]
    assert reading.gpus[2].util_pct == 54.0  # gpu3's numbers, in place
    assert reading.errors == (UNKNOWN_ERROR,)
    assert reading.expected == 8 and reading.rc == 255
    assert reading.partial
    assert handle_error_bus_id(UNKNOWN_ERROR) == "0000:41:00.0"


def test_gpu_lost_in_the_newer_wording() -> None:
    reading = parse_gpus(text("rtx-3090-x2-gpu1-lost.txt"), 15)
    assert [g.index for g in reading.gpus] == [0]
    assert reading.errors == (GPU_LOST,)
    assert reading.expected == 2 and reading.partial
    assert handle_error_bus_id(GPU_LOST) == "0000:0A:00.0"


def test_a_box_whose_only_gpu_fails_is_failed_with_nvidia_smis_words() -> None:
    reading = parse_gpus(text("handle-unknown-error.txt"), 255)
    assert reading.status is GpuStatus.FAILED and reading.gpus == ()
    assert reading.message == "Unable to determine the device handle for GPU 0000:0B:00.0: Unknown Error"
    assert reading.expected == 1


def test_a_healthy_answer_is_not_partial() -> None:
    reading = parse_gpus(text("a100-sxm4-80gb-x8.csv"), 0)
    assert not reading.partial and reading.errors == () and reading.expected == 8


def test_mig_devices_from_nvidia_smi_list() -> None:
    devices = parse_mig_list(text("h100-mig.L.txt"))
    assert list(devices) == [0]
    assert [(d.profile, d.device) for d in devices[0]] == [("3g.40gb", 0), ("2g.20gb", 1),
                                                            ("1g.10gb", 2)]
    assert devices[0][0].uuid == "MIG-4f1c8e2a-93d7-5b60-8e1f-2a7c90d4b315"


def test_mig_devices_attach_to_their_parent_gpu_only() -> None:
    reading = parse_gpus(text("a100-x2-mig-gpu1.csv"), 0)
    assert [g.mig_enabled for g in reading.gpus] == [False, True]
    attached = attach_mig(reading, parse_mig_list(text("a100-x2-mig-gpu1.L.txt")))
    assert attached.gpus[0].mig_devices == ()
    assert [d.profile for d in attached.gpus[1].mig_devices] == ["3g.20gb", "2g.10gb", "1g.5gb",
                                                                  "1g.5gb"]


def test_a_record_carries_partial_rows_apps_and_mig_devices() -> None:
    rec = ("@@begin 4 1732187412 h\n@@gpu\n" + text("a100-x2-mig-gpu1.csv") + "@@rc 0\n"
           "@@apps\n@@rc 0\n@@mig\n" + text("a100-x2-mig-gpu1.L.txt") + "@@rc 0\n@@end 4\n")
    snap = parse_record(rec.encode(), instance="b", observed_at=0.0)
    assert len(snap.gpu.gpus[1].mig_devices) == 4 and snap.gpu.mig_error == ""


def test_a_failed_mig_listing_is_named() -> None:
    rec = ("@@begin 5 1732187412 h\n@@gpu\n" + text("h100-mig.csv") + "@@rc 0\n@@apps\n@@rc 0\n"
           "@@mig\n" + UNKNOWN_ERROR + "\n@@rc 255\n@@end 5\n")
    snap = parse_record(rec.encode(), instance="b", observed_at=0.0)
    assert snap.gpu.gpus[0].mig_devices == ()
    assert snap.gpu.mig_error == f"nvidia-smi -L exited 255: {UNKNOWN_ERROR}"


def test_gpu_answers_are_bounded() -> None:
    row = text("rtx-4090.csv").strip()
    rows = "\n".join(row.replace("0, ", f"{i}, ", 1) for i in range(10 * MAX_GPUS))
    assert len(parse_gpus(rows, 0).gpus) == MAX_GPUS
    huge = parse_gpus("x" * 1_000_000, 255)
    assert huge.status is GpuStatus.FAILED and len(huge.message) <= 600
    long_name = parse_gpus(row.replace("GeForce", "G" * 100_000), 0)
    assert len(long_name.gpus) <= 1 and all(len(e) <= MAX_GPU_LINE_CHARS for e in long_name.errors)
    many = "GPU 0: X (UUID: GPU-1)\n" + "".join(
        f"  MIG 1g.5gb      Device {i:2d}: (UUID: MIG-{i})\n" for i in range(100))
    assert len(parse_mig_list(many)[0]) == MAX_MIG_PER_GPU


# --------------------------------------------------------------------------- problems
def test_failed_nvidia_smi_is_a_problem_with_its_words_and_an_action() -> None:
    reading = parse_gpus(text("driver-failure.txt"), 9)
    problem = gpu_problem(reading)
    assert problem is not None and problem.kind == "failed"
    assert problem.text.startswith("GPU failed: NVIDIA-SMI has failed")
    assert reading.message in problem.detail and "reboot or re-rent" in problem.detail


def test_no_devices_is_a_problem_only_where_gpus_are_expected_or_were_seen() -> None:
    reading = parse_gpus(text("no-devices.txt"), 6)
    assert gpu_problem(reading) is None  # a box rented without GPUs says it too
    assert gpu_problem(reading, expected=1) is not None
    seen = gpu_problem(reading, seen=[0, 1])
    assert seen is not None and seen.kind == "no-devices"
    assert seen.text == "no GPUs: No devices were found (2 expected)"


def test_partial_and_lost_problems() -> None:
    partial = gpu_problem(parse_gpus(text("a100-x8-gpu2-unknown-error.txt"), 255))
    assert partial is not None and partial.kind == "partial"
    assert partial.text == f"GPU 7/8 answered: {UNKNOWN_ERROR}"
    healthy = parse_gpus(text("a100-sxm4-80gb-x8.csv"), 0)
    assert gpu_problem(healthy, seen=range(8)) is None
    fewer = dataclasses.replace(healthy, gpus=healthy.gpus[:6], expected=6)
    lost = gpu_problem(fewer, seen=range(8))
    assert lost is not None and lost.kind == "lost"
    assert lost.text == "GPU lost: gpu6, gpu7 (6/8 answered)"
    assert gpu_problem(healthy, expected=8) is None
    assert gpu_problem(parse_gpus(text("rtx-4090.csv"), 0), expected=2) is not None


def test_absent_nvidia_smi_is_no_problem() -> None:
    assert gpu_problem(GpuReading(GpuStatus.ABSENT, (), "nvidia-smi not found"), expected=8) is None


# --------------------------------------------------------------------------- alerts and views
def test_failure_is_an_alert_once_per_episode_and_counts(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    latch = AlertLatch()
    tracker.absorb(with_gpu(parse_gpus(text("a100-sxm4-80gb-x8.csv"), 0)))
    assert latch.update("a1", material(tracker, 0.0)) == []
    failed = with_gpu(parse_gpus(text("driver-failure.txt"), 9))
    tracker.absorb(failed)
    (alert,) = latch.update("a1", material(tracker, 0.0))
    assert alert.kind == "gpu-failed" and alert.text.startswith("a1: GPU failed: NVIDIA-SMI")
    assert "reboot or re-rent" in alert.detail
    assert any(a.startswith("GPU failed") for a in tracker.alerts(0.0))  # the alert count
    for _ in range(3):
        tracker.absorb(failed)
        assert latch.update("a1", material(tracker, 0.0)) == []
    tracker.absorb(with_gpu(parse_gpus(text("a100-sxm4-80gb-x8.csv"), 0)))
    assert latch.update("a1", material(tracker, 0.0)) == []


def test_a_gpu_seen_before_and_gone_is_an_alert(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    healthy = parse_gpus(text("a100-sxm4-80gb-x8.csv"), 0)
    tracker.absorb(with_gpu(healthy))
    tracker.absorb(with_gpu(dataclasses.replace(healthy, gpus=healthy.gpus[:7], expected=7)))
    (alert,) = material(tracker, 0.0)
    assert alert.kind == "gpu-failed" and "GPU lost: gpu7 (7/8 answered)" in alert.text


def test_fleet_cell_and_box_panel_show_the_error_whole(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(with_gpu(parse_gpus(text("a100-x8-gpu2-unknown-error.txt"), 255)))
    cells = fleet_cells(tracker, PALETTE, 0.0)
    cell = cells["GPU"]
    assert not isinstance(cell, str)
    assert cell.plain == f"GPU 7/8 answered: {UNKNOWN_ERROR}" and str(cell.style) == "red"
    assert cells["alerts"].plain != "-"  # type: ignore[union-attr]
    panel = rendered(gpu_panel(tracker, PALETTE))
    assert UNKNOWN_ERROR in panel.replace("\n", " ") or UNKNOWN_ERROR in panel
    assert "A100-SXM4-80GB" in panel and "7 of 8 GPUs answered" in panel
    tracker.absorb(with_gpu(parse_gpus(text("driver-failure.txt"), 9)))
    whole = rendered(gpu_panel(tracker, PALETTE), width=400)
    assert "couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver " \
           "is installed and running." in whole


def test_box_panel_shows_mig_mode_and_devices(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    reading = attach_mig(parse_gpus(text("a100-x2-mig-gpu1.csv"), 0),
                         parse_mig_list(text("a100-x2-mig-gpu1.L.txt")))
    tracker.absorb(with_gpu(reading))
    panel = rendered(gpu_panel(tracker, PALETTE), width=400)
    assert "MIG" in panel and "Enabled" in panel and "Disabled" in panel
    assert "gpu1 MIG: 3g.20gb #0 MIG-90c15d2e-7a43-5b18-9f6e-0d2a4c7b8e13" in panel
    assert "gpu0 MIG" not in panel


def test_box_panel_without_mig_has_no_mig_column(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    tracker.absorb(with_gpu(parse_gpus(text("rtx-4090.csv"), 0)))
    assert "MIG" not in rendered(gpu_panel(tracker, PALETTE))


# --------------------------------------------------------------------------- the probe
FAKE = """#!/bin/sh
# nvidia-smi stand-in: answers from files the test rewrites; logs every call.
printf '%s\\n' "$*" >> {d}/calls
case "$1" in
  --query-gpu={fields}) cat {d}/gpu.txt; exit "$(cat {d}/gpu.rc)" ;;
  --query-compute-apps=*) exit 0 ;;
  -L) cat {d}/list.txt; exit "$(cat {d}/list.rc)" ;;
esac
echo "unexpected: $*"
exit 99
"""


class FakeSmi:
    """A fake nvidia-smi in `bindir`, answering with recorded files."""

    def __init__(self, root: Path) -> None:
        self.dir = root
        self.bindir = root / "fakebin"
        self.bindir.mkdir(parents=True)
        script = self.bindir / "nvidia-smi"
        script.write_text(FAKE.format(d=root, fields=GPU_FIELDS))
        script.chmod(0o755)
        self.answer("a100-sxm4-80gb-x8.csv", 0)
        self.listing("h100-mig.L.txt", 0)

    def answer(self, name: str, rc: int) -> None:
        (self.dir / "gpu.txt").write_text(text(name))
        (self.dir / "gpu.rc").write_text(str(rc))

    def listing(self, name: str, rc: int) -> None:
        (self.dir / "list.txt").write_text(text(name))
        (self.dir / "list.rc").write_text(str(rc))

    def calls(self) -> list[str]:
        path = self.dir / "calls"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    if sys.platform != "linux" or shutil.which("bash") is None:
        pytest.skip("probe.sh targets Linux boxes")
    b = Box(tmp_path)
    try:
        yield b
    finally:
        b.cleanup()


def test_probe_asks_for_mig_devices_only_when_mig_is_on(box: Box) -> None:
    fake = FakeSmi(box.root / "smi")
    probe = box.probe("1", PATH=f"{fake.bindir}:{box.env['PATH']}")
    off = probe.tick()
    assert len(off.gpu.gpus) == 8
    assert not any(call == "-L" for call in fake.calls())
    fake.answer("h100-mig.csv", 0)
    on = probe.tick()
    assert fake.calls().count("-L") == 1
    assert [d.profile for d in on.gpu.gpus[0].mig_devices] == ["3g.40gb", "2g.20gb", "1g.10gb"]
    fake.listing("handle-unknown-error.txt", 255)
    broken = probe.tick()
    assert broken.gpu.mig_error.startswith("nvidia-smi -L exited 255: Unable to determine")


def test_probe_keeps_the_healthy_rows_of_a_partial_answer(box: Box) -> None:
    fake = FakeSmi(box.root / "smi")
    fake.answer("a100-x8-gpu2-unknown-error.txt", 255)
    snap = box.probe("1", PATH=f"{fake.bindir}:{box.env['PATH']}").tick()
    assert [g.index for g in snap.gpu.gpus] == [0, 1, 3, 4, 5, 6, 7]
    assert snap.gpu.errors == (UNKNOWN_ERROR,) and snap.gpu.rc == 255


def test_probe_bounds_the_lines_of_a_flooding_nvidia_smi(box: Box) -> None:
    fake = FakeSmi(box.root / "smi")
    (fake.dir / "gpu.txt").write_text(("x" * 5000 + "\n") * 3000)
    (fake.dir / "gpu.rc").write_text("1")
    raw = box.probe("1", PATH=f"{fake.bindir}:{box.env['PATH']}").raw().decode()
    section = raw.split("@@gpu\n", 1)[1].split("@@rc ", 1)[0].splitlines()
    assert len(section) == 512 and all(len(line) == 512 for line in section)
    assert "@@rc 1\n@@apps" in raw  # nvidia-smi's status survives the cut


def test_probe_indents_a_line_that_would_start_a_section(box: Box) -> None:
    fake = FakeSmi(box.root / "smi")
    (fake.dir / "gpu.txt").write_text("@@end 1\n@@proc x\n")
    (fake.dir / "gpu.rc").write_text("3")
    snap = box.probe("1", PATH=f"{fake.bindir}:{box.env['PATH']}").tick()
    assert snap.gpu.status is GpuStatus.FAILED and "@@end 1" in snap.gpu.message


# --------------------------------------------------------------------------- real sshd
@pytest.fixture
def smi_server(tmp_path: Path) -> Iterator[tuple[Sshd, FakeSmi]]:
    require(SSHD, "OpenSSH sshd")
    fake = FakeSmi(tmp_path / "smi")
    server = Sshd(tmp_path / "sshd",
                  env={"PATH": f"{fake.bindir}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"})
    server.start()
    try:
        yield server, fake
    finally:
        server.stop()


@pytest.mark.sshd
def test_status_and_tracker_through_real_sshd(smi_server: tuple[Sshd, FakeSmi],
                                              tmp_path: Path) -> None:
    server, fake = smi_server
    box = write_box(tmp_path)
    config = server.write_client_files("gpu-box-1", tmp_path)
    sweep = write_sweep(tmp_path, config, box)

    healthy = run_cli("status", str(sweep), "--json")
    assert healthy.returncode == 0, healthy.stderr
    (inst,) = json.loads(healthy.stdout)["instances"]
    assert len(inst["gpu"]["gpus"]) == 8 and inst["gpu_problem"] is None

    fake.answer("a100-x8-gpu2-unknown-error.txt", 255)
    partial = run_cli("status", str(sweep), "--json")
    assert partial.returncode == 1
    assert f"b1: GPU 7/8 answered: {UNKNOWN_ERROR}" in partial.stderr
    (inst,) = json.loads(partial.stdout)["instances"]
    assert inst["reachable"] is True and len(inst["gpu"]["gpus"]) == 7
    assert inst["gpu"]["errors"] == [UNKNOWN_ERROR]
    assert inst["gpu_problem"]["kind"] == "partial"

    fake.answer("driver-failure.txt", 9)
    table = run_cli("status", str(sweep))
    assert table.returncode == 1
    assert "b1: GPU failed: NVIDIA-SMI has failed because it couldn't communicate" in table.stderr

    # The watcher's tracker raises the alert from the same box, once.
    loaded = load_sweep(sweep)
    inst_model = loaded.sweep.instances[0]
    tracker = HostTracker(inst_model, loaded.profiles["generic-ssh"], RULEBOOK)
    latch = AlertLatch()

    async def watch() -> None:
        watcher = HostWatcher(inst_model, loaded.profiles["generic-ssh"], loaded.sweep.ssh,
                              loaded.directory)
        assert await watcher.connect()
        try:
            fake.answer("a100-sxm4-80gb-x8.csv", 0)
            tracker.absorb(await watcher.tick())
            assert latch.update("b1", material(tracker, 0.0)) == []
            fake.answer("a100-x8-gpu2-unknown-error.txt", 255)
            tracker.absorb(await watcher.tick())
            (alert,) = latch.update("b1", material(tracker, 0.0))
            assert alert.kind == "gpu-failed" and UNKNOWN_ERROR in alert.text
            tracker.absorb(await watcher.tick())
            assert latch.update("b1", material(tracker, 0.0)) == []
        finally:
            await watcher.close()

    asyncio.run(watch())
