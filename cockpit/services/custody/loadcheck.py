"""Hash one pulled file and prove its content, in a worker process, within bounded memory.

Run by `verify` in a process pool so the TUI stays live and torch is never imported in the
TUI process. The file came from a rented box, so every byte of it is hostile until proven
otherwise: `check_file` is *total*. Whatever the file holds, it returns a `FileCheck`; a
file that cannot be proven gives `loaded=False` and a one-line reason, never an exception,
and no file makes the worker use memory or time out of proportion to the file's size.

What "loaded" proves, per kind:

- **Checkpoints** (`.pt`, `.pth`, `.ckpt`). A zip (what `torch.save` writes) is first checked
  with `zipfile` *before anything is loaded*: every entry STORED (`torch.save` never
  compresses, so a deflated entry is a zip bomb: 510 KB expanding to GBs inside torch's
  reader), entry count and central directory bounded, and the entries' sizes consistent
  with the file's size. Then `torch.load(weights_only=True, mmap=True, map_location="cpu")`;
  a file that would load only unsafely is reported as such. A legacy (non-zip) pickle loads
  without mmap, still weights-only. The loaded object must hold at least one non-empty
  floating-point tensor, and every floating-point tensor must be all finite, checked in
  chunks over the mmapped storage (never a full copy).
- **`.safetensors`**: a bounded header parsed strictly (every malformed field is "corrupt
  header: ..."), tensors' byte ranges inside the data, not overlapping, covering it exactly;
  then the same content proof, reading the data in fixed-size chunks.
- **`best_metrics.json`**: at most `MAX_METRICS_BYTES`, checked before reading; strict UTF-8
  JSON without lone surrogates or over-long numbers; an object whose top-level numbers are
  all finite, with at least one. Its headline metric is returned, made safe to show.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import struct
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from cockpit.models.custody import headline_metric
from cockpit.models.text import visible

CHECKPOINT_SUFFIXES = (".pt", ".pth", ".ckpt")
SAFETENSORS_DTYPES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
                      "I8": 1, "U8": 1, "U16": 2, "U32": 4, "U64": 8, "BOOL": 1,
                      "F8_E4M3": 1, "F8_E5M2": 1}
SAFETENSORS_FLOATS = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
                      "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
"""The safetensors dtypes that hold weights, with the torch dtype that reads them."""

Tensor = Any
"""A `torch.Tensor`. torch is imported only inside this module's functions (it must never
load in the TUI process, see tests/test_layering.py), so the annotation cannot name it."""

# -- bounds ------------------------------------------------------------------------------------

HASH_CHUNK = 1 << 20
"""Bytes read per hashing step into one reused buffer: RSS stays flat whatever the file size
(the earlier whole-file mmap counted every byte of a 200 MB file as resident), and on this
machine it is as fast as the mmap was (1.95 vs 1.75 GB/s)."""

FINITE_CHUNK = 1 << 21
"""Elements per `isfinite` step: the boolean result of one step is 2 MiB, so checking a
multi-GB tensor never allocates more than that beside the mmapped file."""

MAX_RECHECK_FACTOR = 4
"""Tensors may be views of one storage; the finite check reads at most this many times the
file's size in all. Tied weights (the same view twice) are read once; a hostile pickle that
makes a million views of one big storage is refused instead of read a million times."""

MAX_ZIP_ENTRIES = 65_536
"""Entries in a checkpoint zip: torch.save writes one per storage plus ~6 records; a model
with 65k separate storages is far beyond any real checkpoint, and the bound keeps
`zipfile`'s directory listing (one object per entry) small."""

MAX_ZIP_DIRECTORY = 8 << 20
"""Bytes of a checkpoint zip's central directory, read whole by `zipfile`: about 100 bytes
an entry in torch.save's output, so 65k entries fit; a directory padded with millions of
tiny entries is refused before it is parsed."""

EOCD_SEARCH = 22 + 0xFFFF
"""The zip end record (22 bytes) may be followed by a comment of up to 64 KiB: the window
searched from the end of the file."""

