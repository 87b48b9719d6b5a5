"""Launch, resume and stop a queue on a box: never twice, never over a file in use.

- Our runners (`cockpit/data/run_queue.sh`, `run_one.sh`) are deployed under names that carry
  their content hash (`run_queue.3f2a9c1e.sh`): a new version is a new file, so a running bash,
  which reads its script by byte offset (U2), is never pulled out from under itself. A file
  already under a versioned name with other content is refused, never overwritten.
- The queue file is uploaded only when no process of that queue is reading it.
- The queue starts detached: a tmux session named `<sweep>-<instance>`, or `nohup ... </dev/null`
  where tmux is missing. It is confirmed alive (a process running the queue file, and the
  master log's first line) within 60 s, or the launch reports what it saw.
- Resume starts at the first unfinished cell (`start_index`) after confirming that nothing of
  that queue still runs. Stop kills the exact tmux session or the verified PIDs, never a
  pattern (`pkill -f run_queue.sh` can kill the tmux server itself).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cockpit.models.parse import parse_record
from cockpit.models.queue import QueueLog, build_view, parse_queue_file
from cockpit.models.snapshot import NA, HostSnapshot
from cockpit.models.sweep import Instance
from cockpit.services.probe import probe_script
from cockpit.services.remote import Box

DATA = Path(__file__).resolve().parent.parent / "data"
ALIVE_TIMEOUT = 60.0
SESSION_SAFE = re.compile(r"[^A-Za-z0-9_-]")


class LaunchRefused(Exception):
    """Launching, resuming or stopping would be unsafe; the message says why."""


@dataclass(frozen=True)
class LaunchResult:
    """A started queue: how, where, and the evidence that it runs."""

    session: str | None
    """The tmux session, or None for the nohup fallback."""
    pids: tuple[int, ...]
    start_index: int
    first_line: str
    runner: str
    seconds_to_alive: float


def session_name(sweep: str, instance: str) -> str:
    """`<sweep>-<instance>`, with anything tmux would misread replaced."""
    return SESSION_SAFE.sub("_", f"{sweep}-{instance}")


def versioned(name: str) -> tuple[str, bytes]:
    """`run_queue.<sha8>.sh` and its bytes."""
    data = (DATA / name).read_bytes()
    stem, _, suffix = name.rpartition(".")
    return f"{stem}.{hashlib.sha256(data).hexdigest()[:8]}.{suffix}", data


async def snapshot(box: Box, instance: Instance) -> HostSnapshot:
    """One probe record about the queue (processes, queue file, master log marks)."""
    items = ["tick 1"]
    if instance.queue:
        items += [f"text {instance.queue}", f"proc {instance.queue}"]
    if instance.queue_log:
        items += [f"stat queue_log {instance.queue_log}", f"marks {instance.queue_log}"]
    items.append("end 1")
    argv = ["/bin/sh", "-c", f"printf '%s\\n' {' '.join(shlex.quote(i) for i in items)} | "
            f"/bin/sh -c {shlex.quote(probe_script())} cockpit-probe 0"]
    result = await box.run(argv, 60)
    if result.status != 0:
        raise LaunchRefused(f"cannot read the queue's state: {result.stderr.decode(errors='replace')[-200:]}")
    return parse_record(result.stdout, instance=instance.name, observed_at=time.time())


def queue_pids(snap: HostSnapshot) -> tuple[int, ...]:
    """PIDs of processes running this queue file; refuses when that cannot be checked."""
    pids = snap.queue.process_pids
    if isinstance(pids, NA):
        raise LaunchRefused(f"cannot check whether the queue runs ({pids.reason}): refusing")
    return pids


def start_index(snap: HostSnapshot) -> int:
    """The first cell that has not finished, from the queue file and the master log."""
    lines = parse_queue_file(snap.queue.queue_text or "")
    log = QueueLog()
    if snap.queue.queue_marks:
        log.feed(snap.queue.queue_marks.splitlines(), snap.utc_offset)
    view = build_view(lines, log, {}, alive=False, now=time.time())
    if view.start_index is None:
        raise LaunchRefused("every cell has finished: nothing to resume")
    return view.start_index


async def read_if_present(box: Box, path: str) -> bytes | None:
    """The bytes of a regular file on the box, or None when there is none."""
    result = await box.run(["/bin/sh", "-c", 'test -f "$1" && cat -- "$1"', "x", path], 60)
    return result.stdout if result.status == 0 else None


async def deploy(box: Box, folder: str) -> tuple[str, str]:
    """Our two runners in `folder/.cockpit/`, by content hash; returns their paths."""
    target = f"{folder.rstrip('/')}/.cockpit"
    await box.run(["mkdir", "-p", "--", target], 60)
    paths = []
    for name in ("run_queue.sh", "run_one.sh"):
        file_name, data = versioned(name)
        path = f"{target}/{file_name}"
        await write_versioned(box, path, data)
        paths.append(path)
    return paths[0], paths[1]


async def write_versioned(box: Box, path: str, data: bytes) -> None:
    """Write a file whose name carries its content hash, unless it is already there; another
    file under that name (edited by hand?) is refused, never overwritten."""
    present = await read_if_present(box, path)
    if present is None:
        await box.write(path, data, 0o755)
    elif present != data:
        raise LaunchRefused(f"{path} exists with other content (edited by hand?): a versioned "
                            f"runner is never overwritten; move it away first")


def workdir(instance: Instance) -> str:
    """Where the queue runs: `launch.workdir`, else the queue file's folder."""
    assert instance.launch is not None and instance.queue
    return instance.launch.workdir or str(PurePosixPath(instance.queue).parent)


