"""Where the cockpit keeps its own state (XDG on Linux, via platformdirs)."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs


def _own_dir(override_var: str, default: str) -> Path:
    override = os.environ.get(override_var)
    path = Path(override) if override else Path(default)
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def state_dir() -> Path:
    """`$XDG_STATE_HOME/cockpit` (default ~/.local/state/cockpit); created on demand."""
    return _own_dir("COCKPIT_STATE_DIR", platformdirs.user_state_dir("cockpit"))


def data_dir() -> Path:
    """`$XDG_DATA_HOME/cockpit` (or `COCKPIT_DATA_DIR`): the audit log; created with mode 0700."""
    return _own_dir("COCKPIT_DATA_DIR", platformdirs.user_data_dir("cockpit"))


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
