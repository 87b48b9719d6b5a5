"""Start the demo fleet for tests (a real `cockpit demo --serve` process)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from cockpit.demo.server import start_serving

DEMO_TIMEOUT = 60


def start_demo(root: Path) -> subprocess.Popen[bytes]:
    """The demo fleet serving from `root` (the product's own spawn-and-wait-for-READY)."""
    return start_serving(root, subprocess.PIPE, timeout=DEMO_TIMEOUT)


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


@contextmanager
def demo_fleet(root: Path) -> Iterator[Path]:
    """The demo fleet serving from `root` for the `with` block, then stopped (SIGTERM)."""
    proc = start_demo(root)
    try:
        yield root
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)


@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with demo_fleet(tmp_path_factory.mktemp("demo")) as root:
        yield root


@pytest.fixture
def fresh_demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fleet of the test's own, started now (about 4 s). For a test that needs a cell still
    running when it gets there: late in a loaded run, the session's shared fleet has finished
    its long cells (a1's aug_strong ~900 s, r1's seg_small ~800 s)."""
    with demo_fleet(tmp_path_factory.mktemp("fresh-demo")) as root:
        yield root
