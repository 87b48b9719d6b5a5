"""A fake but honest trainer for the demo fleet: `python -m cockpit.demo.trainer`.

It behaves like the real sweep trainer as far as the cockpit can observe it: it prints one
realistic log line per epoch, writes real (tiny) torch checkpoints with atomic replaces
(`latest.pth` every epoch; `best.pth` + `best_metrics.json` on improvement) and fails the
way real runs fail (CUDA OOM, disk full, NaN loss) when the cell config asks it to.

Config keys (YAML, all optional):

- `seconds_per_epoch` (float, default 1.0): wall time of one epoch.
- `fail` (null | "cuda_oom" | "disk_full" | "nan"): failure mode.
- `fail_at_epoch` (int, default: half-way): the epoch in which the failure happens.
- `base_metric` (float): starting value of the validation metric.

While it runs, its PID is written to `$COCKPIT_BOX/run/trainer.pid` so that the simulated
`nvidia-smi` of the box reports a busy GPU with this process on it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import signal
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, BinaryIO

FAILURE_MODES = ("cuda_oom", "disk_full", "nan")

# task -> (metric name, default start value, gain over the run, higher is better)
_METRICS: dict[str, tuple[str, float, float, bool]] = {
    "reconstruction": ("val_psnr", 24.0, 6.5, True),
    "detection": ("val_map50", 0.42, 0.21, True),
    "segmentation": ("val_miou", 0.55, 0.17, True),
    "classification": ("val_acc", 0.71, 0.18, True),
}
_DEFAULT_METRIC = ("val_score", 0.50, 0.25, True)
FRACTION_METRICS = frozenset({"val_map50", "val_miou", "val_acc", "val_score"})
"""Metrics that are fractions of 1 (an accuracy of 1.124 is impossible): their gain is kept
inside the headroom left below 1 and every value is capped just under it."""
HEADROOM_USED = 0.6
"""Share of the headroom below 1 a fraction metric climbs over a run (noise stays inside)."""

_FAKE_SITE = "/root/miniconda3/lib/python3.11/site-packages"
_FAKE_SRC = "/root/PROJECT_NAME/src"

OOM_MESSAGE = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
    "total capacity of 79.15 GiB of which 1.19 GiB is free. Including non-PyTorch memory, "
    "this process has 77.94 GiB memory in use. Of the allocated memory 75.10 GiB is "
    "allocated by PyTorch, and 1.32 GiB is reserved by PyTorch but unallocated. If reserved "
    "but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation."
)
DISK_FULL_MESSAGE = (
    "RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 4416 vs 4310"
)


@dataclass(frozen=True)
class CellConfig:
    """The demo knobs read from a cell's YAML config."""

    seconds_per_epoch: float = 1.0
    fail: str | None = None
    fail_at_epoch: int | None = None
    base_metric: float | None = None


@dataclass(frozen=True)
class MetricSpec:
    """Which validation metric a task reports and how it evolves."""

    name: str
    start: float
    gain: float
    higher_is_better: bool
    ceiling: float | None = None
    """The most the metric can be (1.0 for an accuracy), or None when unbounded (PSNR)."""

    def bounded(self, value: float) -> float:
        """`value` kept at or under the ceiling (a noisy fraction must not pass 1)."""
        return value if self.ceiling is None else min(value, self.ceiling - 1e-4)

    def better(self, new: float, old: float | None) -> bool:
        """Whether `new` improves on `old` (`None` means no best yet)."""
        if old is None:
            return True
        return new > old if self.higher_is_better else new < old

    def fmt(self, value: float) -> str:
        """Format a metric value the way the real trainer logs it."""
        return f"{value:.2f}" if abs(value) >= 10 else f"{value:.4f}"


def metric_for(task: str, base: float | None) -> MetricSpec:
    """The metric of `task`, starting at `base` when the config sets one."""
    name, start, gain, higher = _METRICS.get(task, _DEFAULT_METRIC)
    if base is not None:
        gain = gain * (abs(base) / start) if start else gain
        start = base
    if name in FRACTION_METRICS:
        gain = max(0.0, min(gain, HEADROOM_USED * (1.0 - start)))
        return MetricSpec(name, start, gain, higher, ceiling=1.0)
    return MetricSpec(name, start, gain, higher)


def load_config(path: Path) -> CellConfig:
    """Read the demo knobs from `path`; unknown keys (a real config's) are ignored."""
    import yaml

    raw: Any = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(raw, dict):
        raise SystemExit(f"config {path}: expected a mapping at the top level")
    fail = raw.get("fail")
    if fail is not None and fail not in FAILURE_MODES:
        raise SystemExit(f"config {path}: fail must be null or one of {', '.join(FAILURE_MODES)}")
    fail_at = raw.get("fail_at_epoch")
    base = raw.get("base_metric")
    return CellConfig(
        seconds_per_epoch=max(0.0, float(raw.get("seconds_per_epoch", 1.0))),
        fail=fail,
        fail_at_epoch=None if fail_at is None else int(fail_at),
        base_metric=None if base is None else float(base),
    )


