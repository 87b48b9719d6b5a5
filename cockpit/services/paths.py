"""Where the cockpit keeps its own state (XDG on Linux, via platformdirs)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def state_dir() -> Path:
    """`$XDG_STATE_HOME/cockpit` (default ~/.local/state/cockpit); created on demand."""
    override = os.environ.get("COCKPIT_STATE_DIR")
    path = Path(override) if override else Path(platformdirs.user_state_dir("cockpit"))
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def approved_known_hosts() -> Path:
    """The known_hosts file holding host keys the user approved inside the cockpit."""
    return state_dir() / "known_hosts"


def user_rules_file() -> Path:
    """`$XDG_CONFIG_HOME/cockpit/rules.yaml`: the user's own failure rules (optional).

    `COCKPIT_RULES` names another file; it is not created here.
    """
    override = os.environ.get("COCKPIT_RULES")
    if override:
        return Path(override)
    return Path(platformdirs.user_config_dir("cockpit")) / "rules.yaml"
