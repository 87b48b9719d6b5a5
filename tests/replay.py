"""A deterministic fleet for UI tests: probe records in the real wire format, replayed.

The records are written in exactly the framing `probe.sh` prints (and go through the real
`parse_record`), with GPU rows in nvidia-smi's CSV shape as recorded in tests/data. Only
the transport is replaced, so snapshot tests get fixed numbers and a fixed clock.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

from cockpit.models.events import FleetEvent, HostStateChanged, SnapshotTaken
from cockpit.models.parse import parse_record
from cockpit.models.snapshot import HostKeyInfo, HostState, Reachability
from cockpit.services.config.sweepfile import LoadedSweep, load_sweep

NOW = 1_795_000_000.0  # 2026-11-18 11:06:40 UTC: every clock in these tests
A100 = "NVIDIA A100-SXM4-80GB"

SWEEP = """\
sweep: replay
interval: 2s
instances:
  - name: a1
    profile: autodl
    host: autodl-a1
    price_per_hour: 1.98
    queue: /root/autodl-tmp/proj/queue_1.txt
    queue_log: /root/autodl-tmp/proj/q1_master.log
    run_logs: /root/autodl-tmp/runs/logs
    clocks_started:
      auto_release: "2026-11-09 11:06:40+00:00"
  - name: r1
    profile: runpod
    host: runpod-r1
    price_per_hour: 0.69
    queue: /workspace/queue_1.txt
    queue_log: /workspace/q1_master.log
    run_logs: /workspace/runs/logs
  - name: v1
    profile: vastai
    host: vast-v1
    port: 40022
    price_per_hour: 2.40
