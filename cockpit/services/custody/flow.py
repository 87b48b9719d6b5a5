"""One instance's road from "cells finished" to "torn down", as the TUI drives it.

Holds the gate, the last verification report, the user's exclusions, pull progress and the
output of an executed action; runs verification, exclusion, the fresh-manifest check and
approved steps through the services. No Textual here: the screens only call these methods
from async workers and redraw from the state.

The gate starts locked in every session: an earlier PULL_VERIFIED.json is a receipt, not a
verification of what is on the box now (re-verifying pulled cells moves no bytes).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path

from cockpit.models.custody import EXCLUDABLE, FailureCause, Manifest
from cockpit.models.gate import ApprovedPlan, Gate, GateError, GateState, TeardownStep
from cockpit.models.profile import Profile
from cockpit.models.sweep import Instance
from cockpit.services.custody.audit import append_audit
from cockpit.services.custody.pull import PullProgress
from cockpit.services.custody.teardown import ExecResult, confirm_by_hand, execute, record
from cockpit.services.custody.verify import VerifyReport, remote_state, run_verification, write_marker
from cockpit.services.transport.remote import TRANSFER_ERRORS, Box
from cockpit.services.transport.ssh import HostKeyProblem

REACH_ERRORS = (*TRANSFER_ERRORS, HostKeyProblem)
"""What opening or losing the box's connection raises (anything else is a failed verification)."""

BoxFactory = Callable[[], Awaitable[tuple[Box, bool]]]
"""Returns a box and whether the caller must close it (False when it reuses the fleet's)."""


@dataclass
class Custody:
    """Verification and teardown state of one instance."""

    instance: Instance
    profile: Profile
    sweep: str
    dest: Path
    cli_path: tuple[Path, ...]
    box_factory: BoxFactory
    gate: Gate = field(init=False)
    report: VerifyReport | None = None
    excluded: dict[str, str] = field(default_factory=dict)
    progress: PullProgress | None = None
    stage: str = ""
    busy: bool = False
    output: list[str] = field(default_factory=list)
    version: int = 0
    """Bumped on every change, so screens redraw only when something moved."""

    def __post_init__(self) -> None:
        self.gate = Gate(self.instance.name)

    def changed(self) -> None:
        """Mark the state as changed."""
        self.version += 1

    async def _with_box(self, use: Callable[[Box], Awaitable[object]]) -> object:
        box, owned = await self.box_factory()
        try:
            return await use(box)
        finally:
            if owned:
                await box.close()

    async def verify(self, pool: Executor, causes: Mapping[str, FailureCause]) -> VerifyReport:
        """Roster, manifest, pull, hash and load; the gate follows the result."""
        self.busy = True
        self.progress = None
        self.changed()

        def on_stage(text: str) -> None:
            self.stage = text
            self.changed()

        def on_progress(progress: PullProgress) -> None:
            self.progress = progress
            self.changed()

        async def go(box: Box) -> VerifyReport:
            return await run_verification(box, self.instance, self.dest, self.sweep, pool,
                                          excluded=self.excluded, causes=causes,
                                          on_stage=on_stage, on_progress=on_progress)

        try:
            report = await self._with_box(go)
            assert isinstance(report, VerifyReport)
        except REACH_ERRORS as exc:  # a connection that cannot be opened or was lost: shown
            report = VerifyReport(self.instance.name, error=f"cannot reach the box: {exc}")
        except Exception as exc:  # anything else is a failed verification, named as such
            report = VerifyReport(self.instance.name,
                                  error=f"verification failed: {type(exc).__name__}: {exc}")
        finally:
            self.busy = False
        self.report = report
        if report.verification is not None and self.gate.state not in (
                GateState.APPROVED, GateState.EXECUTING, GateState.DONE):
            self.gate.verified(report.verification)
        self.stage = report.error or (report.verification.summary if report.verification else "")
        self.changed()
        return report

    def exclude(self, cell: str, typed: str, cause: str = "") -> None:
        """Remove a cell without a finished result (failed on the box, unproven, or running)
        from N, after the user typed its name. Audited either way."""
        report = self.report
        if report is None or report.verification is None:
            raise GateError("verify first")
        verdict = next((v for v in report.verification.verdicts if v.cell == cell), None)
        if verdict is None or verdict.status not in EXCLUDABLE:
            why = (f"only a cell without a finished result (failed on the box, unproven or "
                   f"running) can be excluded ({cell} is "
                   f"{verdict.status.value if verdict else 'unknown'})")
            append_audit({"event": "exclude refused", "instance": self.instance.name,
                          "cell": cell, "typed": typed, "note": why})
            raise GateError(why)
        if typed != cell:
            append_audit({"event": "exclude refused", "instance": self.instance.name,
                          "cell": cell, "typed": typed, "note": "mistyped cell name"})
            raise GateError(f"typed {typed!r}, not the cell name {cell!r}: not excluded")
        failure = cause or (verdict.cause.text if verdict.cause else "") or verdict.reason
        reason = f"excluded by the user: {verdict.status.value} ({failure})"
        append_audit({"event": "exclude", "instance": self.instance.name, "cell": cell,
                      "status": verdict.status.value, "failure": failure,
                      "rule": verdict.cause.rule if verdict.cause else None,
                      "class": verdict.cause.klass if verdict.cause else None, "typed": typed,
                      "manifest_sha256": report.verification.manifest_digest})
        self.excluded[cell] = reason
        report.verification = report.verification.excluding(cell, reason)
        report.marker = write_marker(self.dest, report.verification, self.sweep)
        self.gate.verified(report.verification)
        self.changed()

    async def fresh_state(self) -> Manifest:
        """The remote manifest of the same roster, with its queue-log evidence, recomputed now."""
        report = self.report
        if report is None or not report.expected or not self.instance.durable_root:
            raise GateError("nothing verified to compare with")
        expected = report.expected

        async def go(box: Box) -> Manifest:
            return (await remote_state(box, self.instance, self.sweep, expected)).manifest

        manifest = await self._with_box(go)
        assert isinstance(manifest, Manifest)
        return manifest

    def approve(self, step: TeardownStep, typed: str) -> ApprovedPlan:
        """The user typed a name to approve `step`; a refusal (locked, mistyped) is audited."""
        try:
            plan = self.gate.approve(step, typed)
        except GateError as exc:
            record(self.gate, "approval refused", action=step.action.id, typed=typed, note=str(exc))
            self.changed()
            raise
        record(self.gate, "approved", plan=plan)
        self.changed()
        return plan

    def refused_key(self, step: TeardownStep, why: str) -> None:
        """The user pressed approve on an action the gate keeps locked: audited, not run."""
        record(self.gate, "locked action pressed", action=step.action.id, note=why)

    async def run(self, plan: ApprovedPlan) -> ExecResult:
        """Execute an approved command step, streaming its output into `output`."""
        self.output = [f"$ {plan.step.command_text}\n"]
        self.busy = True
        self.changed()

        def line(text: str) -> None:
            self.output.append(text)
            self.changed()

        try:
            result = await execute(self.gate, plan, fresh_state=self.fresh_state,
                                   cli_path=self.cli_path, on_output=line)
        finally:
            self.busy = False
            self.changed()
        self.output.append(f"[exit {result.exit_code}]\n")
        return result

    async def by_hand(self, plan: ApprovedPlan, done: bool) -> ExecResult:
        """Record a manual step the user confirmed (or not)."""
        result = await confirm_by_hand(self.gate, plan, done=done, fresh_state=self.fresh_state)
        self.output = [f"{plan.step.action.label}: {result.output}\n"]
        self.changed()
        return result
