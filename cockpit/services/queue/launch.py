"""Launch, resume and stop a queue on a box: never twice, never over a file in use.

- Our runners (`cockpit/data/run_queue.sh`, `run_one.sh`) are deployed under names that carry
  their content hash (`run_queue.3f2a9c1e.sh`): a new version is a new file, so a running bash,
  which reads its script by byte offset (U2), is never pulled out from under itself. A file
  already under a versioned name with other content is refused, never overwritten.
- The queue file is uploaded only when no process of that queue is reading it.
- The queue starts detached: a tmux session named `<sweep>-<instance>`, or `nohup ... </dev/null`
  where tmux is missing. It is confirmed alive (a process running the queue file, and the
  master log's first line) within 60 s, or the launch reports what it saw.
- Resume starts after the last cell with proof of success (FINISHED exit=0, or "finished
  earlier" before a truncating resume's `starting from N`), after confirming that nothing of
  that queue still runs: a proven cell is never run again. Cells without proof that a resume
  cannot reach are named, for `rerun`.
- Rerun runs only the named cells, as a new queue file beside the original
  (`queue.rerun-K.txt`, never overwritten), after renaming their old per-run logs
  (`NAME.log.before-rerun-K`, never overwritten or deleted); it is launched like `launch`.
- A queue started by hand with the runbook's own `run_queue.sh` (no `launch:`, a `runner:`
  written by `cockpit discover`) is run again the same way: its own script, shell, working
  directory and PROFILE BLOCK environment, appending to the master log, in its tmux session
  (`| tee -a` or `>>LOG 2>&1`, as it was) or under `nohup ... </dev/null >>LOG 2>&1 &`
  (`hand_command`). Nothing of ours is deployed for it.
- The tmux session is the sweep's `tmux_session`, else `<sweep>-<instance>`. Stop kills that
  exact session or the verified PIDs, never a pattern (`pkill -f run_queue.sh` can kill the
  tmux server itself).
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import re
import shlex
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cockpit.models.parse import parse_record
from cockpit.models.queue import (
    CellState,
    CellView,
    QueueLog,
    QueueView,
    build_view,
    parse_queue_file,
)
from cockpit.models.snapshot import NA, HostSnapshot
from cockpit.models.sweep import RUNNER_ENV, Instance
from cockpit.services.transport.probe import probe_script
from cockpit.services.transport.remote import Box

DATA = Path(__file__).resolve().parents[2] / "data"
ALIVE_TIMEOUT = 60.0
SESSION_SAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_RERUNS = 999
"""Rerun queue files of one queue (`queue.rerun-K.txt`, K up to this): a version number past
it is refused rather than a file overwritten; a real sweep reruns a handful of times."""
RERUN_DIGITS = 3
"""Digits of K read from a rerun file's name (matches `MAX_RERUNS`)."""


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
    note: str = ""
    """What the caller should know (cells a resume could not reach, for `rerun`)."""


def session_name(sweep: str, instance: str) -> str:
    """`<sweep>-<instance>`, with anything tmux would misread replaced."""
    return SESSION_SAFE.sub("_", f"{sweep}-{instance}")


def session_for(instance: Instance, sweep: str) -> str:
    """The tmux session launch creates and stop/resume look for: the sweep's `tmux_session`,
    else `<sweep>-<instance>`."""
    return instance.tmux_session or session_name(sweep, instance.name)


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


def queue_view(snap: HostSnapshot) -> QueueView:
    """The queue's cells and their states from the queue file and the whole master log."""
    lines = parse_queue_file(snap.queue.queue_text or "")
    log = QueueLog()
    if snap.queue.queue_marks:
        log.feed(snap.queue.queue_marks.splitlines(), snap.utc_offset)
    return build_view(lines, log, {}, alive=False, now=time.time())


def _names(cells: tuple[CellView, ...]) -> str:
    return ",".join(c.name for c in cells)


