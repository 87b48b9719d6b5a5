"""Launch, resume or stop one instance's queue, whichever way it runs (tmux/nohup or Slurm).

One entry point for the CLI and the TUI: it picks the detach primitive from the profile,
refuses what the services refuse (`LaunchRefused`), and says what happened in one line.
"""

from __future__ import annotations

from cockpit.models.profile import Profile
from cockpit.models.sweep import Instance
from cockpit.services.queue import launch, slurm
from cockpit.services.transport.remote import Box


async def control(box: Box, instance: Instance, profile: Profile, sweep: str, verb: str, *,
                  queue_text: str | None = None, cells: list[str] | None = None) -> str:
    """`launch`, `resume`, `rerun` (of `cells`) or `stop`; `queue_text` (launch only) is
    uploaded first."""
    if profile.detach.primitive == "sbatch":
        if verb == "rerun":
            raise launch.LaunchRefused("rerun of single cells is not available for Slurm array "
                                       "jobs yet: resubmit the cells' tasks with sbatch --array")
        if verb == "stop":
            jobs = await slurm.cancel(box, instance, sweep)
            return f"scancel {' '.join(map(str, jobs))}" if jobs else "no job of this sweep recorded"
        start = await slurm.resume_start(box, instance, sweep) if verb == "resume" else 1
        if queue_text is not None and instance.queue:
            await slurm.ensure_idle(box, instance, sweep)  # pending tasks still read the queue file
            await box.write(instance.queue, queue_text.encode())
        job = await slurm.submit(box, instance, sweep, start=start)
        return f"submitted array job {job} from cell {start} (sbatch)"
    if verb == "stop":
        return await launch.stop(box, instance, sweep)
    rotated: list[str] = []
    queue = instance.queue
    if verb == "resume":
        result = await launch.resume(box, instance, sweep)
    elif verb == "rerun":
        result, queue, rotated = await launch.rerun(box, instance, sweep, cells or [])
    else:
        result = await launch.launch(box, instance, sweep, queue_text=queue_text)
    where = f"tmux session {result.session}" if result.session else "nohup (no tmux)"
    out = (f"alive in {result.seconds_to_alive:.1f} s from cell {result.start_index} in {where}, "
           f"pid {', '.join(map(str, result.pids))}\n{result.first_line}")
    if verb == "rerun":
        out = (f"re-running {', '.join(dict.fromkeys(cells or []))} from the new queue file {queue}"
               f"; old logs kept as {', '.join(rotated) or '(none existed)'}\n{out}")
    if result.note:
        out += f"\nnote: {result.note}"
    return out
