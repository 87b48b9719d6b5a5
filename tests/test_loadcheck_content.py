"""Load verification proves content, within bounded memory (issue 12 item 4, issue 13
"Exhaustion" and "One odd file").

Every file here is real: checkpoints come from `torch.save` (the zip bomb is a real
torch.save zip re-packed with a deflated, zero-padded `data.pkl`), safetensors files are
written byte by byte as the format specifies (struct + json), metrics files are JSON text.
Each goes through `check_file`, the function the verify worker runs; a few go through the
real spawned process pool that `verify` uses. Memory is measured as the peak RSS of a fresh
interpreter (`ru_maxrss`), never time.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.services.custody import loadcheck
from cockpit.services.custody.loadcheck import FileCheck, check_file

REPO = Path(__file__).resolve().parents[1]
BOMB_EXPANDED = 512 << 20
"""Bytes the bomb's data.pkl expands to (deflate's best ratio is ~1030:1, so ~520 KB on disk,
the size of the bomb in issue 13)."""
METRICS_SIZE = 200 << 20
"""The 200 MB best_metrics.json of issue 13 (sparse: cheap to make)."""
REASON_CHARS = 300
"""A reason is one line of at most this many characters (loadcheck.MAX_REASON_CHARS)."""
METRIC_CHARS = 160
"""The headline metric's length bound (loadcheck.MAX_METRIC_CHARS)."""


# -- builders (bench/verify_rss.py uses them too) ----------------------------------------------