def start_index(snap: HostSnapshot) -> tuple[int, str]:
    """Where a resume starts (the cell after the last proven one) and a note naming the
    unproven cells it cannot reach; refuses, with the reason, when no cell is left."""
    view = queue_view(snap)
    if not view.cells:
        raise LaunchRefused("no cell known: the queue file could not be read")
    behind = view.unproven_before_resume
    hint = (f"; cells without proof of success before it: {_names(behind)} (re-run them with "
            f"`cockpit rerun --cells {_names(behind)}`)") if behind else ""
    start = view.resume_from
    if start is None:
        proven = [c for c in view.cells if c.proven]
        earlier = [c for c in proven if c.state is CellState.EARLIER]
        why = f"every cell after the last proven one has run: nothing to resume ({len(proven)}/" \
              f"{len(view.cells)} proven"
        if earlier:
            why += f"; {_names(tuple(earlier))}: {earlier[0].evidence}"
        raise LaunchRefused(why + ")" + hint)
    return start, hint.lstrip("; ")


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


def runner_paths(instance: Instance) -> tuple[str, str]:
    """Where `deploy` puts our two runners for this instance (their names carry their hash)."""
    target = f"{workdir(instance).rstrip('/')}/.cockpit"
    return f"{target}/{versioned('run_queue.sh')[0]}", f"{target}/{versioned('run_one.sh')[0]}"


def run_command(instance: Instance, start: int, *, runner: str | None = None,
                one: str | None = None, of: str | None = None) -> str:
    """The exact shell command a launch (and a resume at `start`) runs on the box: our
    deployed runner, its environment, and `| tee -a` of the master log (append: a resume
    never truncates the evidence of the cells before it). The resume hint shows this.

    `of`: for a rerun queue, the original queue file, passed as an extra argument that
    run_queue.sh ignores: the probe's process check of the original queue (an exact argv
    path) then finds the rerun's runner, so the panel, `status`, `resume` and `launch` all
    see the queue running while a rerun of it runs."""
    assert instance.queue and instance.launch
    default_runner, default_one = runner_paths(instance)
    env = {"RUN_ONE": one or default_one, **runner_env(instance)}
    exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    log = shlex.quote(instance.queue_log) if instance.queue_log else "/dev/null"
    return (f"cd {shlex.quote(workdir(instance))} && {exports} bash "
            f"{shlex.quote(runner or default_runner)} {shlex.quote(instance.queue)} {start}"
            f"{' ' + shlex.quote(of) if of else ''} 2>&1 | tee -a {log}")


PROFILE_NOTE = ("set the runbook's PROFILE BLOCK variables (PROJECT_REPO_DIR, DATA_DIR, DURABLE_DIR, "
                "PROXY_HOOK, CRED_FILE, PY; RUN_ONE or DURABLE_DIR for run_queue.sh) as at launch")
"""Said with a hand-started queue's resume command: the runner's environment is not read from
the box (the probe does not send /proc/PID/environ), so the hint cannot spell it out."""


def hand_command(instance: Instance, start: int, *, of: str | None = None) -> str:
    """The exact shell command that runs a hand-started runbook queue (`runner:`) from cell
    `start`, detached the way it was: `SHELL SCRIPT QUEUE START [OF]` in the runner's cwd
    with exactly its recorded environment (`env -u` for a RUNNER_ENV name it lacked), output
    appended to the master log; inside
    `tmux new-session -d -s TMUX_SESSION` when the sweep names one, else under
    `nohup ... </dev/null >>LOG 2>&1 &`. Every value is shell-quoted. `of`: see `run_command`
    (run_queue.sh ignores a third argument). The resume hint shows exactly this."""
    runner = instance.runner
    assert runner is not None and instance.queue and instance.queue_log
    q = shlex.quote
    # Exactly the runner's environment: a RUNNER_ENV name it did not have is unset (a login
    # shell's rc file or the tmux server's environment could otherwise supply one).
    unset = "".join(f"-u {k} " for k in RUNNER_ENV if k not in runner.env)
    env = (f"env {unset}" if unset else "") + "".join(f"{k}={q(v)} " for k, v in runner.env.items())
    run = (f"{runner.shell} {q(runner.script)} {q(instance.queue)} {start}"
           f"{' ' + q(of) if of else ''}")
    log = q(instance.queue_log)
    cd = f"cd {q(runner.cwd)} && "
    if instance.tmux_session:
        out = f"2>&1 | tee -a {log}" if runner.output == "tee" else f">>{log} 2>&1"
        return f"tmux new-session -d -s {q(instance.tmux_session)} {q(f'{cd}{env}{run} {out}')}"
    return f"{cd}{{ {env}nohup {run} </dev/null >>{log} 2>&1 & }}"


