"""Hash and safely load one pulled file, in a worker process.

Run by `verify` in a process pool so the TUI stays live and torch is never imported in the
TUI process. A checkpoint is only ever loaded with `weights_only=True` (plus `mmap=True`,
`map_location="cpu"`): a file that would load only unsafely is reported as such and does
not count as loaded. `.safetensors` is checked by its header and data length, without
torch. `best_metrics.json` must parse; its headline metric is returned.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import struct
from dataclasses import dataclass

from cockpit.models.custody import headline_metric

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt")
STATE_KEYS = ("model_state_dict", "model", "state_dict")
SAFETENSORS_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
                      "I8": 1, "U8": 1, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1,
                      "F8_E4M3": 1, "F8_E5M2": 1}
MAX_HEADER = 100 << 20


@dataclass(frozen=True)
class FileCheck:
    """The result for one file: its hash, and whether it loaded (with why not)."""

    path: str
    size: int
    sha256: str
    loaded: bool | None
    """True/False for files that are loaded (checkpoints, safetensors, metrics); None for
    files that are only hashed."""
    reason: str = ""
    metric: str = ""


def warm_worker(quiet: bool) -> None:
    """Worker start-up: silence output under the TUI, and import torch now, while the pull
    is still running, instead of inside the first check (about 0.6 s per worker here)."""
    if quiet:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    import torch  # noqa: F401


def sha256_of(path: str) -> tuple[str, int]:
    """SHA-256 via mmap (one pass, no copies); zero-byte files hash too."""
    size = os.path.getsize(path)
    digest = hashlib.sha256()
    if size:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as m:
            view = memoryview(m)
            try:
                for start in range(0, size, 16 << 20):
                    digest.update(view[start:start + (16 << 20)])
            finally:
                view.release()
    return digest.hexdigest(), size


def _has_tensors(obj: object, torch: object) -> bool:
    tensor = getattr(torch, "Tensor")  # noqa: B009 - torch is imported lazily, untyped here
    if not isinstance(obj, dict):
        return False
    state = next((obj[k] for k in STATE_KEYS if isinstance(obj.get(k), dict)), obj)
    return any(isinstance(v, tensor) for v in state.values()) or any(
        isinstance(v, dict) and any(isinstance(x, tensor) for x in v.values()) for v in state.values())


def load_checkpoint(path: str) -> tuple[bool, str]:
    """`torch.load(weights_only=True, mmap=True)`; (loaded, reason)."""
    import pickle

    import torch

    if os.path.getsize(path) == 0:
        return False, "empty file (0 bytes)"
    try:
        try:
            obj = torch.load(path, weights_only=True, mmap=True, map_location="cpu")
        except pickle.UnpicklingError:
            raise
        except Exception:
            # A legacy (non-zip) checkpoint cannot be mmapped, and a truncated one fails the
            # mmap with a bare EINVAL: load it plainly (still weights-only) for the real answer.
            obj = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return False, f"refused by weights_only=True: it would load only unsafely ({first[:160]})"
    except Exception as exc:  # any failure to load is the answer, not a crash
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return False, f"does not load: {type(exc).__name__}: {first[:200]}"
    if not _has_tensors(obj, torch):
        return False, "loads, but holds no tensors (not a state dict or a dict with model / " \
                      "model_state_dict / state_dict)"
    return True, ""


def check_safetensors(path: str) -> tuple[bool, str]:
    """Parse the header and check every tensor's byte range against the data length."""
    size = os.path.getsize(path)
    if size < 8:
        return False, f"too short for a safetensors file ({size} bytes)"
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > min(MAX_HEADER, size - 8):
            return False, f"corrupt header: length {length} exceeds the file"
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return False, f"corrupt header: not JSON ({exc})"
    if not isinstance(header, dict):
        return False, "corrupt header: not a JSON object"
    data = size - 8 - length
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, stop) = info["dtype"], info["shape"], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            return False, f"corrupt header: tensor {name!r} lacks dtype/shape/data_offsets"
        width = SAFETENSORS_DTYPES.get(dtype)
        if width is None or not all(isinstance(d, int) and d >= 0 for d in shape):
            return False, f"corrupt header: tensor {name!r} has dtype {dtype!r} shape {shape!r}"
        if not (isinstance(begin, int) and isinstance(stop, int) and 0 <= begin <= stop <= data):
            return False, f"tensor {name!r} points outside the data ({begin}..{stop} of {data})"
        if stop - begin != math.prod(shape) * width:
            return False, f"tensor {name!r}: {stop - begin} bytes for shape {shape} {dtype}"
        end = max(end, stop)
    if end != data:
        return False, f"data length {data} does not match the header's tensors ({end})"
    return True, ""


def check_metrics(path: str) -> tuple[bool, str, str]:
    """best_metrics.json must be a JSON object; (ok, reason, headline)."""
    try:
        with open(path, encoding="utf-8") as handle:
            doc = json.load(handle)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return False, f"best_metrics.json is not valid JSON ({exc})", ""
    if not isinstance(doc, dict):
        return False, "best_metrics.json is not a JSON object", ""
    return True, "", headline_metric(doc)


def check_file(path: str) -> FileCheck:
    """Hash `path`, then load it as what its name says it is (runs in a worker process)."""
    try:
        sha, size = sha256_of(path)
    except OSError as exc:
        return FileCheck(path, -1, "", False, f"cannot read: {exc.strerror or exc}")
    name = os.path.basename(path)
    if name.endswith(CHECKPOINT_SUFFIXES):
        ok, why = load_checkpoint(path)
        return FileCheck(path, size, sha, ok, why)
    if name.endswith(".safetensors"):
        ok, why = check_safetensors(path)
        return FileCheck(path, size, sha, ok, why)
    if name == "best_metrics.json":
        ok, why, metric = check_metrics(path)
        return FileCheck(path, size, sha, ok, why, metric)
    return FileCheck(path, size, sha, None)
