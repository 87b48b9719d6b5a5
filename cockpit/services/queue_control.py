"""Launch, resume or stop one instance's queue, whichever way it runs (tmux/nohup or Slurm).

One entry point for the CLI and the TUI: it picks the detach primitive from the profile,
refuses what the services refuse (`LaunchRefused`), and says what happened in one line.
"""

from __future__ import annotations

from cockpit.models.profile import Profile
from cockpit.models.sweep import Instance
from cockpit.services import launch, slurm
from cockpit.services.remote import Box


async def control(box: Box, instance: Instance, profile: Profile, sweep: str, verb: str, *,
                  queue_text: str | None = None) -> str:
    """`launch`, `resume` or `stop`; `queue_text` (launch only) is uploaded first."""
    if profile.detach.primitive == "sbatch":
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
    if verb == "resume":
        result = await launch.resume(box, instance, sweep)
    else:
        result = await launch.launch(box, instance, sweep, queue_text=queue_text)
    where = f"tmux session {result.session}" if result.session else "nohup (no tmux)"
    return (f"alive in {result.seconds_to_alive:.1f} s from cell {result.start_index} in {where}, "
            f"pid {', '.join(map(str, result.pids))}\n{result.first_line}")