def resume_hint(instance: Instance, start: int) -> tuple[str, str]:
    """The command that resumes this queue at `start`, and a note on what it needs.

    A queue the cockpit launches (`launch:` in the sweep): exactly what `cockpit resume` runs.
    A hand-started queue: the runbook's command in the queue file's folder, appending to the
    master log (`| tee -a` in a tmux session, `>>LOG 2>&1` under nohup), with a note that its
    PROFILE BLOCK environment must be set as at launch."""
    if instance.launch is not None and instance.queue:
        return run_command(instance, start), "the command `cockpit resume` runs"
    if instance.runner is not None and instance.queue and instance.queue_log:
        return hand_command(instance, start), ("the command `cockpit resume` runs (the runbook's "
                                               "run_queue.sh with its discovered environment)")
    queue = instance.queue or "QUEUE"
    folder = str(PurePosixPath(queue).parent)
    cd = f"cd {shlex.quote(folder)} && "
    run = f"bash run_queue.sh {shlex.quote(queue)} {start}"
    if not instance.queue_log:
        return cd + run, PROFILE_NOTE
    log = shlex.quote(instance.queue_log)
    if instance.tmux_session:
        return f"{cd}{run} 2>&1 | tee -a {log}", PROFILE_NOTE + "; in tmux session " + \
            instance.tmux_session
    return f"{cd}nohup {run} </dev/null >>{log} 2>&1 &", PROFILE_NOTE


async def _start(box: Box, instance: Instance, sweep: str, runner: str, one: str, start: int,
                 has_tmux: bool, of: str | None = None) -> str | None:
    run = run_command(instance, start, runner=runner, one=one, of=of)
    if has_tmux:
        session = session_for(instance, sweep)
        result = await box.run(["tmux", "new-session", "-d", "-s", session, run], 60)
        if result.status != 0:
            raise LaunchRefused(f"tmux new-session failed: {result.stderr.decode(errors='replace')[-200:]}")
        return session
    await box.run(["/bin/sh", "-c", f"nohup /bin/sh -c {shlex.quote(run)} </dev/null >/dev/null 2>&1 &"], 60)
    return None


async def _start_hand(box: Box, instance: Instance, start: int, of: str | None) -> str | None:
    """Start a hand-started runbook queue again with `hand_command`; its tmux session (when the
    sweep names one) must not exist: it is never reused."""
    session = instance.tmux_session
    if session and (await box.run(["tmux", "has-session", "-t", f"={session}"], 30)).status == 0:
        raise LaunchRefused(f"tmux session {session} already exists: end it (or let its queue "
                            f"finish) first; it is never reused")
    result = await box.run(["/bin/sh", "-c", hand_command(instance, start, of=of)], 60)
    if result.status != 0:
        raise LaunchRefused(f"starting {instance.runner.script if instance.runner else '?'} "
                            f"failed: {result.stderr.decode(errors='replace')[-200:]}")
    return session


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
                 start: int | None = None, timeout: float = ALIVE_TIMEOUT,
                 of: str | None = None) -> LaunchResult:
    """Deploy, upload the queue file (if given), start detached, confirm alive. `of`: the
    original queue of a rerun queue (see `run_command`)."""
    if (instance.launch is None and instance.runner is None) or not instance.queue:
        raise LaunchRefused(f"{instance.name}: the sweep needs `queue` and `launch.command` (or a "
                            f"`runner:` from `cockpit discover`) to launch")
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
    log_stat = snap.queue.queue_log
    before = 0 if log_stat is None or isinstance(log_stat.size, NA) else log_stat.size
    if instance.launch is None:
        assert instance.runner is not None
        session = await _start_hand(box, instance, start, of)
        pids, first = await _confirm(box, instance, before, timeout)
        return LaunchResult(session, pids, start, first, instance.runner.script,
                            time.monotonic() - began)
    runner, one = await deploy(box, workdir(instance))
    has_tmux = (await box.run(["/bin/sh", "-c", "command -v tmux"], 30)).status == 0
    if has_tmux and (await box.run(["tmux", "has-session", "-t",
                                    f"={session_for(instance, sweep)}"], 30)).status == 0:
        raise LaunchRefused(f"tmux session {session_for(instance, sweep)} already exists: end it "
                            f"(or let its queue finish) first; it is never reused")
    session = await _start(box, instance, sweep, runner, one, start, has_tmux, of)
    pids, first = await _confirm(box, instance, before, timeout)
    return LaunchResult(session, pids, start, first, runner, time.monotonic() - began)


