"""Peak memory of hostile remote input, the code before the bounds against this tree, in one run.

Each case runs in a fresh child process (peak RSS is per process) twice: once with the
baseline commit's module (`git show BASE:path` into a temp folder) and once with this tree's.

- `cat` of a stream that does not end soon (the roster read `cat QUEUE`), through
  LocalBox.run: 0.25 GiB of zeros by default (the baseline held ~10 GB for 1 GiB; the cap
  stops at 32 MiB).
- one squeue line `5_[0-3000000]` through parse_squeue (the baseline made an object per task).

    .venv/bin/python -m bench.input_bounds [--base a1e8212] [--gib 0.25]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ROSTER = """
import asyncio, json, resource, sys, time
from {module} import LocalBox
started = time.perf_counter()
try:
    result = asyncio.run(LocalBox().run(["head", "-c", str({size}), "/dev/zero"], 300))
    what = f"status {{result.status}}, {{len(result.stdout)}} bytes kept, " \\
           f"truncated={{getattr(result, 'truncated', '(no such field)') or 'no'}}"
except MemoryError:
    what = "MemoryError"
print(json.dumps({{"rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "s": time.perf_counter() - started, "what": what}}))
"""

SQUEUE = """
import json, resource, time
from {module} import parse_squeue
started = time.perf_counter()
tasks = parse_squeue("5_[0-3000000]|PENDING|Priority\\n", 5)
print(json.dumps({{"rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "s": time.perf_counter() - started, "what": f"{{len(tasks)}} tasks kept"}}))
"""


def baseline(base: str, path: str, folder: Path, name: str) -> str:
    """The baseline commit's `path` as module `name` in `folder`."""
    text = subprocess.run(["git", "show", f"{base}:{path}"], cwd=ROOT, check=True,
                          capture_output=True, text=True).stdout
    (folder / f"{name}.py").write_text(text)
    return name


def child(code: str, extra_path: Path) -> dict[str, object]:
    """Run `code` in a fresh interpreter (this tree and `extra_path` importable)."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         env={"PYTHONPATH": f"{extra_path}:{ROOT}", "PATH": "/usr/bin:/bin"},
                         timeout=600)
    if out.returncode != 0:
        return {"rss": 0, "s": 0.0, "what": f"failed: {out.stderr.strip().splitlines()[-1:]}"}
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="a1e8212", help="the commit before the bounds")
    parser.add_argument("--gib", type=float, default=0.25,
                        help="GiB the stream command prints (the baseline holds ~10x this)")
    args = parser.parse_args()
    size = int(args.gib * (1 << 30))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        old_remote = baseline(args.base, "cockpit/services/transport/remote.py", folder, "old_remote")
        old_slurm = baseline(args.base, "cockpit/models/slurm.py", folder, "old_slurm")
        rows = [
            (f"cat of {args.gib:g} GiB (roster read), LocalBox.run",
             child(ROSTER.format(module=old_remote, size=size), folder),
             child(ROSTER.format(module="cockpit.services.transport.remote", size=size), folder)),
            ("squeue line 5_[0-3000000], parse_squeue",
             child(SQUEUE.format(module=old_slurm), folder),
             child(SQUEUE.format(module="cockpit.models.slurm"), folder)),
        ]
    print(f"{'case':<44} {'baseline RSS':>13} {'bounded RSS':>12} {'ratio':>7}   baseline / bounded")
    for name, before, after in rows:
        b, a = int(before["rss"]), int(after["rss"])  # type: ignore[call-overload]
        ratio = f"{b / a:.1f}x" if a else "-"
        print(f"{name:<44} {b / 2**20:>10.0f} MB {a / 2**20:>9.0f} MB {ratio:>7}   "
              f"{before['what']} in {before['s']:.2f} s / {after['what']} in {after['s']:.2f} s")


if __name__ == "__main__":
    main()