MAX_WALK_DEPTH = 32
"""Container nesting walked in a loaded checkpoint: optimizer state is about 5 deep. A tensor
nested deeper could not be checked, so such a checkpoint is refused, not trusted."""

MAX_WALK_NODES = 1_000_000
"""Objects visited in a loaded checkpoint (containers, tensors and plain values): a pickle can
share one list a million times over; real checkpoints hold thousands."""

MAX_SAFETENSORS_HEADER = 16 << 20
"""Bytes of a safetensors JSON header (the format's reference reader allows 100 MB): about
100 bytes a tensor, so 160k tensors; parsed into Python objects this is the largest
allocation of a safetensors check (~10x the header)."""

MAX_DIMS = 64
"""Dimensions of one safetensors tensor: real ones have a handful; the bound keeps the size
arithmetic on hostile shapes cheap."""

MAX_NUMBER_DIGITS = 64
"""Digits in one JSON number (header or metrics): float64 holds 17 significant digits and
byte offsets fit in 20. Python itself raises past 4300 digits, and a 4000-digit integer
would overflow the float conversion that formats the headline metric."""

MAX_METRICS_BYTES = 1 << 20
"""Size of best_metrics.json, checked before reading it: trainers write a few hundred bytes;
a 200 MB file took 1 GB of RSS when parsed."""

MAX_METRIC_CHARS = 160
"""Length of the headline metric string shown on screen and stored in the custody marker."""

MAX_NAME_CHARS = 80
"""Length of a (hostile) tensor or key name quoted in a reason."""

MAX_REASON_CHARS = 300
"""Length of one reason: it is a single line on the verify screen."""


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


class Refused(Exception):
    """A file's content is refused; the message is the reason (one line)."""


def warm_worker(quiet: bool) -> None:
    """Worker start-up: silence output under the TUI, import torch now (while the pull is
    still running, not inside the first check), and give torch ONE thread.

    The pool is the parallelism: one file per worker, a worker per core. Left at its
    default, each worker's torch ran an OpenMP team of one thread per core, so two workers
    on two cores ran four spinning threads, and the finite check of a 260 MB checkpoint took
    0.31 s instead of 0.005 s (measured; `bench.pull_verify`)."""
    if quiet:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    import torch

    torch.set_num_threads(1)


# -- helpers -----------------------------------------------------------------------------------


def one_line(text: str, limit: int = MAX_REASON_CHARS) -> str:
    """`text` safe to show as one line: controls made visible, at most `limit` characters."""
    shown = visible(text[: limit + 1])  # cut first: the text may be megabytes long
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def shown_name(name: object) -> str:
    """A name from the file, quoted for a reason (never its raw controls, never too long)."""
    return repr(one_line(str(name), MAX_NAME_CHARS))


def shown_value(value: object) -> str:
    """A JSON value from the file, summarised for a reason without `repr` of a big structure."""
    if isinstance(value, str):
        return shown_name(value)
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        return one_line(str(value), MAX_NAME_CHARS)
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return f"a {type(value).__name__}"


def describe(exc: BaseException) -> str:
    """`Type: first line of the message`, for an exception raised by a library on bad input."""
    lines = str(exc).strip().splitlines()
    return one_line(f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__, 200)


def sha256_of(path: str) -> tuple[str, int]:
    """SHA-256 in `HASH_CHUNK` reads into one buffer; zero-byte files hash too."""
    digest = hashlib.sha256()
    buffer = bytearray(HASH_CHUNK)
    view = memoryview(buffer)
    size = 0
    with open(path, "rb", buffering=0) as handle:
        while count := handle.readinto(view):
            digest.update(view[:count])
            size += count
    return digest.hexdigest(), size


def _digits(token: str) -> str:
    if sum(c.isdigit() for c in token) > MAX_NUMBER_DIGITS:
        raise Refused(f"a number with {sum(c.isdigit() for c in token)} digits "
                      f"(more than {MAX_NUMBER_DIGITS})")
    return token


