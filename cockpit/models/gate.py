"""The teardown gate: a pure state machine between "results verified" and "box destroyed".

    locked ──verified(N/N, manifest digest)──▶ verified ──approve(typed name)──▶ approved
       ▲                                          │                                 │
       └──── remote changed / re-verified short ──┘                           executing
                                                                                   │
                                                                        done ◀─────┴────▶ failed

- An irreversible action needs `verified` (N/N with N >= 1) and the instance name typed
  exactly. A reversible, meter-stopping one (AutoDL 关机, `vastai stop`) needs only the typed
  name, and afterwards the gate returns to where it was.
- Right before running, the caller recomputes the remote manifest; a different digest
  re-locks the gate (platform-facts §8.4: an old verification is not evidence).
- `ApprovedPlan` objects are minted only here, and `start()` accepts only the plan this gate
  approved last: the executor has no other way to reach a teardown command.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from cockpit.models.custody import Verification
from cockpit.models.profile import TeardownAction
from cockpit.models.sweep import Instance

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})
ENV_VAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


class GateState(Enum):
    """Where one instance's teardown stands."""

    LOCKED = "locked"
    VERIFIED = "verified"
    APPROVED = "approved"
    EXECUTING = "executing"
    DONE = "done"
    FAILED = "failed"


class GateError(Exception):
    """A transition the gate refuses, with the reason to show the user."""


class NotRunnable(ValueError):
    """A teardown step cannot be rendered (e.g. the sweep gives no instance_id)."""


@dataclass(frozen=True)
class TeardownStep:
    """One profile action rendered for one instance: an argv (no shell) or manual steps."""

    instance: str
    action: TeardownAction
    argv: tuple[str, ...] | None
    manual_steps: tuple[str, ...] = ()
    env_vars: tuple[str, ...] = ()
    """`$NAME`s of the template (an API key): shown as written, filled from the environment
    only when the command runs, so a secret never reaches the screen or the audit log."""

    @property
    def irreversible(self) -> bool:
        """Destroys something that cannot be brought back."""
        return not self.action.reversible

    @property
    def command_text(self) -> str:
        """The exact command, quoted as a shell would need it (for display and the audit log)."""
        return shlex.join(self.argv) if self.argv is not None else "(by hand)"


def render_step(instance: Instance, action: TeardownAction) -> TeardownStep:
    """Fill the action's template for `instance`.

    The template is split into words *first* and each word filled afterwards, and the result
    is executed without a shell: an instance id such as `x; rm -rf ~` stays one literal
    argument. If the template itself runs a shell (`sh -c '...{instance_id}'`), values are
    shell-quoted inside it.
    """
    if action.command is None:
        return TeardownStep(instance.name, action, None, action.manual_steps)
    values = {"instance_id": instance.instance_id, "host": instance.host, "name": instance.name,
              "region": instance.region}
    words = shlex.split(action.command)
    shell = bool(words) and os.path.basename(words[0]) in SHELLS
    argv = []
    for word in words:
        needed = [name for name in values if "{" + name in word]
        missing = [name for name in needed if values[name] is None]
        if missing:
            raise NotRunnable(f"{action.id}: the sweep gives no {', '.join(missing)} for "
                              f"{instance.name}; add it to the instance")
        filled = {k: shlex.quote(v) if shell and v is not None else (v or "")
                  for k, v in values.items()}
        argv.append(word.format(**filled))
    env_vars = tuple(dict.fromkeys(ENV_VAR.findall(action.command)))
    return TeardownStep(instance.name, action, tuple(argv), action.manual_steps, env_vars)


def fill_env(step: TeardownStep, environ: Mapping[str, str]) -> tuple[str, ...]:
    """The argv to execute: the template's `$NAME`s filled from `environ`."""
    if step.argv is None:
        raise NotRunnable(f"{step.action.id} is done by hand")
    missing = [name for name in step.env_vars if name not in environ]
    if missing:
        raise NotRunnable(f"{step.action.id} needs {', '.join('$' + m for m in missing)} in "
                          f"the environment")
    names = set(step.env_vars)

    def value(match: re.Match[str]) -> str:
        return environ[match[1]] if match[1] in names else match[0]

    return tuple(ENV_VAR.sub(value, word) for word in step.argv)


_MINT = object()