"""

QUEUE_A1 = """\
# queue_1: <cfg> <task> [epochs]
configs/ablation/baseline.yaml reconstruction 6
configs/ablation/no_aug.yaml reconstruction 6
configs/ablation/det_baseline.yaml detection 50
configs/ablation/aug_strong.yaml reconstruction 600
"""

MASTER_A1 = """\
=== Queue queue_1.txt: 4 ablations, starting from 1 on a1 ===
[2026-11-18 10:30:00] [1/4] STARTING baseline (reconstruction, 6ep)
[2026-11-18 10:31:00] [1/4] FINISHED baseline (exit=0)
[2026-11-18 10:31:00] [2/4] STARTING no_aug (reconstruction, 6ep)
[2026-11-18 10:32:00] [2/4] FINISHED no_aug (exit=0)
[2026-11-18 10:32:00] [3/4] STARTING det_baseline (detection, 50ep)
[2026-11-18 10:33:30] [3/4] FINISHED det_baseline (exit=1)
[2026-11-18 10:33:30] [4/4] STARTING aug_strong (reconstruction, 600ep)
"""

RUN_LOGS_A1 = {
    "baseline": "Epoch 6/6 | train_loss 0.41 | psnr 27.9\nTraining completed: best psnr 27.9\n",
    "no_aug": "Epoch 6/6 | train_loss 0.44 | psnr 26.1\nTraining completed: best psnr 26.1\n",
    "det_baseline": "Epoch 2/50 | train_loss 0.9 | map 0.31\n"
                    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n",
    "aug_strong": "Epoch 120/600 | train_loss 0.52 | psnr 25.0\n",
}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _gpu_rows(rows: list[tuple[int, int, int, int, float]]) -> str:
    out = []
    for index, util, mem, temp, power in rows:
        out.append(f"{index}, {A100}, GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd, {util}, {mem}, "
                   f"81920, {temp}, {power:.2f}, 400.00, 1410, 1410, Disabled")
    return "\n".join(out)


def a1_record(seq: int, at: float, data_used: int) -> bytes:
    """a1: 2 A100s, three AutoDL mounts, a queue at cell 4 with one OOM failure."""
    logs = "".join(
        f"@@log /root/autodl-tmp/runs/logs/{name}.log\n{900 + i} 0 1 {len(text)}\n{_b64(text)}\n"
        for i, (name, text) in enumerate(RUN_LOGS_A1.items())
    )
    dirs = "".join(
        f"{len(text)} {int(at) - 60 * (4 - i)} {900 + i} /root/autodl-tmp/runs/logs/{name}.log\n"
        for i, (name, text) in enumerate(RUN_LOGS_A1.items())
    )
    first = seq == 1
    record = (
        f"@@begin {seq} {int(at)} a1\n@@tz +0000\n"
        f"@@gpu\n{_gpu_rows([(0, 97, 61234, 71, 371.5), (1, 3 + seq, 4, 33, 61.9)])}\n@@rc 0\n"
        "@@apps\nGPU-00000000-aaaa-bbbb-cccc-dddddddddddd, 48213, 61200\n@@rc 0\n"
        "@@mem cgroup-v2\ncurrent 96636764160\nmax 107374182400\noom_kill 0\n"
        "@@tmux\n1795000000 1 q1\n"
        "@@mount /\n 3276800  214733  3062067  32212254720  9663676416  22548578304 overlay /\n"
        f"@@mount /root/autodl-tmp\n 3276800 3001000 275800 53687091200 {data_used} "
        f"{53687091200 - data_used} ext4 /root/autodl-tmp\n"
        "@@mount /root/autodl-fs\n 200000 12000 188000 214748364800 21474836480 193273528320 "
        "nfs4 /root/autodl-fs\n"
        f"@@stat queue_log /root/autodl-tmp/proj/q1_master.log\n{len(MASTER_A1)} {int(at) - 5} 800\n"
        f"@@stat queue /root/autodl-tmp/proj/queue_1.txt\n{len(QUEUE_A1)} 1794990000 801\n"
        + (f"@@text /root/autodl-tmp/proj/queue_1.txt\n{_b64(QUEUE_A1)}\n" if first else "")
        + (f"@@marks /root/autodl-tmp/proj/q1_master.log\n{_b64(MASTER_A1)}\n" if first else "")
        + f"@@dir /root/autodl-tmp/runs/logs\n{dirs}"
        "@@proc /root/autodl-tmp/proj/queue_1.txt\n31337\n"
        + (f"@@log /root/autodl-tmp/proj/q1_master.log\n800 0 1 {len(MASTER_A1)}\n{_b64(MASTER_A1)}\n"
           + logs if first else "")
        + f"@@end {seq}\n"
    )
    return record.encode()


def r1_record(seq: int, at: float) -> bytes:
    """r1: one 4090 with no queue file read yet and a filling volume."""
    return (
        f"@@begin {seq} {int(at)} r1\n@@tz +0000\n"
        "@@gpu\n0, NVIDIA GeForce RTX 4090, GPU-11111111-aaaa-bbbb-cccc-dddddddddddd, 12, 20410, "
        "24564, 58, 141.20, 450.00, 2520, 2520, [N/A]\n@@rc 0\n@@apps\n@@rc 0\n"
        "@@mem cgroup-v2\ncurrent 30064771072\nmax 32212254720\noom_kill 1\n"
        "@@tmux\n1795000000 1 q1\n"
        "@@mount /workspace\n 1000000 950000 50000 107374182400 102005473280 5368709120 "
        "fuse /workspace\n"
        "@@proc /workspace/queue_1.txt\n4242\n"
        f"@@end {seq}\n"
    ).encode()


def replay_sweep(directory: Path) -> LoadedSweep:
    """Write the replay sweep file and load it (real profiles, real validation)."""
    path = directory / "sweep.yaml"
    path.write_text(SWEEP)
    return load_sweep(path)


def replay_events(*, with_key_problem: bool = True) -> list[FleetEvent]:
    """The event stream: a1 and r1 connected with two records each; v1 needs approval."""
    events: list[FleetEvent] = [
        HostStateChanged(HostState("a1", Reachability.CONNECTED, NOW - 600)),
        HostStateChanged(HostState("r1", Reachability.CONNECTED, NOW - 600)),
    ]
    for seq in (1, 2, 3):
        at = NOW - 4 + 2 * (seq - 1)
        events.append(SnapshotTaken(parse_record(a1_record(seq, at, 40_000_000_000 + seq * 10**8),
                                                 instance="a1", observed_at=at, probe_ms=12.0)))
        events.append(SnapshotTaken(parse_record(r1_record(seq, at), instance="r1", observed_at=at,
                                                 probe_ms=30.0)))
    if with_key_problem:
        key = HostKeyInfo("ssh-ed25519", "SHA256:7lB0Rj3b2iXz4q1oWm0cVnHq0c8v0sQ2lq7N4yXo9zE")
        events.append(HostStateChanged(HostState("v1", Reachability.NEEDS_APPROVAL, NOW - 30,
                                                 "unknown host key", host_key=key)))
    else:
        events.append(HostStateChanged(HostState("v1", Reachability.STALE, NOW - 300,
                                                 "ConnectionLost")))
    return events


def source_of(events: list[FleetEvent]) -> AsyncIterator[FleetEvent]:
    """An async iterator over fixed events (the app's `source` argument)."""

    async def gen() -> AsyncIterator[FleetEvent]:
        for event in events:
            yield event

    return gen()
