"""Run an approved teardown step, and nothing else.

The only entry points take an `ApprovedPlan`, which only `Gate.approve` mints after the
user typed the instance name. Right before running, the remote state is recomputed
(`fresh_state`): a change re-locks the gate and nothing runs. The command is executed
without a shell (argv from the profile's template); a secret reaches it only through its
environment. Its output is read in bounded chunks, whatever it prints (a platform CLI may
print one 100 MB line); the child is always reaped, and exactly one audit line is appended
per executed or refused action — in a `finally`, so no exception can leave an executed
action unrecorded. Manual steps (a platform without a CLI) are recorded as "done by hand"
only when the user confirms.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.models.custody import Manifest
from cockpit.models.gate import ApprovedPlan, Basis, Gate, GateError, child_env
from cockpit.services.custody.audit import append_audit

OUTPUT_TAIL = 4000
"""Characters of the command's output kept in the audit line (the end says how it ended)."""
READ_CHUNK = 64 << 10
"""Bytes read from the child at a time: never a whole line, which has no length limit."""
KEEP_OUTPUT = 256 << 10
"""Bytes of output kept in memory for the screen; older output is dropped (and said so)."""
RUN_TIMEOUT = 600.0

FreshState = Callable[[], Awaitable[Manifest]]
"""Recomputes the remote manifest (with each cell's queue-log evidence) right now."""


@dataclass(frozen=True)
class ExecResult:
    """How an executed step ended."""

    exit_code: int | None
    output: str
    by_hand: bool = False

    @property
    def ok(self) -> bool:
        """Exit 0, or confirmed done by hand."""
        return self.exit_code == 0


def record(gate: Gate, event: str, *, plan: ApprovedPlan | None = None, action: str = "",
           result: ExecResult | None = None, note: str = "", typed: str | None = None) -> None:
    """One audit line about this gate: what, on what evidence, and how it ended."""
    latest = gate.latest
    step = plan.step if plan is not None else None
    append_audit({
        "event": event,
        "instance": gate.instance,
        "action": step.action.id if step is not None else action,
        "irreversible": step.irreversible if step is not None else None,
        "needs": step.need.value if step is not None else None,
        "basis": plan.basis.value if plan is not None else None,
        "command": step.command_text if step is not None else None,
        "manifest_sha256": plan.manifest_digest if plan is not None else None,
        "gate": gate.state.value,
        "verified": latest.summary if latest is not None else None,
        "excluded": [{"cell": v.cell, "reason": v.reason} for v in latest.excluded]
        if latest is not None else [],
        "typed": plan.typed if plan is not None else typed,
        "exit_code": None if result is None else result.exit_code,
        "by_hand": None if result is None else result.by_hand,
        "output_tail": "" if result is None else result.output[-OUTPUT_TAIL:],
        "note": note,
    })


async def _fresh(gate: Gate, plan: ApprovedPlan, fresh_state: FreshState | None) -> None:
    """Recompute the remote state for an approval that rests on evidence; re-lock on change."""
    if plan.basis is Basis.NAME:
        return
    if fresh_state is None:
        gate.cancel()
        record(gate, "refused", plan=plan, note="refused: cannot recheck the remote state")
        raise GateError("cannot recheck the remote state: the lock stays closed")
    try:
        current = await fresh_state()
    except Exception as exc:
        gate.cancel()
        record(gate, "refused", plan=plan,
               note=f"refused: the remote state could not be recomputed ({exc})")
        raise GateError(f"cannot recompute the remote state ({exc}): the lock stays closed") from exc
    try:
        gate.check_fresh(plan, current)
    except GateError as exc:
        record(gate, "refused", plan=plan, note=f"refused: {exc} (re-locked)")
        raise


class _Tail:
    """The last KEEP_OUTPUT bytes of a stream, decoded at the end."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > KEEP_OUTPUT:
            cut = len(self.data) - KEEP_OUTPUT
            del self.data[:cut]
            self.dropped += cut

    def text(self) -> str:
        head = f"[… {self.dropped} earlier bytes not kept …]\n" if self.dropped else ""
        return head + self.data.decode("utf-8", errors="replace")


async def _pump(stream: asyncio.StreamReader, tail: _Tail,
                on_output: Callable[[str], None] | None) -> None:
    while chunk := await stream.read(READ_CHUNK):
        tail.add(chunk)
        if on_output is not None:
            on_output(chunk.decode("utf-8", errors="replace"))


async def execute(
    gate: Gate,
    plan: ApprovedPlan,
    *,
    fresh_state: FreshState | None,
    cli_path: Sequence[Path] = (),
    on_output: Callable[[str], None] | None = None,
    timeout: float = RUN_TIMEOUT,
) -> ExecResult:
    """Run an approved command step (argv, no shell) and record it."""
    if plan.step.argv is None:
        raise GateError("this action has no command: it is done by hand (confirm_by_hand)")
    env = child_env(plan.step, os.environ)  # before the gate moves: a missing key is not a run
    await _fresh(gate, plan, fresh_state)
    gate.start(plan)
    env["PATH"] = os.pathsep.join([*(str(p) for p in cli_path), env.get("PATH", "")])
    tail = _Tail()
    result = ExecResult(None, "not started")
    proc: asyncio.subprocess.Process | None = None
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *plan.step.argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                stdin=asyncio.subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as exc:
            result = ExecResult(None, f"could not start {plan.step.argv[0]!r}: {exc.strerror or exc}")
            return result
        assert proc.stdout is not None
        try:
            async with asyncio.timeout(timeout):
                await _pump(proc.stdout, tail, on_output)
                code: int | None = await proc.wait()
        except TimeoutError:
            tail.add(f"\n[killed after {timeout:.0f} s without finishing]\n".encode())
            code = None
        result = ExecResult(code, tail.text())
        return result
    except BaseException as exc:  # cancelled, or anything else: still recorded below
        result = ExecResult(None, tail.text() + f"\n[interrupted: {type(exc).__name__}]\n")
        raise
    finally:
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # its own session: the CLI and its children
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())  # always reaped, even when cancelled
        with contextlib.suppress(GateError):
            gate.finish(plan, result.ok, f"exit={result.exit_code}")
        record(gate, "executed", plan=plan, result=result)


async def confirm_by_hand(
    gate: Gate,
    plan: ApprovedPlan,
    *,
    done: bool,
    fresh_state: FreshState | None,
) -> ExecResult:
    """The user did (or did not) carry out the manual steps in the platform's console."""
    if plan.step.argv is not None:
        raise GateError("this action has a command: run it with execute()")
    await _fresh(gate, plan, fresh_state)
    gate.start(plan)
    result = ExecResult(0 if done else 1, "done by hand" if done else "not done", by_hand=True)
    gate.finish(plan, done, result.output)
    record(gate, "executed", plan=plan, result=result)
    return result