def _fsync_dir(directory: Path) -> None:
    """Persist a rename in `directory` (best effort: not every filesystem allows it)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write `path` via `path.tmp` + flush + fsync + `os.replace`, never half-written."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        write(fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def save_checkpoint(path: Path, epoch: int, seed: int) -> None:
    """A real, tiny torch checkpoint: an `nn.Linear` state_dict plus the epoch."""
    import torch

    torch.manual_seed(seed + epoch)
    layer = torch.nn.Linear(8, 4)
    state = {"model": layer.state_dict(), "epoch": epoch}
    atomic_write(path, lambda fh: torch.save(state, fh))


def write_best_metrics(path: Path, payload: dict[str, Any]) -> None:
    """`best_metrics.json`, atomically."""
    data = (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode()

    def write(fh: BinaryIO) -> None:
        fh.write(data)

    atomic_write(path, write)


def _trainer_frames() -> list[str]:
    """The top of a traceback through the (fictional) project's training entry point."""
    return [
        "Traceback (most recent call last):",
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        f'  File "{_FAKE_SRC}/train.py", line 612, in <module>',
        "    main()",
        f'  File "{_FAKE_SRC}/train.py", line 598, in main',
        "    trainer.fit(train_loader, val_loader, epochs=cfg.training.epochs)",
    ]


def oom_traceback() -> str:
    """What a CUDA OOM in the forward pass looks like in a real log."""
    nn = f"{_FAKE_SITE}/torch/nn/modules"
    lines = [
        *_trainer_frames(),
        f'  File "{_FAKE_SRC}/engine/trainer.py", line 241, in fit',
        "    train_stats = self.train_one_epoch(loader, epoch)",
        "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{_FAKE_SRC}/engine/trainer.py", line 163, in train_one_epoch',
        "    outputs = self.model(images)",
        "              ^^^^^^^^^^^^^^^^^^",
        f'  File "{nn}/module.py", line 1773, in _wrapped_call_impl',
        "    return self._call_impl(*args, **kwargs)",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{nn}/module.py", line 1784, in _call_impl',
        "    return forward_call(*args, **kwargs)",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{_FAKE_SRC}/models/unet.py", line 118, in forward',
        "    x = self.decoder(torch.cat([x, skip], dim=1))",
        "                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        OOM_MESSAGE,
    ]
    return "\n".join(lines)


def disk_full_traceback() -> str:
    """What a checkpoint save on a full disk looks like in a real log (chained exceptions)."""
    ser = f"{_FAKE_SITE}/torch/serialization.py"
    lines = [
        "Traceback (most recent call last):",
        f'  File "{ser}", line 967, in save',
        "    _save(",
        f'  File "{ser}", line 1268, in _save',
        "    zip_file.write_record(name, storage, num_bytes)",
        "OSError: [Errno 28] No space left on device",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        *_trainer_frames(),
        f'  File "{_FAKE_SRC}/engine/trainer.py", line 252, in fit',
        '    self.save_checkpoint(self.ckpt_dir / "latest.pth", epoch)',
        f'  File "{_FAKE_SRC}/engine/trainer.py", line 311, in save_checkpoint',
        "    torch.save(state, path)",
        f'  File "{ser}", line 966, in save',
        "    with _open_zipfile_writer(f) as opened_zipfile:",
        "         ^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{ser}", line 798, in __exit__',
        "    self.file_like.write_end_of_file()",
        DISK_FULL_MESSAGE,
    ]
    return "\n".join(lines)


def _pid_file() -> Path | None:
    """`$COCKPIT_BOX/run/trainer.pid`, or None outside a demo box."""
    box = os.environ.get("COCKPIT_BOX")
    return Path(box) / "run" / "trainer.pid" if box else None


