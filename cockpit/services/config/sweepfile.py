"""Load a sweep file and the profiles it names, with file:line:field errors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cockpit.models.profile import Profile
from cockpit.models.sweep import Sweep
from cockpit.services.config.profiles import load_named
from cockpit.services.config.yamlfile import ConfigError, Problem, duplicate_problems, load_validated


@dataclass(frozen=True)
class LoadedSweep:
    """A validated sweep, the profiles it uses, and the folder relative paths start from."""

    path: Path
    sweep: Sweep
    profiles: dict[str, Profile]

    @property
    def directory(self) -> Path:
        """Folder of the sweep file (relative ssh_config / known_hosts paths start here)."""
        return self.path.resolve().parent


def load_sweep(path: Path, profiles_dir: Path | None = None) -> LoadedSweep:
    """Validate `path` and resolve each instance's profile. Raises ConfigError."""
    sweep, loaded = load_validated(path, Sweep.model_validate, unique=(("instances",), "name"),
                                   not_mapping="a sweep file must be a mapping of keys")
    profiles: dict[str, Profile] = {}
    # Two instances with one platform id would let one approval tear down the other's box.
    problems: list[Problem] = duplicate_problems(loaded, ("instances",), "instance_id")
    failed: set[str] = set()
    for index, inst in enumerate(sweep.instances):
        if inst.profile in failed:
            continue
        if inst.profile not in profiles:
            try:
                profiles[inst.profile] = load_named(inst.profile, profiles_dir)
            except ConfigError as exc:
                loc: tuple[str | int, ...] = ("instances", index, "profile")
                problems += [Problem(path, loaded.line_for(loc), "instances"
                                     f"[{index}].profile", p.message) for p in exc.problems]
                failed.add(inst.profile)
                continue
        profile = profiles[inst.profile]
        for clock_id in inst.clocks_started:
            clock = next((c for c in profile.danger_clocks.clocks if c.id == clock_id), None)
            if clock is None or clock.seconds is None:
                loc = ("instances", index, "clocks_started", clock_id)
                timed = ", ".join(c.id for c in profile.danger_clocks.clocks
                                  if c.seconds is not None) or "none"
                problems.append(Problem(path, loaded.line_for(loc),
                                        f"instances[{index}].clocks_started.{clock_id}",
                                        f"profile {inst.profile!r} has no timed danger clock "
                                        f"{clock_id!r} (timed clocks: {timed})"))
        for tier_id in inst.mounts:
            if profile.tier(tier_id) is None:
                loc = ("instances", index, "mounts", tier_id)
                known = ", ".join(t.id for t in profile.storage.tiers)
                problems.append(Problem(path, loaded.line_for(loc),
                                        f"instances[{index}].mounts.{tier_id}",
                                        f"profile {inst.profile!r} has no tier {tier_id!r} "
                                        f"(tiers: {known})"))
    if problems:
        raise ConfigError(problems)
    return LoadedSweep(path, sweep, profiles)
