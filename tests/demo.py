"""Start the demo fleet for tests (a real `cockpit demo --serve` process)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cockpit.demo.server import READY

DEMO_TIMEOUT = 60


def start_demo(root: Path) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "cockpit", "demo", "--serve", str(root)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + DEMO_TIMEOUT
    while not (root / READY).exists():
        if proc.poll() is not None:
            raise AssertionError(f"demo exited early: {proc.stdout.read() if proc.stdout else ''!r}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("demo fleet did not come up")
        time.sleep(0.1)
    return proc


def marked_processes(root: Path) -> list[int]:
    """PIDs whose environment says they belong to a box under `root`."""
    needle = f"COCKPIT_BOX={root.resolve()}/".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("demo")
    proc = start_demo(root)
    try:
        yield root
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


