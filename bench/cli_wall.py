"""Benchmark: wall time of `cockpit --help` and of `cockpit status` on the demo fleet.

Run: .venv/bin/python -m bench.cli_wall   (starts its own demo fleet; prints medians)
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.demo import start_demo


def wall(cmd: list[str], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, capture_output=True, check=False)
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    py = [sys.executable, "-m", "cockpit"]
    bare = wall([sys.executable, "-c", "pass"], 7)
    helps = wall([*py, "--help"], 7)
    with tempfile.TemporaryDirectory(prefix="cockpit-bench-") as tmp:
        root = Path(tmp)
        proc = start_demo(root)
        try:
            status = wall([*py, "status", str(root / "sweep.yaml"), "--json"], 5)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    print(f"python startup alone     median {statistics.median(bare) * 1000:7.0f} ms")
    print(f"cockpit --help           median {statistics.median(helps) * 1000:7.0f} ms  (goal < 500 ms)")
    print(f"cockpit status (3 boxes) median {statistics.median(status) * 1000:7.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