def runner_env(instance: Instance) -> dict[str, str]:
    """What run_one.sh needs (the cell command, logs, checkpoints, durable root) plus the
    sweep's `launch.env`, for a tmux/nohup queue and a Slurm array job alike."""
    assert instance.launch is not None
    folder = workdir(instance)
    return {"COCKPIT_COMMAND": instance.launch.command,
            "COCKPIT_LOGS": instance.run_logs or f"{folder}/logs",
            "COCKPIT_CKPT": instance.checkpoints or f"{folder}/checkpoints",
            "COCKPIT_DURABLE": instance.durable_root or "", **instance.launch.env}


async def _start(box: Box, instance: Instance, sweep: str, runner: str, one: str, start: int,
                 has_tmux: bool) -> str | None:
    assert instance.queue and instance.launch
    env = {"RUN_ONE": one, **runner_env(instance)}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    log = shlex.quote(instance.queue_log) if instance.queue_log else "/dev/null"
    run = (f"cd {shlex.quote(workdir(instance))} && {exports} bash {shlex.quote(runner)} "
           f"{shlex.quote(instance.queue)} {start} 2>&1 | tee -a {log}")
    if has_tmux:
        session = session_name(sweep, instance.name)
        result = await box.run(["tmux", "new-session", "-d", "-s", session, run], 60)
        if result.status != 0:
            raise LaunchRefused(f"tmux new-session failed: {result.stderr.decode(errors='replace')[-200:]}")
        return session
    await box.run(["/bin/sh", "-c", f"nohup /bin/sh -c {shlex.quote(run)} </dev/null >/dev/null 2>&1 &"], 60)
    return None


async def _confirm(box: Box, instance: Instance, before: int, timeout: float) -> tuple[tuple[int, ...], str]:
    deadline = time.monotonic() + timeout
    while True:
        snap = await snapshot(box, instance)
        pids = queue_pids(snap)
        size = snap.queue.queue_log.size if snap.queue.queue_log else NA("no log")
        grew = not isinstance(size, NA) and size > before
        if pids and grew:
            marks = (snap.queue.queue_marks or "").splitlines()
            return pids, marks[-1] if marks else "(log started)"
        if time.monotonic() > deadline:
            raise LaunchRefused(f"not alive after {timeout:.0f} s (processes: {list(pids)}, log "
                                f"grew: {grew}): look at the tmux session or the master log")
        await asyncio.sleep(1.0)