def _strings(doc: object) -> Iterator[str]:
    """Every key and string value in a parsed JSON document (iteratively: no recursion)."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)


def parse_json(raw: bytes) -> object:
    """Strict JSON from untrusted bytes; every way it can fail raises `Refused`.

    Invalid UTF-8, over-long numbers (`MAX_NUMBER_DIGITS`; Python raises ValueError past 4300
    digits), nesting deep enough to hit the recursion limit, and lone surrogates from `\\ud800`
    escapes (they cannot be written back as UTF-8: the custody marker would fail) are all
    refused. `NaN` / `Infinity` tokens parse to floats and are judged by the caller.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Refused(f"not UTF-8 (byte {exc.start})") from None
    try:
        doc = json.loads(text, parse_int=lambda s: int(_digits(s)),
                         parse_float=lambda s: float(_digits(s)))
    except RecursionError:
        raise Refused("nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise Refused(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # int() past Python's own digit limit, if a hook ever lets it by
        raise Refused(describe(exc)) from None
    for text in _strings(doc):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise Refused(f"a lone surrogate (\\u{ord(text[exc.start]):04x}) in a string") from None
    return doc


# -- tensors -----------------------------------------------------------------------------------


def _chunk_finite(chunk: Tensor) -> bool:
    """All elements finite. Fast path: the chunk's sum. Under IEEE arithmetic an infinity or
    a NaN among the addends makes any sum infinite or NaN, so a finite sum proves every element
    finite; it is one read pass with no allocation (~35 GB/s here, against ~2.5 GB/s for
    `isfinite().all()`, which writes a boolean per element). A sum that is not finite may
    still come from finite elements (it overflowed), so then the exact check decides."""
    import torch

    try:
        if bool(torch.isfinite(chunk.sum())):
            return True
    except (RuntimeError, NotImplementedError):  # a dtype without a sum kernel (float8)
        pass
    try:
        return bool(torch.isfinite(chunk).all())
    except (RuntimeError, NotImplementedError):  # float8_e4m3fn has no isfinite kernel
        return bool(torch.isfinite(chunk.float()).all())


def _strided_finite(tensor: Tensor) -> bool:
    """All elements finite, in steps of at most `FINITE_CHUNK` elements, never a full copy.

    Contiguous: slices of the flat view. Otherwise blocks along the first dimension, each
    small enough (recursing into one row when a row alone is bigger than a step)."""
    count = tensor.numel()
    if count <= FINITE_CHUNK:
        return _chunk_finite(tensor)
    if tensor.is_contiguous():
        flat = tensor.view(-1)
        return all(_chunk_finite(flat[i:i + FINITE_CHUNK]) for i in range(0, count, FINITE_CHUNK))
    rows = tensor.shape[0]
    row = count // rows
    if row > FINITE_CHUNK:
        return all(_strided_finite(tensor[i]) for i in range(rows))
    step = FINITE_CHUNK // row
    return all(_chunk_finite(tensor[i:i + step]) for i in range(0, rows, step))


def tensor_finite(tensor: Tensor) -> tuple[bool, int]:
    """(all finite, elements read) for one floating-point tensor, in bounded memory.

    A view whose elements overlap (zero or small strides: `expand`) can have far more
    elements than its storage span; then the span itself is checked, which holds every
    element, so the work is bounded by the storage, not by the claimed shape."""
    import torch

    if tensor.layout is not torch.strided:  # sparse COO / CSR: the stored values
        values = tensor.coalesce().values() if tensor.layout is torch.sparse_coo else tensor.values()
        return tensor_finite(values)
    count = tensor.numel()
    if count == 0:
        return True, 0
    span = 1 + sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True))
    if count <= span:
        return _strided_finite(tensor), count
    flat = torch.as_strided(tensor, (span,), (1,), tensor.storage_offset())
    return _strided_finite(flat), span


