"""Peak RSS of checking hostile pulled files (issue 13 "Exhaustion"), before and after.

Files from issue 13: (a) a ~520 KB deflate zip-bomb `best.pth` (a real torch.save zip
re-packed with 512 MiB of zeros after its pickle) and (b) a 200 MB `best_metrics.json`
(sparse, NUL-filled), plus (c) a valid 200 MB one (a long string, written out). Each is
checked by `check_file` in a fresh interpreter, as a verify worker would (torch imported
first, as `warm_worker` does), once with the baseline `loadcheck.py` (from `git show
BASELINE:cockpit/services/loadcheck.py`, imported as a temp module) and once with the
current one. Printed: the worker's peak RSS (`ru_maxrss`), how far the check raised that
peak above the peak after importing torch, the verdict, and the ratios. Asserts nothing.

    .venv/bin/python -m bench.verify_rss [--baseline COMMIT]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = "a1e8212bccc8aaf71a146d3fd03d7affed44653c"
"""main before the content proof (loadcheck.py as issue 13 measured it)."""

WORKER = r"""
import importlib.util, json, resource, sys
import torch
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
spec = importlib.util.spec_from_file_location("loadcheck_under_test", sys.argv[1])
module = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = module
spec.loader.exec_module(module)
check = module.check_file(sys.argv[2])
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kb": before, "peak_kb": after, "loaded": check.loaded,
                  "reason": check.reason[:70]}))
"""


def write_dense_metrics(path: Path, size: int) -> Path:
    """A *valid* best_metrics.json of `size` bytes (a long "note" string): the sparse one is
    NUL-filled, which the old parser rejected after reading it, while this one it parsed whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    head, tail = b'{"epoch": 5, "dice": 0.8, "note": "', b'"}'
    block = b"x" * (1 << 20)
    with path.open("wb") as handle:
        handle.write(head)
        left = size - len(head) - len(tail)
        while left > 0:
            left -= handle.write(block[:left])
        handle.write(tail)
    return path


def measure(module: Path, target: Path) -> dict[str, object]:
    """Check `target` with the loadcheck at `module` in a fresh interpreter."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    result = subprocess.run([sys.executable, "-c", WORKER, str(module), str(target)],
                            capture_output=True, text=True, env=env, timeout=600, check=False)
    if result.returncode != 0:
        return {"error": f"exit {result.returncode}: {result.stderr.strip().splitlines()[-1:]}"}
    doc: dict[str, object] = json.loads(result.stdout.splitlines()[-1])
    return doc


def row(label: str, old: dict[str, object], new: dict[str, object]) -> None:
    def mb(doc: dict[str, object], key: str) -> float:
        return int(str(doc[key])) / 1024

    if "error" in old or "error" in new:
        print(f"{label}: baseline {old.get('error', 'ok')}, current {new.get('error', 'ok')}")
        return
    old_peak, new_peak = mb(old, "peak_kb"), mb(new, "peak_kb")
    old_grow = old_peak - mb(old, "before_kb")
    new_grow = new_peak - mb(new, "before_kb")
    print(f"{label:<40} {old_peak:>9.0f} MB {new_peak:>9.0f} MB {old_peak / new_peak:>7.1f}x")
    print(f"{'  growth over torch imported':<40} {old_grow:>9.0f} MB {new_grow:>9.0f} MB "
          f"{old_grow / max(new_grow, 1.0):>7.0f}x (growth floored at 1 MB)")
    print(f"{'  verdict':<40} baseline loaded={old['loaded']} {old['reason']!r}")
    print(f"{'':<40} current  loaded={new['loaded']} {new['reason']!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE)
    args = parser.parse_args()
    from tests.test_loadcheck_content import write_sparse_metrics, write_zip_bomb

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        old = root / "loadcheck_baseline.py"
        old.write_bytes(subprocess.run(
            ["git", "show", f"{args.baseline}:cockpit/services/loadcheck.py"], cwd=REPO,
            capture_output=True, check=True).stdout)
        new = REPO / "cockpit" / "services" / "custody" / "loadcheck.py"
        bomb = write_zip_bomb(root / "best.pth")
        metrics = write_sparse_metrics(root / "cell" / "best_metrics.json")
        dense = write_dense_metrics(root / "dense" / "best_metrics.json", metrics.stat().st_size)
        print(f"baseline: {args.baseline[:12]} loadcheck.py; current: the working tree's")
        print(f"zip bomb: {bomb.stat().st_size} bytes on disk; metrics: {metrics.stat().st_size} bytes")
        print(f"{'peak RSS of one check':<40} {'baseline':>12} {'current':>12} {'ratio':>8}")
        for label, target in (("(a) zip-bomb best.pth", bomb),
                              ("(b) 200 MB best_metrics.json, sparse", metrics),
                              ("(c) the same, valid JSON (dense)", dense)):
            row(label, measure(old, target), measure(new, target))


if __name__ == "__main__":
    main()
