"""The teardown gate: a pure state machine between "results verified" and "box destroyed".

    locked ──verified(N/N, manifest digest)──▶ verified ──approve(typed name)──▶ approved
       ▲                                          │                                 │
       └──── remote changed / re-verified short ──┘                           executing
                                                                                   │
                                                                        done ◀─────┴────▶ failed

What an action needs comes from what it destroys, never from the profile's `reversible`
flag alone (a RunPod "stop" is reversible and wipes the container disk):

- **Destroys data** (any `destroys` entry naming a disk, volume, files, the instance…; or
  irreversible at all): N/N verified (N >= 1, fresh), then the instance name typed exactly.
- **Only kills processes** (`vastai stop`: "running processes (tmux)"): N/N, or evidence that
  no cell is running (every cell's latest run has its FINISHED mark, or the user excluded the
  running ones by typing their names), then the typed name.
- **Destroys nothing**: the typed name only. A reversible action returns the gate to where it
  was afterwards.
- Right before running, the caller recomputes the remote state; for N/N a different manifest
  digest re-locks the gate (platform-facts §8.4: an old verification is not evidence), and
  for the no-cell-running path a cell that started since re-locks it.
- `ApprovedPlan` objects are minted only here, and `start()` accepts only the plan this gate
  approved last: the executor has no other way to reach a teardown command.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum

from cockpit.models.argv import ENV_VAR, script_index
from cockpit.models.custody import Manifest, Verification
from cockpit.models.profile import TeardownAction
from cockpit.models.sweep import Instance

_PROCESS_WORDS = re.compile(r"process|tmux|screen session|training run|running job|running "
                            r"training|进程", re.IGNORECASE)
_DATA_WORDS = re.compile(r"disk|volume|storage|file|folder|director|/|\$|snapshot|instance|"
                         r"machine|pod|nfs|data|bucket|image|checkpoint|盘|存储|实例",
                         re.IGNORECASE)


class Need(Enum):
    """What an action needs before it may run (see the module doc)."""

    VERIFIED = "N/N verified and fresh, then the instance name typed"
    IDLE = ("N/N verified, or proof that no cell is running (running cells excluded by "
            "typing their names), then the instance name typed")
    NAME = "the instance name typed (it destroys nothing)"


def kills_processes_only(item: str) -> bool:
    """A `destroys` entry that names only processes. Anything else counts as data: the test
    fails closed, so an entry this does not recognise needs N/N."""
    return bool(_PROCESS_WORDS.search(item)) and not _DATA_WORDS.search(item)


def destroys_data(action: TeardownAction) -> bool:
    """Whether the action destroys anything but processes."""
    return any(not kills_processes_only(item) for item in action.destroys)


def need_of(action: TeardownAction) -> Need:
    """What `action` needs: irreversible or data-destroying → N/N; process-killing → N/N or
    no cell running; nothing destroyed → the typed name."""
    if not action.reversible or destroys_data(action):
        return Need.VERIFIED
    if action.destroys:
        return Need.IDLE
    return Need.NAME


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
    """`$NAME`s of the template (an API key). They stay literal in the argv, on screen and in
    the audit log; the secret reaches the command only through its environment (a shell
    inside the template expands it), never through an argv that `ps` shows every user."""

    @property
    def irreversible(self) -> bool:
        """Cannot be undone: the gate ends (done/failed) after it ran."""
        return not self.action.reversible

    @property
    def need(self) -> Need:
        """What this step needs before it may run."""
        return need_of(self.action)

    @property
    def command_text(self) -> str:
        """The exact command, quoted as a shell would need it (for display and the audit log)."""
        return shlex.join(self.argv) if self.argv is not None else "(by hand)"


_SENTINEL = "@@cockpit-field-{}-e3b0c442@@"
"""A placeholder no real value contains, legal inside a JSON string (a control character is not)."""


def _fill_json(word: str, values: dict[str, str | None]) -> str | None:
    """Fill a word that is a JSON document (`{"instance_ids":["{instance_id}"]}`) with a JSON
    encoder: each value becomes one JSON string, so `i-1","i-OTHER` stays one id. None when
    the word is not JSON."""
    marked = word.format(**{k: _SENTINEL.format(k) for k in values})
    try:
        doc = json.loads(marked)
    except ValueError:
        return None
    if not isinstance(doc, dict | list):
        return None

    def fill(node: object) -> object:
        if isinstance(node, str):
            for key, value in values.items():
                node = node.replace(_SENTINEL.format(key), value or "")
            return node
        if isinstance(node, list):
            return [fill(x) for x in node]
        if isinstance(node, dict):
            return {fill(k): fill(v) for k, v in node.items()}
        return node

    return json.dumps(fill(doc), ensure_ascii=False, separators=(",", ":"))


def render_step(instance: Instance, action: TeardownAction) -> TeardownStep:
    """Fill the action's template for `instance`.

    The template is split into words *first* and each word filled afterwards, and the result
    is executed without a shell: an instance id such as `x; rm -rf ~` stays one literal
    argument. A word that is a JSON document is filled with a JSON encoder. Inside the script
    of a shell wrapper (`sh -c`, `bash -lc`, `timeout 60 sh -c`, `env X=1 sh -c` …) values are
    shell-quoted. `$NAME`s are never filled here (see `TeardownStep.env_vars`).
    """
    if action.command is None:
        return TeardownStep(instance.name, action, None, action.manual_steps)
    values = {"instance_id": instance.instance_id, "host": instance.host, "name": instance.name,
              "region": instance.region}
    words = shlex.split(action.command)
    script = script_index(words)
    argv = []
    for index, word in enumerate(words):
        needed = [name for name in values if "{" + name in word]
        missing = [name for name in needed if values[name] is None]
        if missing:
            raise NotRunnable(f"{action.id}: the sweep gives no {', '.join(missing)} for "
                              f"{instance.name}; add it to the instance")
        if index == script:
            argv.append(word.format(**{k: shlex.quote(v or "") for k, v in values.items()}))
        elif needed and (as_json := _fill_json(word, values)) is not None:
            argv.append(as_json)
        else:
            argv.append(word.format(**{k: v or "" for k, v in values.items()}))
    env_vars = tuple(dict.fromkeys(ENV_VAR.findall(action.command)))
    return TeardownStep(instance.name, action, tuple(argv), action.manual_steps, env_vars)


def child_env(step: TeardownStep, environ: Mapping[str, str]) -> dict[str, str]:
    """The environment an approved command runs with; refuses when a `$NAME` it needs is not
    set (a missing key is not a run). The argv itself never carries the secret."""
    if step.argv is None:
        raise NotRunnable(f"{step.action.id} is done by hand")
    missing = [name for name in step.env_vars if name not in environ]
    if missing:
        raise NotRunnable(f"{step.action.id} needs {', '.join('$' + m for m in missing)} in "
                          f"the environment")
    return dict(environ)


def link_group(name: str, gates: list[Gate]) -> None:
    """Make `gates` one job group's gates: each holds the others (see `Gate.group`)."""
    shared = {gate.instance: gate for gate in gates}
    for gate in gates:
        gate.group, gate.group_name = shared, name