def _key(key: object) -> str:
    """A container key as part of a tensor's name, cut short (keys come from the file)."""
    if isinstance(key, str):
        return key[:MAX_NAME_CHARS]
    if isinstance(key, int) and key.bit_length() <= 64:
        return str(key)
    return type(key).__name__


def _walk(obj: object, torch: Any) -> Iterator[tuple[str, Tensor]]:
    """(dotted name, tensor) for every tensor in dicts, lists and tuples (iterative, bounded:
    `MAX_WALK_DEPTH`, `MAX_WALK_NODES`; a shared container is walked once)."""
    stack: list[tuple[str, object, int]] = [("", obj, 0)]
    seen: set[int] = set()
    nodes = 1
    while stack:
        name, item, depth = stack.pop()
        if isinstance(item, torch.Tensor):
            yield name, item
            continue
        if not isinstance(item, dict | list | tuple) or id(item) in seen:
            continue
        seen.add(id(item))
        if depth >= MAX_WALK_DEPTH:
            raise Refused(f"nested deeper than {MAX_WALK_DEPTH} levels: refused unchecked")
        nodes += len(item)
        if nodes > MAX_WALK_NODES:
            raise Refused(f"holds more than {MAX_WALK_NODES} objects: refused unchecked")
        if isinstance(item, dict):
            children = [(f"{name}.{_key(k)}" if name else _key(k), v) for k, v in item.items()]
        else:
            children = [(f"{name}[{i}]", v) for i, v in enumerate(item)]
        # Names are cut as they are built, so a long key cannot grow with every level.
        stack.extend((child[:2 * MAX_NAME_CHARS], value, depth + 1) for child, value in reversed(children))


def content_problem(obj: object, file_size: int) -> str:
    """Why a loaded checkpoint does not prove content ("" when it does): at least one
    non-empty floating-point tensor, every floating-point tensor finite."""
    import torch

    budget = MAX_RECHECK_FACTOR * file_size + FINITE_CHUNK * 8
    tensors = weights = empty = 0
    first_other = ""
    checked: set[tuple[object, ...]] = set()
    for name, tensor in _walk(obj, torch):
        tensors += 1
        if not (tensor.is_floating_point() or tensor.is_complex()):
            first_other = first_other or name
            continue
        if tensor.numel() == 0:
            empty += 1
            continue
        weights += 1
        if tensor.layout is torch.strided:
            key = (tensor.data_ptr(), tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype)
            if key in checked:
                continue
            checked.add(key)
        finite, read = tensor_finite(tensor)
        if not finite:
            return f"tensor {shown_name(name or 'the top-level tensor')} has NaN/inf values"
        budget -= read * tensor.element_size()
        if budget < 0:
            return (f"tensor views re-read the same storage more than {MAX_RECHECK_FACTOR}x "
                    f"the file's size: refused unchecked")
    if weights:
        return ""
    if not tensors:
        return ("loads, but holds no tensors (not a state dict or a dict with model / "
                "model_state_dict / state_dict)")
    if empty:
        return f"holds only empty floating-point tensors ({empty}): no weights"
    return (f"holds no floating-point tensor, only integer/bool ones (e.g. "
            f"{shown_name(first_other or 'the top-level tensor')}): no weights")


# -- checkpoints -------------------------------------------------------------------------------


