"""Load and validate platform profiles from YAML, with file:line:field errors."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cockpit.models.profile import Profile, months_between
from cockpit.services.config.resources import shipped_dir
from cockpit.services.config.yamlfile import ConfigError, Problem, load_validated


def profiles_dir() -> Path:
    """The folder of shipped profiles."""
    return shipped_dir("profiles")


def load_profile(path: Path) -> Profile:
    """Load one profile file; raises ConfigError naming file, line and field."""
    profile, loaded = load_validated(path, Profile.model_validate, unique=(("storage", "tiers"), "id"),
                                     not_mapping="a profile must be a mapping of keys")
    if profile.platform != path.stem:
        raise ConfigError(
            [Problem(path, loaded.line_for(("platform",)), "platform",
                     f"must match the file name ({path.stem!r}), got {profile.platform!r}")]
        )
    return profile


def profile_paths(directory: Path | None = None) -> list[Path]:
    """All `*.yaml` profiles in `directory` (default: the shipped ones), sorted."""
    return sorted((directory or profiles_dir()).glob("*.yaml"))


@dataclass(frozen=True)
class ProfileSet:
    """Profiles by platform name, plus the problems of any file that failed to load."""

    profiles: dict[str, Profile]
    problems: tuple[Problem, ...]


def load_all(paths: Iterable[Path] | None = None) -> ProfileSet:
    """Load every profile, collecting problems instead of stopping at the first bad file."""
    profiles: dict[str, Profile] = {}
    problems: list[Problem] = []
    for path in profile_paths() if paths is None else paths:
        try:
            profile = load_profile(path)
        except ConfigError as exc:
            problems.extend(exc.problems)
            continue
        profiles[profile.platform] = profile
    return ProfileSet(profiles, tuple(problems))


def load_named(name: str, directory: Path | None = None) -> Profile:
    """The profile called `name`; a ConfigError lists the known names if there is none."""
    path = (directory or profiles_dir()) / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(p.stem for p in profile_paths(directory))
        raise ConfigError([Problem(path, None, "", f"no profile {name!r} (known: {known})")])
    return load_profile(path)


@dataclass(frozen=True)
class StaleFact:
    """A fact group whose `verified` stamp is older than the allowed age."""

    platform: str
    group: str
    verified: str
    age_months: int


def stale_facts(profiles: Iterable[Profile], today: str, max_age_months: int) -> list[StaleFact]:
    """Fact groups verified more than `max_age_months` before `today` (YYYY-MM)."""
    stale = []
    for profile in profiles:
        for group, month in profile.stamps().items():
            age = months_between(month, today)
            if age > max_age_months:
                stale.append(StaleFact(profile.platform, group, month, age))
    return stale