def rerun_name(queue: str, k: int) -> str:
    """`/x/queue_1.txt` -> `/x/queue_1.rerun-K.txt` (beside the original)."""
    path = PurePosixPath(queue)
    return str(path.with_name(f"{path.stem}.rerun-{k}{path.suffix}"))


async def rerun_queues(box: Box, instance: Instance) -> list[str]:
    """The rerun queue files beside this instance's queue, oldest version first."""
    assert instance.queue
    path = PurePosixPath(instance.queue)
    pattern = re.compile(rf"{re.escape(path.stem)}\.rerun-(\d{{1,{RERUN_DIGITS}}}){re.escape(path.suffix)}")
    listing = await box.run(["/bin/sh", "-c", 'for f in "$1"/*; do printf "%s\\n" "${f##*/}"; done',
                             "x", str(path.parent)], 60)
    found = sorted((int(m[1]), name) for name in listing.stdout.decode(errors="replace").splitlines()
                   if (m := pattern.fullmatch(name)) is not None)
    return [str(path.parent / name) for _, name in found]


async def live_queues(box: Box, instance: Instance) -> dict[str, tuple[int, ...]]:
    """Queue files of this instance (the original and its reruns) that a process runs, with
    their PIDs; refuses when that cannot be checked."""
    assert instance.queue
    live: dict[str, tuple[int, ...]] = {}
    for queue in [instance.queue, *await rerun_queues(box, instance)]:
        snap = await snapshot(box, instance.model_copy(update={"queue": queue}))
        if pids := queue_pids(snap):
            live[queue] = pids
    return live


def _refuse_running(instance: Instance, live: dict[str, tuple[int, ...]], what: str) -> None:
    if live:
        runs = "; ".join(f"{q} (pid {', '.join(map(str, p))})" for q, p in live.items())
        raise LaunchRefused(f"{instance.name}: the queue still runs: {runs}: stop it before {what}")


async def resume(box: Box, instance: Instance, sweep: str, *, timeout: float = ALIVE_TIMEOUT) -> LaunchResult:
    """Start again after the last proven cell, after confirming nothing of the queue (nor a
    rerun of it) runs; a proven cell is never run again."""
    if not instance.queue:
        raise LaunchRefused(f"{instance.name}: the sweep has no `queue`")
    _refuse_running(instance, await live_queues(box, instance), "resuming")
    snap = await snapshot(box, instance)
    start, note = start_index(snap)
    result = await launch(box, instance, sweep, start=start, timeout=timeout)
    return dataclasses.replace(result, note=note)


async def rotate_log(box: Box, log: str, suffix: str) -> str | None:
    """Rename a cell's old per-run log to `LOG.SUFFIX` so a re-run never writes over it;
    returns the new name, None when there was no log. A name already taken is refused: an old
    log is never overwritten or deleted."""
    moved = f"{log}.{suffix}"
    result = await box.run(["/bin/sh", "-c", 'test -e "$2" && exit 3; test -f "$1" || exit 4; '
                            'mv -n -- "$1" "$2" && test -e "$2" && test ! -e "$1"',
                            "x", log, moved], 60)
    if result.status == 4:
        return None
    if result.status != 0:
        raise LaunchRefused(f"cannot rotate {log} to {moved} (exit {result.status}: "
                            f"{'name taken' if result.status == 3 else 'mv failed'}): nothing re-run")
    return moved