def _zip_end(handle: BinaryIO, size: int) -> tuple[int, int, int]:
    """(entries, central directory size, its offset) from the end record (zip64 included),
    with the end record exactly at the end of the file (after its comment)."""
    window = min(size, EOCD_SEARCH)
    handle.seek(size - window)
    tail = handle.read(window)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or at + 22 > len(tail):
        raise Refused("does not load: truncated or corrupt zip (no end-of-central-directory record)")
    _, _, _, _, entries, cd_size, cd_offset, comment = struct.unpack_from("<4s4H2LH", tail, at)
    if at + 22 + comment != len(tail):
        raise Refused("does not load: corrupt zip (bytes after its end record)")
    locator = at - 20
    if locator >= 0 and tail[locator:locator + 4] == b"PK\x06\x07":
        (record,) = struct.unpack_from("<Q", tail, locator + 8)
        if record + 56 > size:
            raise Refused("does not load: corrupt zip (zip64 end record outside the file)")
        handle.seek(record)
        block = handle.read(56)
        if block[:4] != b"PK\x06\x06":
            raise Refused("does not load: corrupt zip (no zip64 end record where its locator points)")
        entries, cd_size, cd_offset = struct.unpack_from("<3Q", block, 32)
    return entries, cd_size, cd_offset


def zip_problem(path: str, size: int) -> str:
    """Why a checkpoint zip must not be handed to torch ("" when it may): compressed
    entries (torch.save never compresses; a deflated entry is how a zip bomb expands),
    too many entries, or sizes that do not fit in the file. Nothing is decompressed."""
    with open(path, "rb") as handle:
        entries, cd_size, cd_offset = _zip_end(handle, size)
        if entries > MAX_ZIP_ENTRIES:
            return f"zip holds {entries} entries (more than {MAX_ZIP_ENTRIES}): refused unloaded"
        if cd_size > MAX_ZIP_DIRECTORY:
            return (f"zip central directory is {cd_size} bytes (more than {MAX_ZIP_DIRECTORY}): "
                    f"refused unloaded")
        if cd_offset + cd_size > size:
            return "does not load: corrupt zip (central directory outside the file)"
        with zipfile.ZipFile(handle) as archive:
            infos = archive.infolist()
        if len(infos) != entries:
            return f"corrupt zip: its directory lists {len(infos)} entries, its end record {entries}"
        total = 0
        for info in infos:
            name = shown_name(info.filename)
            if info.compress_type != zipfile.ZIP_STORED:
                return (f"zip entry {name} is compressed (method {info.compress_type}); torch.save "
                        f"never compresses, so it is refused unloaded (a zip bomb expands this way)")
            if info.compress_size != info.file_size or info.header_offset + info.file_size > size:
                return f"zip entry {name} claims {info.file_size} bytes beyond the file's {size}"
            handle.seek(info.header_offset)
            local = handle.read(30)
            if local[:4] != b"PK\x03\x04" or struct.unpack_from("<H", local, 8)[0] != 0:
                return f"zip entry {name}: its local header is missing or not STORED"
            total += info.file_size
        if total > size:
            return f"zip entries claim {total} bytes in all, more than the file's {size}"
    return ""


def load_checkpoint(path: str) -> tuple[bool, str]:
    """Structure check, then `torch.load(weights_only=True)` and the content proof;
    (loaded, reason)."""
    import pickle

    import torch

    size = os.path.getsize(path)
    if size == 0:
        return False, "empty file (0 bytes)"
    with open(path, "rb") as handle:
        is_zip = handle.read(4) == b"PK\x03\x04"  # the test torch.load itself makes
    if is_zip and (problem := zip_problem(path, size)):
        return False, problem
    try:
        try:
            with warnings.catch_warnings():  # torch warns about what the file holds (its pickle
                warnings.simplefilter("ignore")  # protocol...): the verdict is the answer, not them
                obj = torch.load(path, weights_only=True, mmap=is_zip, map_location="cpu")
        except pickle.UnpicklingError:
            raise
        except Exception:
            if not is_zip:
                raise
            # Some filesystems refuse the mmap: load plainly (still weights-only); every
            # record was checked STORED and inside the file, so this reads at most its size.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                obj = torch.load(path, weights_only=True, map_location="cpu")
    except pickle.UnpicklingError as exc:
        return False, f"refused by weights_only=True: it would load only unsafely ({describe(exc)})"
    except Exception as exc:  # any failure to load is the answer, not a crash
        return False, f"does not load: {describe(exc)}"
    try:
        problem = content_problem(obj, size)
    finally:
        del obj
    return not problem, problem


