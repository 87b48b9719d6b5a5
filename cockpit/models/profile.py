"""Platform profiles: what a rented-GPU platform keeps, bills, destroys and when.

A profile is the cockpit's memory of a platform's money and data traps (see
shared/reference/platform-facts.md §2). Every fact group carries a `verified: YYYY-MM`
stamp because platforms change their rules and a stale fact can cost a user money;
`cockpit profiles check` lists stale groups.

The schema is strict: unknown keys are rejected (a misspelt `survives_destroy` must not
silently default), nothing is coerced from strings, and errors map back to file lines.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import string
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from cockpit.models.argv import secret_outside_script
from cockpit.models.durations import parse_duration

_MONTH = re.compile(r"^(\d{4})-(0[1-9]|1[0-2])$")


def repeated(values: list[str]) -> list[str]:
    """The values that occur more than once, sorted (for uniqueness checks)."""
    return sorted({v for v in values if values.count(v) > 1})


def _check_month(value: str) -> str:
    if not _MONTH.match(value):
        raise ValueError(f"expected a YYYY-MM stamp such as 2026-06, got {value!r}")
    return value


def _check_duration(value: str) -> str:
    parse_duration(value)
    return value


Month = Annotated[str, AfterValidator(_check_month)]
Duration = Annotated[str, AfterValidator(_check_duration)]
NonEmpty = Annotated[str, Field(min_length=1)]
Ident = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")]

TEMPLATE_FIELDS = frozenset({"instance_id", "host", "name", "region"})


class Strict(BaseModel):
    """Base: frozen, strict types, unknown keys rejected."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Stamped(Strict):
    """A fact group with the month its facts were last checked against the platform."""

    verified: Month


class StorageTier(Strict):
    """One storage tier and whether it survives each teardown-ish action."""

    id: Ident
    label: NonEmpty
    path: NonEmpty
    survives_stop: bool
    survives_destroy: bool
    bills_while_stopped: bool | None = None
    inode_cap: int | None = None
    durable: bool = False
    note: str = ""


class Storage(Stamped):
    """The survival matrix; exactly the tiers marked durable may hold the only copy."""

    tiers: tuple[StorageTier, ...]
    checkpoint_advice: str = ""

    @field_validator("tiers")
    @classmethod
    def _tiers(cls, tiers: tuple[StorageTier, ...]) -> tuple[StorageTier, ...]:
        if not tiers:
            raise ValueError("list at least one storage tier")
        dupes = repeated([tier.id for tier in tiers])
        if dupes:
            raise ValueError(f"duplicate tier id(s): {', '.join(dupes)}")
        return tiers


class Meter(Stamped):
    """The one action that really stops billing, and whether it can be undone."""

    stop_verb: NonEmpty
    irreversible: bool
    note: str = ""


class Billing(Stamped):
    """What keeps costing money when the box is not computing."""

    stopped_still_bills: bool
    while_stopped: NonEmpty
    granularity: str = ""
    traps: tuple[NonEmpty, ...] = ()


class TeardownAction(Strict):
    """One teardown verb: what it keeps, whether it is reversible, how it is run.

    `command` is a template over {instance_id}, {host}, {name}, {region}; the values are
    shell-quoted when the plan is rendered. Platforms without a CLI give `manual_steps`.
    """

    id: Ident
    label: NonEmpty
    stops_meter: Literal["yes", "no", "partial"]
    reversible: bool
    keeps: tuple[NonEmpty, ...] = ()
    destroys: tuple[NonEmpty, ...] = ()
    command: str | None = None
    manual_steps: tuple[NonEmpty, ...] = ()
    postcheck: str = ""
    note: str = ""

    @model_validator(mode="after")
    def _runnable(self) -> TeardownAction:
        if self.command is None and not self.manual_steps:
            raise ValueError("give a command template or manual_steps (or both)")
        if self.command is not None:
            names = {
                name
                for _, name, _, _ in string.Formatter().parse(self.command)
                if name is not None
            }
            unknown = names - TEMPLATE_FIELDS
            if unknown:
                raise ValueError(
                    f"command template uses unknown field(s) {sorted(unknown)}; "
                    f"allowed: {sorted(TEMPLATE_FIELDS)}"
                )
            try:  # nested fields such as {instance_id:{x}} hide from the parse above
                self.command.format(**dict.fromkeys(TEMPLATE_FIELDS, "x"))
            except (KeyError, ValueError, IndexError) as exc:
                raise ValueError(f"command template does not render: {exc!r}") from None
            try:
                words = shlex.split(self.command)
            except ValueError as exc:
                raise ValueError(f"command template does not split into words: {exc}") from None
            exposed = secret_outside_script(words)
            if exposed is not None:
                raise ValueError(
                    f"{exposed!r} names an environment variable outside a shell script: it would "
                    f"be filled into the argv, which `ps` shows to every user; reference it inside "
                    f"`sh -c '...'` (the shell reads it from its environment)")
        return self


