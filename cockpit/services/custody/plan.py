"""The teardown plan of one instance, for `cockpit teardown --dry-run` and the teardown screen.

Each profile action with what it keeps and destroys, whether it is reversible, what keeps
billing afterwards, and the exact command (rendered for this instance, quoted as a shell
would need it) or the manual steps. A reversible action that stops the meter comes first:
it is the safe first move while the results are still being made safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.models.billing import billing_after
from cockpit.models.gate import NotRunnable, TeardownStep, need_of, render_step
from cockpit.models.profile import Profile, TeardownAction
from cockpit.models.sweep import Instance
from cockpit.models.text import visible
from cockpit.services.custody.verify import read_marker


@dataclass(frozen=True)
class ActionView:
    """One action as the user sees it before approving."""

    action: TeardownAction
    step: TeardownStep | None
    problem: str
    """Why it cannot be run (e.g. no instance_id in the sweep); empty when it can."""
    billing: str


def plan_actions(instance: Instance, profile: Profile) -> list[ActionView]:
    """Every teardown action, a reversible meter-stopping one first."""
    views = []
    for action in profile.teardown.actions:
        try:
            step: TeardownStep | None = render_step(instance, action)
            problem = ""
        except NotRunnable as exc:
            step, problem = None, str(exc)
        views.append(ActionView(action, step, problem, billing_after(action, profile)))
    return sorted(views, key=lambda v: not (v.action.reversible and v.action.stops_meter != "no"))


def action_details(view: ActionView) -> list[tuple[str, str]]:
    """What to know before approving an action, as (label, text): what keeps billing, the
    exact command (or why it cannot run), the manual steps, the check after, the note."""
    action = view.action
    out = [("needs", need_of(action).value), ("billing after", view.billing)]
    if view.problem:
        out.append(("cannot run", view.problem))
    elif view.step is not None and view.step.argv is not None:
        out.append(("command", view.step.command_text))
    out += [("by hand", step) for step in action.manual_steps]
    if action.postcheck:
        out.append(("check after", action.postcheck))
    if action.note:
        out.append(("note", action.note))
    return out


def lock_line(pull_dir: Path, instance: Instance) -> str:
    """The gate as the last PULL_VERIFIED.json left it (the manifest is rechecked before running)."""
    marker = read_marker(pull_dir / instance.name)
    if marker is None:
        return "LOCKED: not verified (run `cockpit verify` or the verify screen first)"
    return visible(f"verified {marker.get('loaded')}/{marker.get('expected')} at "
                   f"{marker.get('verified_at_utc')}, manifest "
                   f"{str(marker.get('manifest_sha256'))[:16]}; the remote state is recomputed "
                   f"right before an action that needs evidence runs, and any change re-locks it")


def plan_json(sweep: str, instance: Instance, profile: Profile, pull_dir: Path) -> dict[str, Any]:
    """The plan as `cockpit teardown --dry-run --json` prints it (and the MCP tool returns
    it): every action with what it keeps, destroys and needs, and the gate. Runs nothing."""
    return {
        "sweep": sweep, "instance": instance.name, "profile": profile.platform,
        "dry_run": True, "gate": lock_line(pull_dir, instance),
        "actions": [{
            "id": view.action.id, "label": view.action.label,
            "reversible": view.action.reversible, "stops_meter": view.action.stops_meter,
            "keeps": list(view.action.keeps), "destroys": list(view.action.destroys),
            "runnable": not view.problem, "problem": view.problem or None,
            "command": view.step.command_text
            if view.step is not None and view.step.argv is not None else None,
            "details": [{"label": label, "text": text} for label, text in action_details(view)],
        } for view in plan_actions(instance, profile)],
    }


def plan_text(instance: Instance, profile: Profile, pull_dir: Path) -> str:
    """The whole plan as text. Reads only local files; changes nothing."""
    lines = [f"Teardown plan for {instance.name} ({profile.display_name}); dry run: nothing is run.",
             f"Gate: {lock_line(pull_dir, instance)}", ""]
    for view in plan_actions(instance, profile):
        action = view.action
        kind = "reversible" if action.reversible else "IRREVERSIBLE"
        lines.append(f"[{action.id}] {action.label} — {kind}, stops meter: {action.stops_meter}")
        lines.append(f"  {'keeps:':<14} {', '.join(action.keeps) or '-'}")
        lines.append(f"  {'destroys:':<14} {', '.join(action.destroys) or '-'}")
        lines += [f"  {label + ':':<14} {visible(value)}" for label, value in action_details(view)]
        lines.append("")
    return "\n".join(lines)