# -- safetensors -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    name: str
    dtype: str
    begin: int
    stop: int


def _int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entries(header: object, data: int) -> list[_Entry]:
    """The header's tensors, each field checked; raises `Refused` ("corrupt header: ...")."""
    if not isinstance(header, dict):
        raise Refused(f"corrupt header: {shown_value(header)}, not a JSON object")
    entries = []
    for name, info in header.items():
        label = shown_name(name)
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise Refused("corrupt header: __metadata__ must map strings to strings")
            continue
        if not isinstance(info, dict):
            raise Refused(f"corrupt header: tensor {label} is {shown_value(info)}, not an object")
        dtype, shape, offsets = info.get("dtype"), info.get("shape"), info.get("data_offsets")
        if not isinstance(dtype, str) or dtype not in SAFETENSORS_DTYPES:
            raise Refused(f"corrupt header: tensor {label} has dtype {shown_value(dtype)}")
        if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(_int(d) for d in shape):
            raise Refused(f"corrupt header: tensor {label} has shape {shown_value(shape)} "
                          f"(a list of at most {MAX_DIMS} non-negative integers)")
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_int(o) for o in offsets)):
            raise Refused(f"corrupt header: tensor {label} has data_offsets {shown_value(offsets)}")
        begin, stop = offsets
        if not begin <= stop <= data:
            raise Refused(f"tensor {label} points outside the data ({begin}..{stop} of {data})")
        if stop - begin != math.prod(shape) * SAFETENSORS_DTYPES[dtype]:
            shown = shape if len(shape) <= 8 else f"{len(shape)}-d"
            raise Refused(f"tensor {label}: {stop - begin} bytes for shape {shown} {dtype}")
        entries.append(_Entry(name, dtype, begin, stop))
    if not entries:
        raise Refused("holds no tensors (" + ("only __metadata__" if header else "an empty {} header") + ")")
    return entries


def _layout_problem(entries: list[_Entry], data: int) -> str:
    """Byte ranges must not overlap and must cover the data exactly (as the format says)."""
    end, owner = 0, ""
    for entry in sorted(entries, key=lambda e: (e.begin, e.stop)):
        if entry.begin == entry.stop:
            continue  # an empty tensor occupies no bytes
        if entry.begin < end:
            return (f"tensors {shown_name(owner)} and {shown_name(entry.name)} overlap "
                    f"(bytes {entry.begin}..{min(end, entry.stop)})")
        if entry.begin > end:
            return f"bytes {end}..{entry.begin} of the data belong to no tensor"
        end, owner = entry.stop, entry.name
    if end != data:
        return f"data length {data} does not match the header's tensors ({end})"
    return ""


def _bytes_finite(handle: io.BufferedReader, start: int, length: int, dtype: str, buffer: bytearray) -> bool:
    """Read `length` bytes at `start`, at most `FINITE_CHUNK` elements at a time into the one
    `buffer`; all values finite."""
    import torch

    torch_dtype = getattr(torch, SAFETENSORS_FLOATS[dtype])
    step = FINITE_CHUNK * SAFETENSORS_DTYPES[dtype]
    view = memoryview(buffer)
    handle.seek(start)
    while length:
        want = min(step, len(buffer), length)
        got = 0
        while got < want:
            count = handle.readinto(view[got:want])
            if not count:
                raise Refused("the file shrank while it was being checked")
            got += count
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chunk = torch.frombuffer(view[:want], dtype=torch_dtype)
        if not _chunk_finite(chunk):
            return False
        length -= want
    return True