async def launch(box: Box, instance: Instance, sweep: str, *, queue_text: str | None = None,
                 start: int | None = None, timeout: float = ALIVE_TIMEOUT) -> LaunchResult:
    """Deploy, upload the queue file (if given), start detached, confirm alive."""
    if instance.launch is None or not instance.queue:
        raise LaunchRefused(f"{instance.name}: the sweep needs `queue` and `launch.command` to launch")
    began = time.monotonic()
    snap = await snapshot(box, instance)
    running = queue_pids(snap)
    if running:
        raise LaunchRefused(f"{instance.name}: the queue {instance.queue} already runs (pid "
                            f"{', '.join(map(str, running))}): never launched twice")
    if queue_text is not None and snap.queue.queue_text != queue_text:
        await box.write(instance.queue, queue_text.encode())
    if start is None:
        start = 1
    runner, one = await deploy(box, workdir(instance))
    has_tmux = (await box.run(["/bin/sh", "-c", "command -v tmux"], 30)).status == 0
    log_stat = snap.queue.queue_log
    before = 0 if log_stat is None or isinstance(log_stat.size, NA) else log_stat.size
    session = await _start(box, instance, sweep, runner, one, start, has_tmux)
    pids, first = await _confirm(box, instance, before, timeout)
    return LaunchResult(session, pids, start, first, runner, time.monotonic() - began)


async def resume(box: Box, instance: Instance, sweep: str, *, timeout: float = ALIVE_TIMEOUT) -> LaunchResult:
    """Start again at the first unfinished cell, after confirming nothing of the queue runs."""
    snap = await snapshot(box, instance)
    running = queue_pids(snap)
    if running:
        raise LaunchRefused(f"{instance.name}: the queue still runs (pid "
                            f"{', '.join(map(str, running))}): stop it before resuming")
    return await launch(box, instance, sweep, start=start_index(snap), timeout=timeout)


async def stop(box: Box, instance: Instance, sweep: str) -> str:
    """Kill the exact tmux session, or else the verified PIDs of this queue (SIGTERM)."""
    session = session_name(sweep, instance.name)
    has = await box.run(["tmux", "has-session", "-t", f"={session}"], 30)
    if has.status == 0:
        await box.run(["tmux", "kill-session", "-t", f"={session}"], 30)
        return f"killed tmux session {session}"
    snap = await snapshot(box, instance)
    pids = queue_pids(snap)
    if not pids:
        return "nothing of this queue runs"
    # Started by hand in a tmux session of its own: that exact session, found through the
    # pane above the runner (killing only the runner would orphan the training under it).
    from cockpit.services.discover import DISCOVER_SCRIPT, ancestors, parse

    seen = await box.run(["/bin/sh", "-c", DISCOVER_SCRIPT], 60)
    procs, panes = parse(seen.stdout.decode(errors="replace"))
    sessions = sorted({panes[a] for pid in pids for a in ancestors(pid, procs) if a in panes})
    if sessions:
        for name in sessions:
            await box.run(["tmux", "kill-session", "-t", f"={name}"], 30)
        return f"killed tmux session {', '.join(sessions)} (the one running this queue)"
    # nohup: the verified runner PIDs and their descendants (its cells and their trainings),
    # listed one by one: never a pattern, never a whole process group we did not verify.
    tree = sorted({*pids, *(p for p in procs if set(ancestors(p, procs)) & set(pids))})
    await box.run(["kill", "-TERM", "--", *(str(p) for p in tree)], 30)
    return f"sent SIGTERM to pid {', '.join(map(str, tree))} (the queue and its children)"
