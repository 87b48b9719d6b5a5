"""Run an approved teardown step, and nothing else.

The only entry points take an `ApprovedPlan`, which only `Gate.approve` mints after the
user typed the instance name. For an irreversible step the remote manifest is recomputed
right before running; a difference re-locks the gate and nothing runs. The command is
executed without a shell (argv from the profile's template), its output is kept, and one
audit line is appended per executed (or refused) action. Manual steps (a platform without a
CLI) are recorded as "done by hand" only when the user confirms.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.models.gate import ApprovedPlan, Gate, GateError, fill_env
from cockpit.services.audit import append_audit

OUTPUT_TAIL = 4000
RUN_TIMEOUT = 600.0


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


def _record(gate: Gate, plan: ApprovedPlan, result: ExecResult | None, note: str = "") -> None:
    verification = gate.verification
    append_audit({
        "instance": gate.instance,
        "action": plan.step.action.id,
        "irreversible": plan.step.irreversible,
        "command": plan.step.command_text,
        "manifest_sha256": plan.manifest_digest,
        "verified": verification.summary if verification is not None else None,
        "excluded": [{"cell": v.cell, "reason": v.reason} for v in verification.excluded]
        if verification is not None else [],
        "typed": plan.typed,
        "exit_code": None if result is None else result.exit_code,
        "by_hand": None if result is None else result.by_hand,
        "output_tail": "" if result is None else result.output[-OUTPUT_TAIL:],
        "note": note,
    })


async def _fresh(gate: Gate, plan: ApprovedPlan,
                 fresh_digest: Callable[[], Awaitable[str]] | None) -> None:
    """Recompute the remote manifest for an irreversible step; re-lock on any difference."""
    if not plan.step.irreversible:
        return
    if fresh_digest is None:
        raise GateError("cannot recheck the remote manifest: the lock stays closed")
    try:
        digest = await fresh_digest()
    except Exception as exc:
        gate.cancel()
        _record(gate, plan, None, f"refused: the remote manifest could not be recomputed ({exc})")
        raise GateError(f"cannot recompute the remote manifest ({exc}): the lock stays closed") from exc
    try:
        gate.check_fresh(digest)
    except GateError:
        _record(gate, plan, None, "refused: the remote changed after verification (re-locked)")
        raise


async def execute(
    gate: Gate,
    plan: ApprovedPlan,
    *,
    fresh_digest: Callable[[], Awaitable[str]] | None,
    cli_path: Sequence[Path] = (),
    on_output: Callable[[str], None] | None = None,
    timeout: float = RUN_TIMEOUT,
) -> ExecResult:
    """Run an approved command step (argv, no shell) and record it."""
    if plan.step.argv is None:
        raise GateError("this action has no command: it is done by hand (confirm_by_hand)")
    argv = fill_env(plan.step, os.environ)  # before the gate moves: a missing key is not a run
    await _fresh(gate, plan, fresh_digest)
    gate.start(plan)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([*(str(p) for p in cli_path), env.get("PATH", "")])
    chunks: list[str] = []
    code: int | None
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL, env=env)
    except OSError as exc:
        result = ExecResult(None, f"could not start {plan.step.argv[0]!r}: {exc.strerror or exc}")
        gate.finish(plan, False, result.output)
        _record(gate, plan, result)
        return result
    assert proc.stdout is not None
    try:
        async with asyncio.timeout(timeout):
            while line := await proc.stdout.readline():
                text = line.decode(errors="replace")
                chunks.append(text)
                if on_output is not None:
                    on_output(text)
            code = await proc.wait()
    except TimeoutError:
        proc.kill()
        await proc.wait()
        chunks.append(f"\n[killed after {timeout:.0f} s without finishing]\n")
        code = None
    result = ExecResult(code, "".join(chunks))
    gate.finish(plan, result.ok, f"exit={code}")
    _record(gate, plan, result)
    return result


async def confirm_by_hand(
    gate: Gate,
    plan: ApprovedPlan,
    *,
    done: bool,
    fresh_digest: Callable[[], Awaitable[str]] | None,
) -> ExecResult:
    """The user did (or did not) carry out the manual steps in the platform's console."""
    if plan.step.argv is not None:
        raise GateError("this action has a command: run it with execute()")
    await _fresh(gate, plan, fresh_digest)
    gate.start(plan)
    result = ExecResult(0 if done else 1, "done by hand" if done else "not done", by_hand=True)
    gate.finish(plan, done, result.output)
    _record(gate, plan, result)
    return result