def write_zip_bomb(path: Path, expanded: int = BOMB_EXPANDED) -> Path:
    """A real torch.save zip, re-packed with ZIP_DEFLATED and `expanded` zero bytes after its
    pickle: loads fine with the old check (the unpickler stops at STOP) after inflating it all."""
    source = path.with_name(path.name + ".src")
    torch.save({"fc.weight": torch.randn(8, 8)}, source)
    zero = bytes(1 << 20)
    with zipfile.ZipFile(source) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED,
                                                         compresslevel=9) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if not info.filename.endswith("data.pkl"):
                zout.writestr(info.filename, data)
                continue
            with zout.open(info.filename, "w", force_zip64=True) as out:
                out.write(data)
                for _ in range(expanded // len(zero)):
                    out.write(zero)
    source.unlink()
    return path


def write_sparse_metrics(path: Path, size: int = METRICS_SIZE) -> Path:
    """A valid-looking best_metrics.json of `size` bytes: a long string value, mostly a hole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.write(b'{"epoch": 5, "dice": 0.8, "note": "')
        handle.truncate(size - 2)
        handle.seek(size - 2)
        handle.write(b'"}')
    return path


def safetensors_bytes(header: object, data: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


# -- helpers -----------------------------------------------------------------------------------


def saved(tmp_path: Path, obj: object, name: str = "best.pth", **kwargs: object) -> FileCheck:
    path = tmp_path / name
    torch.save(obj, path, **kwargs)  # type: ignore[arg-type]
    return check_file(str(path))


def written(tmp_path: Path, name: str, data: bytes) -> FileCheck:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return check_file(str(path))


def metrics(tmp_path: Path, raw: bytes) -> FileCheck:
    return written(tmp_path, "cell/best_metrics.json", raw)


def refused(check: FileCheck, *fragments: str) -> None:
    assert check.loaded is False, check
    assert "\n" not in check.reason and len(check.reason) <= REASON_CHARS
    for fragment in fragments:
        assert fragment in check.reason, check.reason


def peak_rss_growth(path: Path) -> tuple[dict[str, object], int]:
    """Check `path` in a fresh interpreter (torch imported first, as in a warm worker): its
    FileCheck and how much its peak RSS grew during the check, in bytes."""
    script = (
        "import json, resource, sys, torch\n"
        "from cockpit.services.custody.loadcheck import check_file\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "check = check_file(sys.argv[1])\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print(json.dumps({'loaded': check.loaded, 'reason': check.reason, 'kb': after - before}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True,
                            text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    doc = json.loads(result.stdout.splitlines()[-1])
    return doc, int(doc["kb"]) * 1024


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_zip_bomb(tmp_path_factory.mktemp("bomb") / "best.pth")


# -- checkpoints -------------------------------------------------------------------------------


def test_a_real_checkpoint_with_integer_buffers_beside_its_weights_loads(tmp_path: Path) -> None:
    state = {"model_state_dict": {"fc.weight": torch.randn(16, 8), "fc.bias": torch.zeros(16),
                                  "bn.num_batches_tracked": torch.tensor(3)},
             "optimizer": {"state": {0: {"exp_avg": torch.zeros(16, 8)}}}, "epoch": 7}
    check = saved(tmp_path, state)
    assert check.loaded is True and check.reason == ""
    assert check.size == (tmp_path / "best.pth").stat().st_size and len(check.sha256) == 64
    # a transposed (non-contiguous) and an expanded (overlapping) weight are checked too
    assert saved(tmp_path, {"w": torch.randn(300, 200).T,
                            "e": torch.ones(1).expand(10_000, 10_000)}).loaded is True
    # the legacy (non-zip) format still loads, weights-only
    assert saved(tmp_path, {"w": torch.randn(3)}, _use_new_zipfile_serialization=False).loaded is True


@pytest.mark.parametrize(("obj", "fragment"), [
    ({"w": torch.empty(0)}, "holds only empty floating-point tensors"),
    ({"fc.weight": torch.full((32, 32), float("nan"))}, "tensor 'fc.weight' has NaN/inf values"),
    ({"fc.weight": torch.randn(8), "fc.bias": torch.tensor([0.0, float("inf")])},
     "tensor 'fc.bias' has NaN/inf values"),
    ({"epoch": torch.tensor(3)}, "holds no floating-point tensor, only integer/bool ones (e.g. 'epoch')"),
    ({"epoch": 3, "note": "no weights here"}, "holds no tensors"),
    ({"model": {"layers": [torch.randn(2), {"w": torch.tensor([-float("inf")]).bfloat16()}]}},
     "tensor 'model.layers[1].w' has NaN/inf values"),
], ids=["empty-tensor", "all-nan", "one-inf", "only-epoch", "no-tensors", "nested-bf16-inf"])
def test_meaningless_checkpoints_are_refused_with_their_reason(
        tmp_path: Path, obj: object, fragment: str) -> None:
    refused(saved(tmp_path, obj), fragment)


def test_nan_deep_inside_a_big_non_contiguous_tensor_is_found(tmp_path: Path) -> None:
    weight = torch.randn(2100, 1100)  # more than one FINITE_CHUNK, saved transposed
    weight[2099, 1099] = float("nan")
    refused(saved(tmp_path, {"w": weight.T}), "tensor 'w' has NaN/inf values")
    refused(saved(tmp_path, {"w": torch.tensor([float("nan")]).expand(5000, 5000)}),
            "tensor 'w' has NaN/inf values")
    refused(saved(tmp_path, {"w": torch.tensor([1.0, float("nan")])},
                  _use_new_zipfile_serialization=False), "tensor 'w' has NaN/inf values")


def test_a_checkpoint_nested_too_deep_to_check_is_refused(tmp_path: Path) -> None:
    nested: object = torch.randn(2)
    for _ in range(loadcheck.MAX_WALK_DEPTH + 2):
        nested = [nested]
    refused(saved(tmp_path, {"w": nested}), "nested deeper than")


def test_the_zip_bomb_is_refused_before_anything_is_loaded(
        bomb: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert bomb.stat().st_size < 600_000  # ~520 KB that would inflate to 512 MiB
    calls: list[object] = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: calls.append(a))
    check = check_file(str(bomb))
    refused(check, "zip entry", "data.pkl' is compressed (method 8)", "refused unloaded")
    assert calls == [], "torch.load was reached"


def test_the_zip_bomb_costs_almost_no_memory(bomb: Path) -> None:
    doc, growth = peak_rss_growth(bomb)
    assert doc["loaded"] is False and "is compressed" in str(doc["reason"])
    assert growth < 32 << 20, f"peak RSS grew by {growth >> 20} MiB checking a {BOMB_EXPANDED >> 20} MiB bomb"


def test_zip_structure_lies_are_refused_unloaded(tmp_path: Path) -> None:
    good = tmp_path / "good.pth"
    torch.save({"w": torch.randn(4)}, good)
    data = good.read_bytes()
    # A STORED entry whose directory size claims more bytes than the file has.
    with zipfile.ZipFile(good) as archive:
        info = next(i for i in archive.infolist() if i.filename.endswith("data/0"))
    directory = data.index(b"PK\x01\x02")
    entry = data.index(info.filename.encode(), directory) - 46
    lying = bytearray(data)
    struct.pack_into("<2L", lying, entry + 20, 1 << 30, 1 << 30)  # compressed, uncompressed size
    refused(written(tmp_path, "lie.pth", bytes(lying)), "claims 1073741824 bytes")
    # Truncated: no end record.
    refused(written(tmp_path, "cut.pth", data[: len(data) // 2]), "does not load", "truncated")


# -- safetensors -------------------------------------------------------------------------------


F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}


@pytest.mark.parametrize(("header", "data", "fragment"), [
    ({}, b"", "holds no tensors (an empty {} header)"),
    ({"__metadata__": {"format": "pt"}}, b"", "holds no tensors (only __metadata__)"),
    ({"a": F32_2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, bytes(12),
     "tensors 'a' and 'b' overlap"),
    ({"a": {**F32_2, "dtype": ["F32"]}}, bytes(8), "corrupt header: tensor 'a' has dtype a list"),
    ({"a": {**F32_2, "shape": 2}}, bytes(8), "corrupt header: tensor 'a' has shape 2"),
    ({"a": {**F32_2, "data_offsets": [0, 8, 9]}}, bytes(8), "corrupt header: tensor 'a' has data_offsets"),
    ({"a": 5}, b"", "corrupt header: tensor 'a' is 5, not an object"),
    ([F32_2], bytes(8), "corrupt header: a list of 1, not a JSON object"),
    ({"__metadata__": [1]}, b"", "corrupt header: __metadata__ must map strings to strings"),
    (b'{"a": ' + b'{"b": ' * 50_000 + b"1" + b"}" * 50_001, b"", "corrupt header: nested too deeply"),
    (b'{"a": {"dtype": "F32", "shape": [' + b"9" * 5000 + b'], "data_offsets": [0, 8]}}', bytes(8),
     "corrupt header: a number with 5000 digits"),
    (b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "\\ud800": 1}', bytes(8),
     "corrupt header: a lone surrogate"),
    (b'{"a": \xff}', b"", "corrupt header: not UTF-8"),
    ({"a": F32_2}, bytes(12), "data length 12 does not match the header's tensors (8)"),
    ({"a": F32_2, "b": {"dtype": "F32", "shape": [1], "data_offsets": [12, 16]}}, bytes(16),
     "bytes 8..12 of the data belong to no tensor"),
    ({"a": {**F32_2, "data_offsets": [0, 16]}}, bytes(8), "points outside the data"),
    ({"a": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8),
     "holds no non-empty floating-point tensor"),
    ({"a": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}}, b"",
     "holds no non-empty floating-point tensor"),
    ({"a": F32_2}, struct.pack("<2f", 1.0, float("nan")), "tensor 'a' has NaN/inf values"),
    ({"a": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}, b"\x80\x3f\x80\x7f",
     "tensor 'a' has NaN/inf values"),  # 1.0, +inf in bfloat16
    ({"a": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}}, b"\x7f",
     "tensor 'a' has NaN/inf values"),  # the e4m3fn NaN (no isfinite kernel: widened)
], ids=["empty-header", "only-metadata", "overlap", "list-dtype", "int-shape", "three-offsets",
        "entry-not-object", "header-not-object", "metadata-list", "deep-nesting", "5000-digits",
        "lone-surrogate", "not-utf8", "data-too-long", "gap", "outside", "no-float", "empty-float",
        "f32-nan", "bf16-inf", "f8-nan"])
def test_bad_safetensors_each_have_their_reason(
        tmp_path: Path, header: object, data: bytes, fragment: str) -> None:
    refused(written(tmp_path, "ema.safetensors", safetensors_bytes(header, data)), fragment)


def test_good_safetensors_load_including_a_tensor_bigger_than_one_chunk(tmp_path: Path) -> None:
    count = loadcheck.FINITE_CHUNK * 2 + 3
    big = torch.arange(count, dtype=torch.float32)
    header = {"__metadata__": {"format": "pt"},
              "big": {"dtype": "F32", "shape": [count], "data_offsets": [0, count * 4]},
              "bf": {"dtype": "BF16", "shape": [2], "data_offsets": [count * 4, count * 4 + 4]},
              "n": {"dtype": "I64", "shape": [1], "data_offsets": [count * 4 + 4, count * 4 + 12]}}
    data = big.numpy().tobytes() + b"\x80\x3f\x00\x40" + bytes(8)
    assert written(tmp_path, "ema.safetensors", safetensors_bytes(header, data)).loaded is True
    big[-1] = float("inf")  # the last element of the last chunk
    data = big.numpy().tobytes() + b"\x80\x3f\x00\x40" + bytes(8)
    refused(written(tmp_path, "ema.safetensors", safetensors_bytes(header, data)),
            "tensor 'big' has NaN/inf values")


# -- best_metrics.json -------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "fragment"), [
    (b'{"epoch": 5, "dice": NaN}', "'dice' is nan, not a finite number"),
    (b'{"epoch": 5, "loss": -Infinity}', "'loss' is -inf, not a finite number"),
    (b'{"epoch": 5, "dice": 1e400}', "'dice' is inf, not a finite number"),
    (b'{"epoch": ' + b"9" * 5000 + b"}", "not valid JSON (a number with 5000 digits"),
    (b'{"metric": "\\ud800", "\\ud800": 0.5}', "not valid JSON (a lone surrogate (\\ud800)"),
    (b'{"dice": "\xff"}', "not valid JSON (not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "not valid JSON (nested too deeply)"),
    (b"[0.8]", "best_metrics.json is a list of 1, not a JSON object"),
    (b'"dice"', "best_metrics.json is 'dice', not a JSON object"),
    (b'{"model": "unet"}', "holds no number at its top level"),
    (b'{"epoch": 5, "dice": ', "best_metrics.json is not valid JSON"),
], ids=["nan", "-inf", "overflow", "5000-digits", "lone-surrogate", "not-utf8", "deep", "list",
        "string", "no-number", "cut"])
def test_bad_metrics_each_have_their_reason(tmp_path: Path, raw: bytes, fragment: str) -> None:
    check = metrics(tmp_path, raw)
    refused(check, fragment)
    assert check.metric == ""


def test_good_metrics_give_a_headline_that_is_safe_to_store_and_show(tmp_path: Path) -> None:
    assert metrics(tmp_path, b'{"epoch": 5, "dice": 0.8}').metric == "epoch=5 dice=0.8"
    hostile = "\x1b]52;c;cHduZWQ=\x07" + "[/bold]" + "x" * 5000
    check = metrics(tmp_path, json.dumps({"metric": hostile, hostile: 0.5, "epoch": 1}).encode())
    assert check.loaded is True
    assert check.metric.startswith("epoch=1 ␛]52;c;cHduZWQ=␇[/bold]xxx")
    assert "\x1b" not in check.metric and "\x07" not in check.metric
    assert len(check.metric) <= METRIC_CHARS
    json.dumps({"metric": check.metric}, ensure_ascii=False).encode("utf-8")  # the marker can hold it


def test_a_200_mb_metrics_file_is_refused_by_its_size_unread(tmp_path: Path) -> None:
    path = write_sparse_metrics(tmp_path / "cell" / "best_metrics.json")
    check = check_file(str(path))
    refused(check, f"best_metrics.json is {METRICS_SIZE} bytes, over the 1048576-byte cap (refused unread)")
    assert check.size == METRICS_SIZE and len(check.sha256) == 64  # still hashed: the manifest compares it
    doc, growth = peak_rss_growth(path)
    assert doc["loaded"] is False
    assert growth < 16 << 20, f"peak RSS grew by {growth >> 20} MiB for a {METRICS_SIZE >> 20} MB file"


# -- totality ----------------------------------------------------------------------------------


def test_the_bounds_are_the_documented_values() -> None:
    assert (loadcheck.MAX_REASON_CHARS, loadcheck.MAX_METRIC_CHARS) == (REASON_CHARS, METRIC_CHARS)
    assert loadcheck.MAX_METRICS_BYTES == 1 << 20 and loadcheck.MAX_ZIP_ENTRIES == 65_536


def test_an_unreadable_or_vanished_file_gives_a_reason(tmp_path: Path) -> None:
    refused(check_file(str(tmp_path / "gone.pth")), "cannot read")
    folder = tmp_path / "best_metrics.json"
    folder.mkdir()  # a directory where a file was expected
    refused(check_file(str(folder)), "cannot read")


def test_files_through_the_real_spawned_pool(tmp_path: Path, bomb: Path) -> None:
    from cockpit.services.custody.verify import make_pool

    nan = tmp_path / "nan.pth"
    torch.save({"fc.weight": torch.full((4,), float("nan"))}, nan)
    deep = tmp_path / "deep" / "best_metrics.json"
    deep.parent.mkdir()
    deep.write_bytes(b"[" * 100_000 + b"]" * 100_000)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(safetensors_bytes({"a": {**F32_2, "dtype": ["F32"]}}, bytes(8)))
    paths = [bomb, nan, deep, junk]
    with make_pool(2) as pool:
        checks = list(pool.map(check_file, [str(p) for p in paths]))
    assert [c.loaded for c in checks] == [False] * 4
    assert "is compressed" in checks[0].reason
    assert checks[1].reason == "tensor 'fc.weight' has NaN/inf values"
    assert "nested too deeply" in checks[2].reason
    assert "has dtype a list" in checks[3].reason
    # The pool is the parallelism: each worker's torch runs one thread. At torch's default
    # (a thread per core in every worker) two workers on two cores oversubscribed the CPU and
    # the finite check ran ~60x slower (bench.pull_verify, issue 20).
    with make_pool(2) as pool:
        assert set(pool.map(torch_threads, range(4))) == {1}


def torch_threads(_: int) -> int:
    """How many intra-op threads torch uses in the process that runs this."""
    return int(torch.get_num_threads())


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(min_value=10**70, max_value=10**90)
    | st.floats() | st.text(st.characters(codec=None, categories=None), max_size=8)
    | st.sampled_from(["F32", "BF16", "F8_E4M3", "I64", "__metadata__", "dtype"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["dtype", "shape", "data_offsets", "__metadata__", "w", "epoch"])
        | st.text(max_size=4), inner, max_size=4),
    max_leaves=20)


def entry() -> st.SearchStrategy[object]:
    """A tensor entry that is often almost right (so the later checks are reached too)."""
    dtype = st.sampled_from(["F32", "F16", "BF16", "F8_E4M3", "F64", "I8"]) | JSONISH
    shape = st.lists(st.integers(0, 4), max_size=3) | JSONISH
    offsets = st.lists(st.integers(0, 40), min_size=2, max_size=2) | JSONISH
    return st.fixed_dictionaries({"dtype": dtype, "shape": shape, "data_offsets": offsets}) | JSONISH


def assert_total(path: Path) -> None:
    check = check_file(str(path))
    assert isinstance(check, FileCheck)
    assert check.reason == "" if check.loaded else check.reason
    assert "\n" not in check.reason and len(check.reason) <= REASON_CHARS
    assert len(check.metric) <= METRIC_CHARS
    check.metric.encode("utf-8")


@pytest.fixture(scope="module")
def fuzz_dir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "cell").mkdir()
        yield Path(folder)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=2048), name=st.sampled_from(
    ["best.pth", "last.ckpt", "ema.safetensors", "cell/best_metrics.json"]))
def test_random_bytes_never_raise(fuzz_dir: Path, data: bytes, name: str) -> None:
    path = fuzz_dir / name
    path.write_bytes(data)
    assert_total(path)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(header=st.dictionaries(st.text(max_size=6) | st.just("__metadata__"), entry(), max_size=4)
       | JSONISH, data=st.binary(max_size=64), nan=st.booleans())
def test_random_json_headers_and_metrics_never_raise(
        fuzz_dir: Path, header: object, data: bytes, nan: bool) -> None:
    raw = json.dumps(header, allow_nan=nan).encode() if nan or _finite(header) else b"{}"
    path = fuzz_dir / "ema.safetensors"
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)
    assert_total(path)
    path = fuzz_dir / "cell" / "best_metrics.json"
    path.write_bytes(raw)
    assert_total(path)


def _finite(doc: object) -> bool:
    try:
        json.dumps(doc, allow_nan=False)
    except ValueError:
        return False
    return True


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4))
def test_corrupted_real_checkpoints_never_raise(fuzz_dir: Path, flips: list[tuple[int, int]]) -> None:
    path = fuzz_dir / "flip.pth"
    if not path.exists():
        torch.save({"fc.weight": torch.randn(4, 4), "n": torch.tensor(1)}, path)
        (fuzz_dir / "flip.orig").write_bytes(path.read_bytes())
    data = bytearray((fuzz_dir / "flip.orig").read_bytes())
    for at, xor in flips:
        data[at % len(data)] ^= xor
    path.write_bytes(bytes(data))
    assert_total(path)


def test_a_sum_that_overflows_is_not_taken_for_a_non_finite_tensor() -> None:
    """The fast check sums each chunk; finite values whose sum overflows (3e38 x 5M in float32)
    go on to the exact check and pass, while one NaN or infinity anywhere still fails."""
    import torch

    from cockpit.services.custody.loadcheck import tensor_finite

    for dtype, big in ((torch.float32, 3e38), (torch.float16, 6e4), (torch.bfloat16, 3e38),
                       (torch.float64, 1e308)):
        tensor = torch.full((5_000_000,), big, dtype=dtype)
        assert tensor_finite(tensor) == (True, 5_000_000), dtype
        for bad in (float("nan"), float("inf"), float("-inf")):
            tensor[4_321_000] = bad
            assert tensor_finite(tensor)[0] is False, (dtype, bad)
            tensor[4_321_000] = big