def _write_pid(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(f"{os.getpid()}\n", encoding="ascii")
    os.replace(tmp, path)


def _remove_pid(path: Path) -> None:
    """Remove the PID file, unless another trainer has taken it over meanwhile."""
    try:
        if path.read_text(encoding="ascii").strip() == str(os.getpid()):
            path.unlink()
    except OSError:
        pass


def _on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _err(text: str) -> None:
    sys.stdout.flush()
    print(text, file=sys.stderr, flush=True)


def train(args: argparse.Namespace, cfg: CellConfig) -> int:
    """Run the fake training loop; returns the process exit code."""
    epochs: int = args.epochs
    name: str = args.name
    ckpt_dir = Path(args.ckpt_dir)
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    metric = metric_for(args.task, cfg.base_metric)
    seed = zlib.crc32(name.encode())
    rng = random.Random(seed)
    fail_at = cfg.fail_at_epoch if cfg.fail_at_epoch is not None else max(1, (epochs + 1) // 2)
    base_lr = 3e-4

    print(f"Loading config {args.config}", flush=True)
    print(
        f"Experiment {name} | task {args.task} | epochs {epochs} | device cuda:0 | "
        f"monitor {metric.name} ({'max' if metric.higher_is_better else 'min'})",
        flush=True,
    )
    print(f"Checkpoints -> {ckpt_dir}", flush=True)

    if epochs >= 1 and not (cfg.fail is not None and fail_at <= 1):
        import torch  # noqa: F401  (model setup; keeps the import out of epoch 1's time)

    best: float | None = None
    best_epoch = 0
    loss = 1.2 + rng.uniform(-0.1, 0.1)
    for epoch in range(1, epochs + 1):
        started = time.monotonic()
        failing = cfg.fail is not None and epoch == fail_at
        if failing and cfg.fail == "cuda_oom":
            time.sleep(cfg.seconds_per_epoch * 0.3)
            _err(oom_traceback())
            return 1
        if failing and cfg.fail == "nan":
            time.sleep(cfg.seconds_per_epoch * 0.5)
            for step in (40, 60, 80):
                print(f"Epoch {epoch}/{epochs} | step {step} | loss is nan", flush=True)
            _err(f"Training aborted at epoch {epoch}: loss is nan for 3 consecutive checks")
            return 1

        progress = epoch / max(1, epochs)
        loss = loss * (0.86 + rng.uniform(-0.03, 0.03))
        curve = 1.0 - math.exp(-3.0 * progress)
        noise = rng.gauss(0.0, 0.04) * metric.gain
        value = metric.start + metric.gain * curve + noise
        if not metric.higher_is_better:
            value = metric.start - metric.gain * curve + noise
        value = metric.bounded(value)
        lr = base_lr * 0.5 * (1.0 + math.cos(math.pi * (epoch - 1) / max(1, epochs)))

        remaining = cfg.seconds_per_epoch - (time.monotonic() - started)
        if remaining > 0:
            time.sleep(remaining)

        if failing and cfg.fail == "disk_full":
            tmp = ckpt_dir / "latest.pth.tmp"
            with open(tmp, "wb") as fh:
                fh.write(b"PK\x03\x04" + bytes(4306))  # a truncated zip, as torch leaves it
            _err(disk_full_traceback())
            return 1

        save_checkpoint(ckpt_dir / "latest.pth", epoch, seed)
        improved = metric.better(value, best)
        if improved:
            best, best_epoch = value, epoch
            save_checkpoint(ckpt_dir / "best.pth", epoch, seed)
            write_best_metrics(
                ckpt_dir / "best_metrics.json",
                {
                    "name": name,
                    "task": args.task,
                    "epoch": epoch,
                    "metric": metric.name,
                    "value": round(value, 6),
                    metric.name: round(value, 6),
                    "train_loss": round(loss, 6),
                },
            )
        elapsed = time.monotonic() - started
        print(
            f"Epoch {epoch}/{epochs} | train_loss {loss:.4f} | {metric.name} "
            f"{metric.fmt(value)} | lr {lr:.1e} | {elapsed:.2f}s",
            flush=True,
        )
        if improved:
            print(f"Saved new best checkpoint: {metric.name} {metric.fmt(value)} "
                  f"at epoch {epoch}", flush=True)

    if best is None:
        print("Training completed: no epochs run", flush=True)
    else:
        print(f"Training completed: best {metric.name} {metric.fmt(best)} at epoch {best_epoch}",
              flush=True)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The command line of `python -m cockpit.demo.trainer`."""
    parser = argparse.ArgumentParser(prog="python -m cockpit.demo.trainer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, type=Path, help="cell YAML config")
    parser.add_argument("--task", required=True, help="task family (reconstruction, ...)")
    parser.add_argument("--epochs", type=int, default=20, help="number of epochs (default 20)")
    parser.add_argument("--name", required=True, help="cell name (isolation key)")
    parser.add_argument("--ckpt-dir", required=True, type=Path, help="checkpoint directory")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.epochs < 0:
        build_parser().error("--epochs must be >= 0")
    cfg = load_config(args.config)
    pid_file = _pid_file()
    # SIGTERM / SIGHUP (tmux kill-session) unwind through `finally` to drop the PID file.
    previous = {sig: signal.signal(sig, _on_sigterm) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        if pid_file is not None:
            _write_pid(pid_file)
        return train(args, cfg)
    finally:
        if pid_file is not None:
            _remove_pid(pid_file)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    raise SystemExit(main())
