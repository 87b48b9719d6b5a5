"""The probe runs under a short, recognisable name: its 14 KB script is not its argv.

`ps`/`htop` on a box used to show the whole probe script as one giant command line. Now the
command line is a one-line bootstrap that reads the script from stdin up to a sentinel and
evals it; the requests after the sentinel are the probe's protocol as before. Checked on the
real process table: locally (LocalProbe) and on a real sshd (SshProbe through a watcher).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

from cockpit.services.transport.fleet import LocalProbe
from cockpit.services.transport.probe import BOOT, PROBE_NAME, probe_argv, probe_stdin
from tests.sshd import Sshd
from tests.test_status_sshd import connected_watcher

MAX_CMDLINE = 400
"""A probe's whole command line must fit in a `ps` line of a wide terminal."""


def cmdlines(match: str) -> dict[int, str]:
    """pid -> command line (NULs as spaces) of this machine's processes whose line holds `match`."""
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        line = raw.replace(b"\0", b" ").decode(errors="replace").strip()
        if match in line:
            out[int(entry.name)] = line
    return out


def test_bootstrap_runs_the_script_from_stdin_and_leaves_the_requests() -> None:
    """The bootstrap reads exactly up to the sentinel: the request after it is answered."""
    request = b"tick 7\nend 7\n"
    proc = subprocess.run(probe_argv(with_gpu=False), executable="/bin/sh",
                          input=probe_stdin() + request, capture_output=True, timeout=60,
                          check=False)
    out = proc.stdout.decode()
    assert out.startswith("@@begin 7 "), out[:200]
    assert "@@end 7" in out
    assert "\n" not in BOOT and len(BOOT) < MAX_CMDLINE


async def test_local_probe_shows_a_short_name_in_ps() -> None:
    probe = await LocalProbe.start()
    try:
        record = await probe.exchange(3, b"tick 3\nend 3\n", timeout=30)
        assert b"@@end 3" in record
        mine = {pid: line for pid, line in cmdlines(PROBE_NAME).items()
                if pid == probe.proc.pid}
        (line,) = mine.values()
        assert line.startswith(f"{PROBE_NAME} -c ")
        assert len(line) < MAX_CMDLINE
        assert "budget_per_tick" not in line  # no line of the script is in argv
    finally:
        await probe.close()


@pytest.mark.sshd
async def test_remote_probe_shows_a_short_name_in_ps(sshd: Sshd, tmp_path: Path) -> None:
    """Through a real sshd: the box's process table holds `cockpit-probe -c …`, short."""
    _box, watcher = await connected_watcher(sshd, tmp_path)
    first = await watcher.tick()
    second = await watcher.tick()
    assert second.seq > first.seq
    probes = {pid: line for pid, line in cmdlines(PROBE_NAME).items()
              if pid != os.getpid() and "-c N=" in line}
    assert probes, "the remote probe should be running"
    for line in probes.values():
        assert len(line) < MAX_CMDLINE, line[:200]
        assert "budget_per_tick" not in line
    # bash is on this machine, so `exec -a` named the probe's shell.
    assert any(line.startswith(f"{PROBE_NAME} -c ") for line in probes.values()), probes
    await asyncio.wait_for(watcher.close(), 30)
