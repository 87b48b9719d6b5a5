"""Slurm instances: the queue as one `sbatch` array job, its state from `squeue` and
`sacct` (or `scontrol` where accounting is off), and `scancel` of the sweep's own jobs only.

Array task i runs queue cell i with the cockpit's `run_one.sh`, so per-run logs, checkpoints
and the durable copies follow the same contract as everywhere else. The job ids this
cockpit submitted are recorded in its state folder; `cancel` touches those and nothing else.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shlex
from pathlib import Path

from cockpit.models.queue import parse_queue_file
from cockpit.models.slurm import (
    TaskState,
    merge,
    parse_sacct,
    parse_scontrol,
    parse_squeue,
    small_int,
)
from cockpit.models.sweep import Instance
from cockpit.services.config.paths import state_dir
from cockpit.services.queue.launch import (
    LaunchRefused,
    deploy,
    read_if_present,
    runner_env,
    session_name,
    workdir,
    write_versioned,
)
from cockpit.services.transport.remote import Box, CommandResult, OutputTooLarge


def jobs_file() -> Path:
    """Job ids submitted per sweep and instance."""
    return state_dir() / "slurm_jobs.json"


def recorded_jobs(sweep: str, instance: str) -> list[int]:
    """The job ids this cockpit submitted for `instance` of `sweep`."""
    try:
        doc = json.loads(jobs_file().read_text())
    except (OSError, json.JSONDecodeError):
        return []
    return [int(j) for j in doc.get(f"{sweep}/{instance}", [])]


def _record(sweep: str, instance: str, job: int) -> None:
    path = jobs_file()
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        doc = {}
    doc.setdefault(f"{sweep}/{instance}", []).append(job)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1))
    tmp.replace(path)


def _env_argv(instance: Instance, argv: list[str]) -> list[str]:
    env = instance.launch.env if instance.launch else {}
    return ["env", *(f"{k}={v}" for k, v in env.items()), *argv] if env else argv


def sbatch_script(instance: Instance, sweep: str, one: str, start: int, count: int) -> str:
    """The array job: task i runs queue cell i through run_one.sh."""
    assert instance.launch and instance.queue
    env = runner_env(instance)
    logs, folder = env["COCKPIT_LOGS"], workdir(instance)
    lines = ["#!/bin/bash", f"#SBATCH --job-name={session_name(sweep, instance.name)}",
             f"#SBATCH --array={start}-{count}", f"#SBATCH --output={logs}/slurm-%A_%a.out",
             f"#SBATCH --chdir={folder}", *(f"#SBATCH {arg}" for arg in instance.launch.sbatch_args),
             "set -u", *(f"export {k}={shlex.quote(v)}" for k, v in env.items()),
             f"QUEUE={shlex.quote(instance.queue)}",
             # The i-th cell line, counting cells only (comments and blank lines skipped).
             "LINE=$(grep -v -E '^[[:space:]]*(#|$)' \"$QUEUE\" | sed -n \"${SLURM_ARRAY_TASK_ID}p\")",
             'read -r CFG TASK EPOCHS _ <<< "$LINE"',
             f'exec bash {shlex.quote(one)} "$CFG" "${{TASK:-}}" "${{EPOCHS:-20}}"', ""]
    return "\n".join(lines)


async def ensure_idle(box: Box, instance: Instance, sweep: str) -> None:
    """Refuse while a job of this queue is queued or running (its tasks still read the queue)."""
    for job in recorded_jobs(sweep, instance.name):
        live = await states(box, instance, job)
        if any(t.state in ("PENDING", "RUNNING") for t in live.values()):
            raise LaunchRefused(f"{instance.name}: job {job} of this queue is still queued or "
                                f"running: never submitted twice")


async def submit(box: Box, instance: Instance, sweep: str, *, start: int = 1) -> int:
    """Deploy the runner, write the versioned sbatch script, submit, record the job id."""
    if instance.launch is None or not instance.queue:
        raise LaunchRefused(f"{instance.name}: the sweep needs `queue` and `launch.command`")
    await ensure_idle(box, instance, sweep)
    queue_text = await read_if_present(box, instance.queue)
    if queue_text is None:
        raise LaunchRefused(f"{instance.name}: no queue file {instance.queue} on the box")
    count = len(parse_queue_file(queue_text.decode("utf-8", errors="replace")))
    if count < start:
        raise LaunchRefused(f"{instance.name}: nothing to run from cell {start} of {count}")
    folder = workdir(instance)
    _, one = await deploy(box, folder)
    script = sbatch_script(instance, sweep, one, start, count)
    digest = hashlib.sha256(script.encode()).hexdigest()[:8]
    path = f"{folder.rstrip('/')}/.cockpit/sbatch.{digest}.sh"
    await write_versioned(box, path, script.encode())
    await box.run(["mkdir", "-p", "--", runner_env(instance)["COCKPIT_LOGS"]], 60)
    result = await box.run(_env_argv(instance, ["sbatch", "--parsable", path]), 120)
    text = result.stdout.decode(errors="replace").strip()
    job = small_int(text.split(";")[0])
    if result.status != 0 or job is None:
        detail = (result.stderr or result.stdout).decode(errors="replace")[-300:]
        raise LaunchRefused(f"sbatch failed: {detail}")
    _record(sweep, instance.name, job)
    return job


class ListingTooLarge(LaunchRefused, OutputTooLarge):
    """A Slurm listing passed the box's output cap, so the job's state cannot be read: a
    refusal to launch or resume, and an OutputTooLarge to any other caller (verification)."""


async def _listing(box: Box, instance: Instance, argv: list[str]) -> CommandResult:
    """One read-only Slurm command; ListingTooLarge when its output passed the cap (a prefix
    of a task listing would show every task it cut off as pending)."""
    result = await box.run(_env_argv(instance, argv), 60)
    try:
        return result.require_complete()
    except OutputTooLarge as exc:
        raise ListingTooLarge(f"{instance.name}: cannot read the job's state from {argv[0]}: "
                              f"{exc}") from None


async def states(box: Box, instance: Instance, job: int, cells: int | None = None) -> dict[int, TaskState]:
    """Every array task's state: squeue for live ones, sacct (or scontrol) for the rest.

    `cells` is the queue's length when known (tasks above it name no cell and are not read).
    The listings are parsed in a thread: a box can print megabytes of them, and the event
    loop of the TUI must not wait on that.
    """
    live = await _listing(box, instance, ["squeue", "-h", "-j", str(job), "-o", "%i|%T|%r"])
    acct = await _listing(box, instance, ["sacct", "-n", "-P", "-j", str(job),
                                          "--format=JobID,State,ExitCode,Elapsed"])
    finished: dict[int, TaskState] = {}
    if acct.status == 0:
        finished = await asyncio.to_thread(parse_sacct, acct.stdout.decode(errors="replace"), job,
                                           cells)
    if not finished:
        shown = await _listing(box, instance, ["scontrol", "-o", "show", "job", str(job)])
        finished = await asyncio.to_thread(parse_scontrol, shown.stdout.decode(errors="replace"),
                                           job, cells)
    pending = await asyncio.to_thread(parse_squeue, live.stdout.decode(errors="replace"), job, cells)
    return merge(pending, finished)


async def cancel(box: Box, instance: Instance, sweep: str) -> list[int]:
    """`scancel` of this instance's recorded jobs, and of nothing else."""
    jobs = recorded_jobs(sweep, instance.name)
    if jobs:
        await box.run(_env_argv(instance, ["scancel", *(str(j) for j in jobs)]), 60)
    return jobs


async def resume_start(box: Box, instance: Instance, sweep: str) -> int:
    """The first cell the last job did not finish with exit 0 (1 when no job is recorded)."""
    jobs = recorded_jobs(sweep, instance.name)
    if not jobs:
        return 1
    tasks = await states(box, instance, jobs[-1])
    if any(t.state in ("PENDING", "RUNNING") for t in tasks.values()):
        raise LaunchRefused(f"{instance.name}: job {jobs[-1]} is still queued or running")
    from cockpit.models.queue import CellState

    done = sorted(t for t, s in tasks.items() if s.cell_state is CellState.OK)
    start = 1
    while start in done:
        start += 1
    return start