class Teardown(Stamped):
    """All teardown verbs of the platform, safest first."""

    actions: tuple[TeardownAction, ...] = ()


class DangerClock(Strict):
    """A timer that deletes data or keeps billing once it starts."""

    id: Ident
    name: NonEmpty
    duration: Duration | None = None
    starts: NonEmpty
    destroys: NonEmpty
    note: str = ""

    @property
    def seconds(self) -> float | None:
        """The clock's length in seconds, or None for clocks without a fixed length."""
        return None if self.duration is None else parse_duration(self.duration)


class DangerClocks(Stamped):
    """The platform's danger clocks, shown on first contact."""

    clocks: tuple[DangerClock, ...] = ()


class Conveniences(Stamped):
    """Helpful platform features worth telling a first-time user about."""

    items: tuple[NonEmpty, ...] = ()


class Detach(Stamped):
    """How a run survives the SSH session going away."""

    primitive: Literal["tmux", "nohup", "sbatch", "k8s-job", "onstart", "none"]
    survives_ssh_drop: bool
    survives_restart: bool
    note: str = ""


class Ssh(Stamped):
    """SSH shape and quirks: default user, whether scp/sftp work, ports that move."""

    user: NonEmpty = "root"
    port_changes_on_recreate: bool = False
    sftp: Literal["yes", "no", "depends"] = "yes"
    quirks: tuple[NonEmpty, ...] = ()


class Spot(Stamped):
    """Interruptible capacity and the SIGTERM->SIGKILL grace, when there is one."""

    available: bool
    grace_seconds: float | None = None
    note: str = ""


class Gotcha(Strict):
    """A platform-only failure: stable id, symptom, fix."""

    id: NonEmpty
    symptom: NonEmpty
    fix: NonEmpty


class Profile(Strict):
    """A whole platform profile (one `profiles/<platform>.yaml`)."""

    platform: Ident
    display_name: NonEmpty
    kind: Literal[
        "ssh-rental", "cloud-api", "kubernetes", "slurm", "ssh", "notebook", "workstation"
    ]
    currency: Literal["USD", "CNY", "none"] = "USD"
    storage: Storage
    meter: Meter
    billing: Billing
    teardown: Teardown
    danger_clocks: DangerClocks
    conveniences: Conveniences
    detach: Detach
    ssh: Ssh
    spot: Spot
    gotchas: tuple[Gotcha, ...] = ()

    def stamps(self) -> dict[str, str]:
        """Every fact group and its `verified` month."""
        groups: dict[str, Stamped] = {
            "storage": self.storage,
            "meter": self.meter,
            "billing": self.billing,
            "teardown": self.teardown,
            "danger_clocks": self.danger_clocks,
            "conveniences": self.conveniences,
            "detach": self.detach,
            "ssh": self.ssh,
            "spot": self.spot,
        }
        return {name: group.verified for name, group in groups.items()}

    def tier(self, tier_id: str) -> StorageTier | None:
        """The tier with this id, if the profile has one."""
        return next((t for t in self.storage.tiers if t.id == tier_id), None)

    def clock_facts_hash(self) -> str:
        """A stable hash of what the danger banner shows; a change re-opens the banner."""
        payload = {
            "clocks": self.danger_clocks.model_dump(mode="json"),
            "conveniences": self.conveniences.model_dump(mode="json"),
            "billing": self.billing.model_dump(mode="json"),
        }
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


def months_between(earlier: str, later: str) -> int:
    """Whole months from one YYYY-MM stamp to another (negative if `later` is earlier)."""
    y1, m1 = (int(x) for x in earlier.split("-"))
    y2, m2 = (int(x) for x in later.split("-"))
    return (y2 - y1) * 12 + (m2 - m1)
