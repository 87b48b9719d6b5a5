"""The parsers in cockpit.models.parse against the tool outputs in tests/data.

The fixtures are transcribed in the tools' real formats (see tests/data/README.md). Every
parser must be total: garbage gives NA values with a reason, never an exception.
"""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest

from cockpit.models.parse import (
    attach_apps,
    parse_apps,
    parse_df_output,
    parse_df_posix,
    parse_gpus,
    parse_memory,
    parse_record,
    parse_tmux,
    split_sections,
)
from cockpit.models.snapshot import NA, GpuStatus, HostSnapshot, Mount
from cockpit.services.transport.probe import chunk_text

DATA = Path(__file__).resolve().parent / "data"

DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running."
)
A100_UUIDS = (
    "GPU-cc9afeec-d424-0363-9f33-8b03fedf5171",
    "GPU-c9e9d65f-f5d9-528e-c5a2-89cba5dec832",
    "GPU-62341b61-4140-958c-1381-d80ac64fc71f",
    "GPU-6b4c2669-a446-0790-a604-ea7b5c2b5f3f",
    "GPU-dddbdd5a-4584-deb4-a463-dcdf4d2998a4",
    "GPU-0764080f-5063-a801-b36d-6818adb1c1db",
    "GPU-82fef361-ab90-3252-e880-8dc0294aa527",
    "GPU-d215d4bd-b74f-f68c-f068-96aa9fb811fc",
)
LOG_BYTES = b"step 1200 loss 1.8734\n\xff\xfe loss nan\n"
MEMTOTAL = 2113436784 * 1024
MEMAVAILABLE = 1986522320 * 1024