def check_safetensors(path: str) -> tuple[bool, str]:
    """Header and layout (see `_entries`, `_layout_problem`), then the content proof."""
    size = os.path.getsize(path)
    if size < 8:
        return False, f"too short for a safetensors file ({size} bytes)"
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > size - 8:
            return False, f"corrupt header: length {length} exceeds the file"
        if length > MAX_SAFETENSORS_HEADER:
            return False, f"corrupt header: length {length} is over the {MAX_SAFETENSORS_HEADER}-byte cap"
        try:
            header = parse_json(handle.read(length))
        except Refused as exc:
            return False, f"corrupt header: {exc}"
        data = size - 8 - length
        try:
            entries = _entries(header, data)
        except Refused as exc:
            return False, str(exc)
        if problem := _layout_problem(entries, data):
            return False, problem
        weights = [e for e in entries if e.dtype in SAFETENSORS_FLOATS and e.stop > e.begin]
        if not weights:
            return False, "holds no non-empty floating-point tensor: no weights"
        buffer = bytearray(min(FINITE_CHUNK * 8, max(e.stop - e.begin for e in weights)))  # F64
        for entry in weights:
            if not _bytes_finite(handle, 8 + length + entry.begin, entry.stop - entry.begin,
                                 entry.dtype, buffer):
                return False, f"tensor {shown_name(entry.name)} has NaN/inf values"
    return True, ""


# -- metrics -----------------------------------------------------------------------------------


def check_metrics(path: str, prefer: str | None = None) -> tuple[bool, str, str]:
    """best_metrics.json: bounded, strict JSON, an object of finite numbers; (ok, reason,
    headline metric made safe to show and store; `prefer` is the sweep's named metric)."""
    size = os.path.getsize(path)
    if size > MAX_METRICS_BYTES:
        return False, (f"best_metrics.json is {size} bytes, over the {MAX_METRICS_BYTES}-byte cap "
                       f"(refused unread)"), ""
    with open(path, "rb") as handle:
        raw = handle.read(MAX_METRICS_BYTES + 1)
    if len(raw) > MAX_METRICS_BYTES:
        return False, f"best_metrics.json grew past the {MAX_METRICS_BYTES}-byte cap while read", ""
    try:
        doc = parse_json(raw)
    except Refused as exc:
        return False, f"best_metrics.json is not valid JSON ({exc})", ""
    if not isinstance(doc, dict):
        return False, f"best_metrics.json is {shown_value(doc)}, not a JSON object", ""
    numbers = 0
    for key, value in doc.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not math.isfinite(value):
            return False, f"best_metrics.json: {shown_name(key)} is {value}, not a finite number", ""
        numbers += 1
    if not numbers:
        return False, "best_metrics.json holds no number at its top level (no metric)", ""
    return True, "", one_line(headline_metric(doc, prefer), MAX_METRIC_CHARS)


# -- the worker's entry point ------------------------------------------------------------------


def _checker(name: str, prefer: str | None) -> Callable[[str], tuple[bool, str, str]] | None:
    if name.endswith(CHECKPOINT_SUFFIXES):
        return lambda path: (*load_checkpoint(path), "")
    if name.endswith(".safetensors"):
        return lambda path: (*check_safetensors(path), "")
    if name == "best_metrics.json":
        return lambda path: check_metrics(path, prefer)
    return None


def check_file(path: str, prefer: str | None = None) -> FileCheck:
    """Hash `path`, then load it as what its name says it is (runs in a worker process).
    `prefer`: the metric the sweep names as the headline (`metric:` on the instance).

    Total: every failure, expected or not (MemoryError, RecursionError, OSError, struct and
    zip errors, ...), becomes `loaded=False` with a one-line reason."""
    try:
        sha, size = sha256_of(path)
    except Exception as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else describe(exc)
        return FileCheck(path, -1, "", False, one_line(f"cannot read: {why}"))
    checker = _checker(os.path.basename(path), prefer)
    if checker is None:
        return FileCheck(path, size, sha, None)
    try:
        ok, why, metric = checker(path)
    except Refused as exc:
        ok, why, metric = False, str(exc), ""
    except Exception as exc:  # the file's content made a library fail: that is the answer
        ok, why, metric = False, f"cannot be checked: {describe(exc)}", ""
    return FileCheck(path, size, sha, ok, one_line(why), metric)