@dataclass(frozen=True)
class ApprovedPlan:
    """An approved teardown step. Only `Gate.approve` makes one."""

    step: TeardownStep
    manifest_digest: str | None
    """The verified state it was approved against (None for a reversible action)."""
    typed: str
    _mint: object = field(repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        if self._mint is not _MINT:
            raise GateError("an approved plan comes only from the gate's approve()")


@dataclass
class Gate:
    """The teardown gate of one instance."""

    instance: str
    state: GateState = GateState.LOCKED
    reason: str = "not verified yet"
    verification: Verification | None = None
    history: list[tuple[GateState, str]] = field(default_factory=list)
    _approved: ApprovedPlan | None = None
    _resume: tuple[GateState, str] = (GateState.LOCKED, "")

    def _move(self, state: GateState, reason: str) -> None:
        self.state, self.reason = state, reason
        self.history.append((state, reason))

    # -- verification --------------------------------------------------------------------
    def verified(self, verification: Verification) -> None:
        """A verification finished: N/N unlocks, anything less locks."""
        if verification.instance != self.instance:
            raise GateError(f"verification of {verification.instance}, not {self.instance}")
        if self.state in (GateState.APPROVED, GateState.EXECUTING, GateState.DONE):
            raise GateError(f"cannot re-verify: {self.state.value}")
        if not verification.complete:
            self.verification = None
            why = "no cells" if verification.expected < 1 else "not N/N"
            self._move(GateState.LOCKED, f"{verification.summary}: {why}")
            return
        self.verification = verification
        self._move(GateState.VERIFIED, f"{verification.summary}, manifest "
                                       f"{verification.manifest_digest[:12]}")

    def check_fresh(self, current_digest: str) -> None:
        """The remote manifest right now: a difference from the verified one re-locks."""
        if self.verification is None:
            raise GateError("not verified: pull and verify first")
        if current_digest != self.verification.manifest_digest:
            self.verification = None
            self._approved = None
            self._move(GateState.LOCKED, "the remote changed after verification (manifest "
                                         "hash differs): pull and verify again")
            raise GateError(self.reason)

    # -- approval and execution ----------------------------------------------------------
    def can_approve(self, step: TeardownStep) -> tuple[bool, str]:
        """Whether `step` may be approved now, and why not."""
        if step.instance != self.instance:
            return False, f"the step is for {step.instance}"
        if self.state in (GateState.APPROVED, GateState.EXECUTING):
            return False, f"another action is {self.state.value}"
        if self.state is GateState.DONE:
            return False, "already torn down"
        if step.irreversible and self.state is not GateState.VERIFIED:
            return False, f"locked: {self.reason}"
        return True, ""

    def approve(self, step: TeardownStep, typed: str) -> ApprovedPlan:
        """The user typed the instance name to approve `step`."""
        allowed, why = self.can_approve(step)
        if not allowed:
            raise GateError(why)
        if typed != self.instance:
            raise GateError(f"typed {typed!r}, not the instance name {self.instance!r}: "
                            f"not approved")
        digest = self.verification.manifest_digest if (
            step.irreversible and self.verification is not None) else None
        plan = ApprovedPlan(step, digest, typed, _MINT)
        self._approved = plan
        self._resume = (self.state, self.reason)
        self._move(GateState.APPROVED, f"{step.action.id} approved by typing {typed!r}")
        return plan

    def start(self, plan: ApprovedPlan) -> None:
        """The executor is about to run `plan`: only the plan approved last is accepted."""
        if plan is not self._approved or self.state is not GateState.APPROVED:
            raise GateError("this plan is not the gate's current approval")
        if plan.step.irreversible and (
                self.verification is None or plan.manifest_digest != self.verification.manifest_digest):
            raise GateError("the verification changed since approval")
        self._move(GateState.EXECUTING, f"running {plan.step.action.id}")

    def finish(self, plan: ApprovedPlan, ok: bool, detail: str = "") -> None:
        """The command ended. An irreversible action ends the gate; a reversible one returns
        it to where it was (its success does not verify anything)."""
        if plan is not self._approved or self.state is not GateState.EXECUTING:
            raise GateError("finish() without a running plan")
        self._approved = None
        what = f"{plan.step.action.id} {'done' if ok else 'failed'}{': ' + detail if detail else ''}"
        if plan.step.irreversible:
            self._move(GateState.DONE if ok else GateState.FAILED, what)
        else:
            self.history.append((GateState.DONE if ok else GateState.FAILED, what))
            self._move(*self._resume)

    def cancel(self) -> None:
        """The user backed out of an approval before it ran."""
        if self.state is GateState.APPROVED:
            self._approved = None
            self._move(*self._resume)