def text(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def record(name: str) -> bytes:
    return (DATA / "records" / name).read_bytes()


def snapshot(name: str) -> HostSnapshot:
    return parse_record(record(name), instance="box", observed_at=1000.0)


def mem_lines(version: str, *, limit_file: str) -> list[str]:
    """The body of the probe's `@@mem` section, built from raw cgroup files like probe.sh does."""
    if version == "v2":
        current, events = "cgroup/v2/memory.current", "cgroup/v2/memory.events"
    else:
        current, events = "cgroup/v1/memory.usage_in_bytes", "cgroup/v1/memory.oom_control"
    lines = [f"current {text(current).strip()}", f"max {text(limit_file).strip()}"]
    return lines + [ln for ln in text(events).splitlines() if ln.startswith("oom_kill ")]


def meminfo_lines() -> list[str]:
    """`grep -E '^(MemTotal|MemAvailable):' /proc/meminfo`, as the probe sends it."""
    return [ln for ln in text("cgroup/proc-meminfo").splitlines()
            if ln.startswith(("MemTotal:", "MemAvailable:"))]


# --------------------------------------------------------------------------- nvidia-smi


def test_a100_box_has_eight_gpus_with_parsed_values() -> None:
    reading = parse_gpus(text("nvidia-smi/a100-sxm4-80gb-x8.csv"), 0)
    assert reading.status is GpuStatus.OK
    assert reading.message == ""
    assert [g.index for g in reading.gpus] == list(range(8))
    assert tuple(g.uuid for g in reading.gpus) == A100_UUIDS
    assert {g.name for g in reading.gpus} == {"NVIDIA A100-SXM4-80GB"}
    busy, idle = reading.gpus[0], reading.gpus[2]
    assert busy.util_pct == 100.0
    assert busy.mem_used_mib == 78213.0
    assert busy.mem_total_mib == 81920.0
    assert busy.temp_c == 67.0
    assert busy.power_w == pytest.approx(387.52)
    assert busy.power_limit_w == 400.0
    assert busy.sm_clock_mhz == 1410.0
    assert busy.sm_clock_max_mhz == 1410.0
    assert busy.mig_mode == "Disabled"
    assert busy.mem_pct == pytest.approx(100.0 * 78213 / 81920)
    assert idle.util_pct == 0.0
    assert idle.mem_used_mib == 0.0
    assert idle.sm_clock_mhz == 210.0
    assert idle.mem_pct == 0.0
    assert [g.util_pct for g in reading.gpus] == [100.0, 98.0, 0.0, 54.0, 0.0, 0.0, 100.0, 0.0]


def test_processes_are_attached_to_their_gpu_by_uuid() -> None:
    reading = parse_gpus(text("nvidia-smi/a100-sxm4-80gb-x8.csv"), 0)
    procs = parse_apps(text("nvidia-smi/a100-sxm4-80gb-x8.apps.csv"))
    assert [p.pid for p in procs] == [48213, 48214, 51002, 51007, 60231]
    attached = attach_apps(reading, procs)
    by_index = {g.index: [p.pid for p in g.processes] for g in attached.gpus}
    assert by_index == {0: [48213], 1: [48214], 2: [], 3: [51002, 51007], 4: [], 5: [], 6: [60231], 7: []}
    for gpu in attached.gpus:
        assert all(p.gpu_uuid == gpu.uuid for p in gpu.processes)
    assert attached.gpus[3].processes[1].used_mib == 20107.0
    # Everything else about the GPUs is unchanged.
    assert attached.gpus[6].util_pct == reading.gpus[6].util_pct == 100.0


def test_rtx_4090_consumer_card() -> None:
    reading = parse_gpus(text("nvidia-smi/rtx-4090.csv"), 0)
    assert reading.status is GpuStatus.OK
    (gpu,) = reading.gpus
    assert gpu.name == "NVIDIA GeForce RTX 4090"
    assert gpu.uuid == "GPU-a6431ed4-5c8b-dfc4-e3b5-a0e0f0f497ac"
    assert gpu.mem_total_mib == 24564.0
    assert gpu.power_w == pytest.approx(431.27)
    assert gpu.power_limit_w == 450.0
    assert gpu.sm_clock_max_mhz == 3120.0


def test_mig_mode_na_marker_is_na() -> None:
    (gpu,) = parse_gpus(text("nvidia-smi/rtx-4090.csv"), 0).gpus
    assert gpu.mig_mode == NA("[N/A]")


def test_power_draw_na_keeps_the_marker_as_reason() -> None:
    (gpu,) = parse_gpus(text("nvidia-smi/cloud-a10g-power-na.csv"), 0).gpus
    assert gpu.power_w == NA("[N/A]")
    assert gpu.power_limit_w == 300.0
    assert gpu.util_pct == 88.0
    assert gpu.mem_pct == pytest.approx(100.0 * 18342 / 23028)


def test_not_supported_keeps_the_marker_as_reason() -> None:
    (gpu,) = parse_gpus(text("nvidia-smi/geforce-not-supported.csv"), 0).gpus
    assert gpu.name == "NVIDIA GeForce GTX 1050 Ti"
    assert gpu.power_w == NA("[Not Supported]")
    assert gpu.power_limit_w == 75.0
    assert gpu.sm_clock_mhz == 1290.0


def test_h100_with_mig_enabled() -> None:
    reading = parse_gpus(text("nvidia-smi/h100-mig.csv"), 0)
    (gpu,) = reading.gpus
    assert gpu.mig_mode == "Enabled"
    assert gpu.util_pct == NA("[N/A]")
    assert gpu.mem_used_mib == 19876.0
    assert gpu.mem_total_mib == 81559.0
    assert gpu.power_limit_w == 700.0
    procs = parse_apps(text("nvidia-smi/h100-mig.apps.csv"))
    assert [(p.pid, p.used_mib) for p in procs] == [(7312, NA("[N/A]")), (7313, NA("[N/A]"))]
    (attached,) = attach_apps(reading, procs).gpus
    assert [p.pid for p in attached.processes] == [7312, 7313]


def test_driver_failure_is_failed_with_the_message() -> None:
    reading = parse_gpus(text("nvidia-smi/driver-failure.txt"), 9)
    assert reading.status is GpuStatus.FAILED
    assert reading.gpus == ()
    assert reading.message == DRIVER_FAILURE


def test_driver_failure_text_fails_even_without_an_exit_status() -> None:
    reading = parse_gpus(text("nvidia-smi/driver-failure.txt"), None)
    assert reading.status is GpuStatus.FAILED
    assert reading.message == DRIVER_FAILURE


def test_no_devices_found_with_its_real_exit_status() -> None:
    # nvidia-smi exits 6 here, so the rc check wins: FAILED, with nvidia-smi's words.
    reading = parse_gpus(text("nvidia-smi/no-devices.txt"), 6)
    assert reading.status is GpuStatus.FAILED
    assert reading.gpus == ()
    assert reading.message == "No devices were found"


def test_unrecognised_gpu_output_is_failed_not_empty() -> None:
    reading = parse_gpus('Field "mig.mode.current" is not a valid field to query.\n', 0)
    assert reading.status is GpuStatus.FAILED
    assert "not a valid field" in reading.message


def test_apps_are_not_attached_to_a_failed_reading() -> None:
    failed = parse_gpus(text("nvidia-smi/driver-failure.txt"), 9)
    procs = parse_apps(text("nvidia-smi/a100-sxm4-80gb-x8.apps.csv"))
    assert attach_apps(failed, procs) is failed


# --------------------------------------------------------------------------- df


def test_mount_point_with_spaces_is_kept_intact() -> None:
    mount = parse_df_output("/mnt/my data", text("df/output-space-in-target.txt"))
    assert mount.error == ""
    assert mount.target == "/mnt/my data"
    assert mount.fstype == "ext4"
    assert mount.bytes_total == 982820896768
    assert mount.bytes_used == 412371050496
    assert mount.bytes_avail == 520447942656
    assert (mount.inodes_total, mount.inodes_used, mount.inodes_avail) == (61054976, 1843211, 59211765)
    assert mount.bytes_pct == pytest.approx(44.21, abs=0.01)


def test_overlay_root_and_nfs() -> None:
    overlay = parse_df_output("/", text("df/output-overlay-root.txt"))
    assert (overlay.fstype, overlay.target) == ("overlay", "/")
    assert overlay.bytes_total == 53687091200
    assert overlay.inodes_pct == pytest.approx(100.0 * 214733 / 3276800)
    nfs = parse_df_output("/workspace/data", text("df/output-nfs.txt"))
    assert (nfs.path, nfs.fstype, nfs.target) == ("/workspace/data", "nfs4", "/workspace")
    assert nfs.inodes_total == 2147483647
    assert nfs.bytes_pct == pytest.approx(30.0, abs=0.1)


def test_inode_trap_is_100_pct_inodes_with_34_pct_bytes() -> None:
    mount = parse_df_output("/root/autodl-tmp", text("df/output-inodes-full.txt"))
    assert mount.inodes_avail == 0
    assert mount.inodes_pct == 100.0
    assert mount.bytes_pct == pytest.approx(34.0, abs=0.1)


def test_dash_inode_columns_give_na_inodes() -> None:
    mount = parse_df_output("/mnt/bucket", text("df/output-inodes-unknown.txt"))
    assert mount.error == ""
    assert mount.fstype == "fuse.s3fs"
    assert mount.inodes_total == NA("not reported")
    assert mount.inodes_used == NA("not reported")
    assert isinstance(mount.inodes_pct, NA)
    assert mount.bytes_total == 1125899906842624
    assert not isinstance(mount.bytes_pct, NA)


def test_vfat_zero_inodes_give_na_inodes_pct() -> None:
    mount = parse_df_output("/boot/efi", text("df/output-vfat.txt"))
    assert (mount.inodes_total, mount.inodes_used, mount.inodes_avail) == (0, 0, 0)
    assert mount.inodes_pct == NA("no inode accounting")
    assert mount.bytes_pct == pytest.approx(100.0 * 6369280 / (6369280 + 529436672))


def test_missing_path_is_an_error_with_dfs_message() -> None:
    mount = parse_df_output("/nope", text("df/output-missing.txt"))
    assert mount.path == "/nope"
    assert mount.error == "/nope: No such file or directory"
    assert mount.bytes_total == NA("/nope: No such file or directory")
    assert mount.bytes_pct == NA("/nope: No such file or directory")
    assert isinstance(mount.inodes_pct, NA)


def test_df_printed_nothing() -> None:
    mount = parse_df_output("/x", "")
    assert mount.error == "df printed nothing"
    assert isinstance(mount.target, NA)


def test_posix_fallback_busybox() -> None:
    mount = parse_df_posix("/", text("df/busybox-P-B1.txt"), text("df/busybox-P-i.txt"))
    assert mount.error == ""
    assert mount.target == "/"
    assert isinstance(mount.fstype, NA)
    assert (mount.bytes_total, mount.bytes_used, mount.bytes_avail) == (53687091200, 14862413824, 38824677376)
    assert (mount.inodes_total, mount.inodes_used, mount.inodes_avail) == (3276800, 214733, 3062067)
    assert mount.inodes_pct == pytest.approx(100.0 * 214733 / 3276800)


def test_posix_fallback_gnu_layout_with_space_in_target() -> None:
    mount = parse_df_posix("/mnt/my data", text("df/gnu-P-B1-space.txt"), text("df/gnu-P-i-space.txt"))
    assert mount.target == "/mnt/my data"
    assert mount.bytes_used == 412371050496
    assert mount.inodes_used == 1843211


def test_posix_fallback_missing_path_and_missing_inodes() -> None:
    missing = parse_df_posix("/nope", text("df/busybox-missing.txt"), text("df/busybox-missing.txt"))
    assert missing.error == "/nope: can't find mount point"
    assert isinstance(missing.bytes_pct, NA)
    # Bytes without an inode answer: bytes known, inodes NA.
    partial = parse_df_posix("/", text("df/busybox-P-B1.txt"), "")
    assert partial.bytes_total == 53687091200
    assert partial.inodes_total == NA("inodes not reported")
    assert isinstance(partial.inodes_pct, NA)


# --------------------------------------------------------------------------- memory


def test_cgroup_v2_with_a_limit() -> None:
    mem = parse_memory("cgroup-v2", mem_lines("v2", limit_file="cgroup/v2/memory.max"), meminfo_lines())
    assert mem.source == "cgroup-v2"
    assert mem.current_bytes == 123456789504
    assert mem.max_bytes == 214748364800
    assert mem.oom_kills == 2
    assert mem.pct == pytest.approx(100.0 * 123456789504 / 214748364800)


def test_cgroup_v2_max_falls_back_to_memtotal() -> None:
    mem = parse_memory("cgroup-v2", mem_lines("v2", limit_file="cgroup/v2/memory.max.unlimited"),
                       meminfo_lines())
    assert mem.max_bytes == MEMTOTAL
    assert mem.oom_kills == 2


def test_cgroup_v2_max_without_meminfo_is_unlimited() -> None:
    mem = parse_memory("cgroup-v2", mem_lines("v2", limit_file="cgroup/v2/memory.max.unlimited"), [])
    assert mem.max_bytes == NA("unlimited")
    assert isinstance(mem.pct, NA)


def test_cgroup_v1_unlimited_falls_back_to_memtotal() -> None:
    lines = mem_lines("v1", limit_file="cgroup/v1/memory.limit_in_bytes")
    assert "max 9223372036854771712" in lines
    mem = parse_memory("cgroup-v1", lines, meminfo_lines())
    assert mem.source == "cgroup-v1"
    assert mem.current_bytes == 8592031744
    assert mem.max_bytes == MEMTOTAL
    assert mem.oom_kills == 5


def test_cgroup_v1_with_a_limit() -> None:
    mem = parse_memory("cgroup-v1", mem_lines("v1", limit_file="cgroup/v1/memory.limit_in_bytes.limited"),
                       meminfo_lines())
    assert mem.max_bytes == 34359738368
    assert mem.pct == pytest.approx(25.0, abs=0.01)


def test_cgroup_without_oom_kill_counter() -> None:
    mem = parse_memory("cgroup-v2", ["current 10", "max 100"], [])
    assert mem.oom_kills == NA("no oom_kill counter")
    assert mem.pct == 10.0


def test_meminfo_fallback_without_cgroup() -> None:
    mem = parse_memory("none", [], text("cgroup/proc-meminfo").splitlines())
    assert mem.source == "meminfo"
    assert mem.current_bytes == MEMTOTAL - MEMAVAILABLE
    assert mem.max_bytes == MEMTOTAL
    assert mem.oom_kills == NA("no cgroup")


def test_no_memory_source_at_all() -> None:
    mem = parse_memory("none", [], [])
    assert mem.source == "none"
    assert isinstance(mem.current_bytes, NA)
    assert isinstance(mem.pct, NA)


# --------------------------------------------------------------------------- tmux


def test_tmux_sessions_including_a_name_with_spaces() -> None:
    sessions = parse_tmux([
        "1732100000 2 train",
        "1732150000 1 eval sweep 3",
        "1732160000 4  leading space",
        "no server running on /tmp/tmux-0/default",
        "",
    ])
    assert [(s.name, s.windows, s.created) for s in sessions] == [
        ("train", 2, 1732100000.0),
        ("eval sweep 3", 1, 1732150000.0),
        (" leading space", 4, 1732160000.0),
    ]


# --------------------------------------------------------------------------- whole records


def test_gpu_box_record() -> None:
    snap = snapshot("gpu-box.rec")
    assert (snap.instance, snap.observed_at, snap.seq) == ("box", 1000.0, 42)
    assert snap.hostname == "a100-box-7"
    assert snap.remote_time == 1732187412.0
    assert snap.probe_ms == NA("not measured")
    assert snap.gpu.status is GpuStatus.OK
    assert tuple(g.uuid for g in snap.gpu.gpus) == A100_UUIDS
    assert [len(g.processes) for g in snap.gpu.gpus] == [1, 1, 0, 2, 0, 0, 1, 0]
    assert snap.memory.source == "cgroup-v2"
    assert snap.memory.max_bytes == 214748364800
    assert snap.memory.oom_kills == 2
    assert not isinstance(snap.tmux, NA)
    assert [s.name for s in snap.tmux] == ["train", "eval sweep 3"]


def test_gpu_box_record_mounts() -> None:
    mounts = {m.path: m for m in snapshot("gpu-box.rec").mounts}
    assert list(mounts) == ["/", "/mnt/my data", "/root/autodl-tmp", "/nope"]
    assert mounts["/"].fstype == "overlay"
    assert mounts["/mnt/my data"].target == "/mnt/my data"
    assert mounts["/root/autodl-tmp"].inodes_pct == 100.0
    assert mounts["/root/autodl-tmp"].bytes_pct == pytest.approx(34.0, abs=0.1)
    assert mounts["/nope"].error == "/nope: No such file or directory"


def test_gpu_box_record_queue_facts() -> None:
    queue = snapshot("gpu-box.rec").queue
    assert queue.process_pids == (31337,)
    assert queue.queue_log is not None
    assert (queue.queue_log.path, queue.queue_log.size) == ("/root/sweep/queue.log", len(LOG_BYTES))
    assert (queue.queue_log.mtime, queue.queue_log.inode) == (1732187400.0, 5245001)
    assert queue.queue_text is not None
    assert queue.queue_text.splitlines()[1] == "python train.py --lr 3e-4 --seed 1"
    assert [(s.path, s.size) for s in queue.run_logs] == [
        ("/root/sweep/runs/lr3e-4 seed1.log", 1048576),
        ("/root/sweep/runs/lr1e-4_seed2.log", 20480),
    ]
    assert queue.newest_checkpoint is not None
    assert queue.newest_checkpoint.path == "/root/sweep/ckpt/run 1/step_1200.pt"
    assert queue.newest_checkpoint.size == 2147483648
    assert queue.newest_checkpoint.mtime == pytest.approx(1732187000.123456789)


def test_non_utf8_log_bytes_are_preserved_exactly() -> None:
    (chunk,) = snapshot("gpu-box.rec").log_chunks
    assert chunk.path == "/root/sweep/queue.log"
    assert (chunk.inode, chunk.offset, chunk.reset) == (5245001, 0, True)
    assert chunk.data == LOG_BYTES
    with pytest.raises(UnicodeDecodeError):
        chunk.data.decode("utf-8")
    assert chunk_text(chunk) == "step 1200 loss 1.8734\n\ufffd\ufffd loss nan\n"


def test_record_with_gpu_absent() -> None:
    snap = snapshot("no-gpu.rec")
    assert (snap.seq, snap.hostname) == (7, "cpu-box")
    assert snap.gpu.status is GpuStatus.ABSENT
    assert snap.gpu.gpus == ()
    assert snap.gpu.message == "nvidia-smi not found on this host"
    assert snap.memory.source == "cgroup-v1"
    assert snap.memory.max_bytes == MEMTOTAL  # v1 "unlimited" -> the host's memory
    assert snap.memory.oom_kills == 5
    assert snap.tmux == NA("tmux not installed")
    root, missing = snap.mounts
    assert (root.path, root.target, root.bytes_total, root.inodes_total) == ("/", "/", 53687091200, 3276800)
    assert missing.error == "/nope: can't find mount point"
    assert snap.queue.process_pids == ()
    assert snap.queue.queue_log is not None
    assert snap.queue.queue_log.size == NA("missing")
    assert snap.log_chunks == ()  # "missing" log: nothing to deliver


def test_record_with_driver_failure_ignores_failed_apps_query() -> None:
    failure = text("nvidia-smi/driver-failure.txt")
    rec = (f"@@begin 3 1732187412 h\n@@gpu\n{failure}@@rc 9\n@@apps\n{failure}@@rc 9\n"
           "@@mem none\n@@meminfo\n@@tmux none\n@@end 3\n").encode()
    snap = parse_record(rec, instance="box", observed_at=0.0, probe_ms=12.5)
    assert snap.gpu.status is GpuStatus.FAILED
    assert snap.gpu.message == DRIVER_FAILURE
    assert snap.tmux == ()
    assert snap.memory.source == "none"
    assert snap.probe_ms == 12.5


def test_gpu_skipped_and_missing_header() -> None:
    snap = parse_record(b"@@gpu skipped\n@@tmux none\n", instance="local", observed_at=0.0)
    assert snap.gpu.status is GpuStatus.ABSENT
    assert snap.gpu.message == "not probed"
    assert snap.remote_time == NA("no header")
    assert snap.seq == 0
    assert snap.queue.process_pids == NA("not probed")


def test_log_section_with_wrapped_base64() -> None:
    data = bytes(range(256)) * 3
    b64 = base64.b64encode(data).decode()
    body = "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
    rec = f"@@begin 1 1 h\n@@log /x y/z.log\n17 100 0 {len(data)}\n{body}\n@@end 1\n".encode()
    (chunk,) = parse_record(rec, instance="box", observed_at=0.0).log_chunks
    assert (chunk.path, chunk.inode, chunk.offset, chunk.reset) == ("/x y/z.log", 17, 100, False)
    assert chunk.data == data


def test_split_sections_keeps_args_with_spaces() -> None:
    sections = split_sections("junk before\n@@mount /mnt/my data\nrow\n@@rc 0\n")
    assert [(s.head, s.arg) for s in sections] == [("mount", "/mnt/my data"), ("rc", "0")]
    assert sections[0].lines == ["row"]


# --------------------------------------------------------------------------- totality

RECORDS = ("gpu-box.rec", "no-gpu.rec")
TOKENS = ("@@begin", "@@gpu", "@@rc", "@@apps", "@@mem", "@@meminfo", "@@tmux", "@@mount", "@@posix",
          "@@posix-inodes", "@@stat", "@@text", "@@dir", "@@ckpt", "@@proc", "@@log", "@@end",
          "missing", "-", "0", "-1", "99999999999999999999", "1.5", "[N/A]", "max", ",", " ", "\n", "")


def parse_bytes(data: bytes) -> HostSnapshot:
    snap = parse_record(data, instance="fuzz", observed_at=0.0)
    assert isinstance(snap, HostSnapshot)
    return snap


def test_parse_record_survives_random_bytes() -> None:
    rng = random.Random(0xC0C4)
    for _ in range(300):
        parse_bytes(rng.randbytes(rng.randrange(0, 2000)))


def test_parse_record_survives_every_truncation() -> None:
    for name in RECORDS:
        data = record(name)
        for cut in range(len(data) + 1):
            parse_bytes(data[:cut])
            parse_bytes(data[cut:])


def test_parse_record_survives_mutated_records() -> None:
    rng = random.Random(20241121)
    for name in RECORDS:
        lines = record(name).split(b"\n")
        for _ in range(400):
            mutated = list(lines)
            for _ in range(rng.randrange(1, 6)):
                op = rng.randrange(6)
                i = rng.randrange(len(mutated))
                if op == 0:
                    del mutated[i]
                elif op == 1:
                    mutated.insert(i, rng.choice(mutated))
                elif op == 2:
                    words = [rng.choice(TOKENS) for _ in range(rng.randrange(1, 5))]
                    mutated.insert(i, " ".join(words).encode())
                elif op == 3:
                    line = bytearray(mutated[i])
                    if line:
                        line[rng.randrange(len(line))] = rng.randrange(256)
                    mutated[i] = bytes(line)
                elif op == 4:
                    mutated[i] = mutated[i][: rng.randrange(len(mutated[i]) + 1)]
                else:
                    rng.shuffle(mutated)
            parse_bytes(b"\n".join(mutated))


def test_leaf_parsers_survive_garbage() -> None:
    rng = random.Random(7)
    alphabet = "0123456789abcxyz-,.[]/ :\t@%"
    for _ in range(500):
        garbage = "\n".join(
            "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 60)))
            for _ in range(rng.randrange(0, 5))
        )
        reading = parse_gpus(garbage, rng.choice([None, 0, 6, 9]))
        assert reading.status in {GpuStatus.OK, GpuStatus.FAILED}
        attach_apps(reading, parse_apps(garbage))
        assert isinstance(parse_df_output("/p", garbage), Mount)
        assert isinstance(parse_df_posix("/p", garbage, garbage), Mount)
        parse_memory(rng.choice(["cgroup-v1", "cgroup-v2", "none", ""]), garbage.splitlines(),
                     garbage.splitlines())
        parse_tmux(garbage.splitlines())


@pytest.mark.parametrize(
    "data",
    [
        b"@@mount /x\n1 2 3 inf 5 6 ext4 /\n",
        b"@@mem cgroup-v2\ncurrent 1e999\nmax max\n",
        b"@@begin \xc2\xb2 1 h\n",
        b"@@gpu\nx\n@@rc \xc2\xb2\n",
        b"@@proc /q\n\xc2\xb2\n",
    ],
    ids=["df-inf", "mem-1e999", "seq-superscript", "rc-superscript", "pid-superscript"],
)
def test_parse_record_is_total_on_odd_numbers(data: bytes) -> None:
    parse_bytes(data)