_MINT = object()


class Basis(Enum):
    """What an approval rested on."""

    VERIFIED = "N/N verified"
    IDLE = "no cell running"
    NAME = "typed name only"


@dataclass(frozen=True)
class ApprovedPlan:
    """An approved teardown step. Only `Gate.approve` makes one."""

    step: TeardownStep
    manifest_digest: str | None
    """The verified state it was approved against (None when it needed only the name)."""
    typed: str
    basis: Basis = Basis.NAME
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
    """The last verification, only while it is N/N (what unlocks data-destroying actions)."""
    latest: Verification | None = None
    """The last verification whatever it found (its evidence of running cells counts)."""
    history: list[tuple[GateState, str]] = field(default_factory=list)
    group: dict[str, Gate] | None = field(default=None, repr=False, compare=False)
    """The gates of every box of this box's job group, self included, shared by all of them
    (`link_group`): a distributed job's results are N/N only when every member's are, so no
    member is torn down before that (issue 21)."""
    group_name: str = ""
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
        self.latest = verification
        if not verification.complete:
            self.verification = None
            if verification.expected < 1:
                why = "no cells"
            elif verification.blockers:
                why = verification.blockers[0]
            else:
                why = "not N/N"
            self._move(GateState.LOCKED, f"{verification.summary}: {why}")
            return
        self.verification = verification
        self._move(GateState.VERIFIED, f"{verification.summary}, manifest "
                                       f"{verification.manifest_digest[:12]}")

    def idle_proof(self) -> tuple[bool, str]:
        """Whether the last verification proves no cell is running, and which ones are."""
        if self.latest is None:
            return False, "not verified: whether a cell is running is unknown"
        running = self.latest.running
        if running:
            shown = ", ".join(running[:5]) + (" …" if len(running) > 5 else "")
            return False, (f"no proof that no cell is running ({shown} without a FINISHED "
                           f"mark): verify N/N, or exclude them by typing their names")
        return True, ""

    def check_fresh(self, plan: ApprovedPlan, current: Manifest) -> None:
        """The remote state right now, before `plan` runs: for an N/N approval any change of
        the manifest digest re-locks; for a no-cell-running approval a cell that started
        since re-locks. Nothing to check for a name-only approval."""
        if plan.basis is Basis.NAME:
            return
        if plan.basis is Basis.VERIFIED:
            if self.verification is None:
                raise GateError("not verified: pull and verify first")
            if current.digest == self.verification.manifest_digest:
                return
            why = ("the remote changed after verification (manifest hash differs): pull and "
                   "verify again")
        else:
            latest = self.latest
            excluded = {v.cell for v in latest.excluded} if latest else set()
            started = [name for name, ev in current.evidence
                       if name not in excluded and not ev.ended]
            if latest is not None and not started:
                return
            why = (f"a cell started since the check ({', '.join(started[:5])}): verify again")
        self.verification = None
        self._approved = None
        self._move(GateState.LOCKED, why)
        raise GateError(why)

    # -- approval and execution ----------------------------------------------------------
    def can_approve(self, step: TeardownStep) -> tuple[bool, str]:
        """Whether `step` may be approved now, and why not."""
        if step.instance != self.instance:
            return False, f"the step is for {step.instance}"
        if self.state in (GateState.APPROVED, GateState.EXECUTING):
            return False, f"another action is {self.state.value}"
        if self.state is GateState.DONE:
            return False, "already torn down"
        need = step.need
        if need is not Need.NAME and self.group:
            short = [name for name, gate in self.group.items() if name != self.instance
                     and gate.state not in (GateState.VERIFIED, GateState.DONE)]
            if short:
                return False, (f"locked: job {self.group_name} is one job; {', '.join(short)} "
                               f"not N/N yet (no box of a job is torn down before all its "
                               f"results are verified)")
        if need is Need.VERIFIED and self.state is not GateState.VERIFIED:
            return False, f"locked: needs N/N ({self.reason})"
        if need is Need.IDLE and self.state is not GateState.VERIFIED:
            idle, why = self.idle_proof()
            if not idle:
                return False, f"locked: {why}"
        return True, ""

    def approve(self, step: TeardownStep, typed: str) -> ApprovedPlan:
        """The user typed the instance name to approve `step`."""
        allowed, why = self.can_approve(step)
        if not allowed:
            raise GateError(why)
        if typed != self.instance:
            raise GateError(f"typed {typed!r}, not the instance name {self.instance!r}: "
                            f"not approved")
        need = step.need
        if need is Need.NAME:
            basis, digest = Basis.NAME, None
        elif self.state is GateState.VERIFIED and self.verification is not None:
            basis, digest = Basis.VERIFIED, self.verification.manifest_digest
        else:
            assert self.latest is not None  # can_approve proved it
            basis, digest = Basis.IDLE, self.latest.manifest_digest
        plan = ApprovedPlan(step, digest, typed, basis, _MINT)
        self._approved = plan
        self._resume = (self.state, self.reason)
        self._move(GateState.APPROVED, f"{step.action.id} approved by typing {typed!r} "
                                       f"({basis.value})")
        return plan

    def start(self, plan: ApprovedPlan) -> None:
        """The executor is about to run `plan`: only the plan approved last is accepted."""
        if plan is not self._approved or self.state is not GateState.APPROVED:
            raise GateError("this plan is not the gate's current approval")
        if plan.basis is Basis.VERIFIED and (
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