async def rerun(box: Box, instance: Instance, sweep: str, cells: list[str], *,
                timeout: float = ALIVE_TIMEOUT) -> tuple[LaunchResult, str, list[str]]:
    """Run only `cells` again: a new queue file of their lines beside the original, their old
    logs rotated first, launched like `launch`. Returns the result, the new queue file and the
    rotated logs. Refuses unknown names, an empty list, and a queue (or rerun) that runs."""
    if (instance.launch is None and instance.runner is None) or not instance.queue:
        raise LaunchRefused(f"{instance.name}: the sweep needs `queue` and `launch.command` (or a "
                            f"`runner:` from `cockpit discover`) to re-run cells")
    if instance.launch is None and not instance.run_logs:
        raise LaunchRefused(f"{instance.name}: the sweep has no `run_logs`: the cells' old logs "
                            f"could not be kept (rotated) before a re-run; add it")
    if not cells:
        raise LaunchRefused("no cell named: --cells a,b")
    _refuse_running(instance, await live_queues(box, instance), "re-running cells")
    snap = await snapshot(box, instance)
    text = snap.queue.queue_text
    if text is None:
        raise LaunchRefused(f"cannot read the queue file {instance.queue}")
    lines = {ln.name: ln for ln in parse_queue_file(text)}
    unknown = [c for c in cells if c not in lines]
    if unknown:
        raise LaunchRefused(f"not cells of {instance.queue}: {', '.join(unknown)} (its cells: "
                            f"{', '.join(lines) or 'none'})")
    raw = text.splitlines()
    wanted = list(dict.fromkeys(cells))
    body = "".join(raw[lines[c].lineno - 1].strip() + "\n" for c in wanted)
    known = await rerun_queues(box, instance)
    k = 1 + max((int(m[1]) for q in known
                 if (m := re.search(r"\.rerun-(\d+)", PurePosixPath(q).name)) is not None),
                default=0)
    if k > MAX_RERUNS:
        raise LaunchRefused(f"{MAX_RERUNS} rerun files already beside {instance.queue}: move old ones away")
    path = rerun_name(instance.queue, k)
    if await read_if_present(box, path) is not None:
        raise LaunchRefused(f"{path} exists: a queue file is never overwritten")
    header = f"# cockpit rerun {k} of {PurePosixPath(instance.queue).name}: {', '.join(wanted)}\n"
    rotated: list[str] = []
    logs = instance.run_logs or f"{workdir(instance)}/logs"  # run_logs is set for a `runner`
    for name in wanted:
        moved = await rotate_log(box, f"{logs.rstrip('/')}/{name}.log", f"before-rerun-{k}")
        if moved is not None:
            rotated.append(moved)
    await box.write(path, (header + body).encode())
    result = await launch(box, instance.model_copy(update={"queue": path}), sweep, start=1,
                          timeout=timeout, of=instance.queue)
    return result, path, rotated


async def stop(box: Box, instance: Instance, sweep: str) -> str:
    """Kill the exact tmux session, or else the verified PIDs of this queue and its reruns
    (SIGTERM)."""
    session = session_for(instance, sweep)
    has = await box.run(["tmux", "has-session", "-t", f"={session}"], 30)
    if has.status == 0:
        await box.run(["tmux", "kill-session", "-t", f"={session}"], 30)
        return f"killed tmux session {session}"
    if not instance.queue:
        return "the sweep has no `queue`: nothing to look for"
    live = await live_queues(box, instance)
    pids = tuple(p for group in live.values() for p in group)
    if not pids:
        return "nothing of this queue runs"
    # Started by hand in a tmux session of its own: that exact session, found through the
    # pane above the runner (killing only the runner would orphan the training under it).
    from cockpit.services.queue.discover import DISCOVER_SCRIPT, ancestors, parse

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
