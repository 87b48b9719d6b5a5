"""Load the failure rulebook: the shipped rules plus the user's, validated with file:line errors.

The shipped file is package data (`cockpit/data/rules.yaml`). A user file, when present,
is validated just as strictly: a typo in a rule must be an error that names the line, not
a rule that silently never fires.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from cockpit.models.rules import Rulebook, RuleFile, merge, parse_rule_file
from cockpit.services.config.paths import user_rules_file
from cockpit.services.config.yamlfile import load_validated

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "rules.yaml"


def load_rule_file(path: Path) -> RuleFile:
    """One rule file; raises ConfigError naming file, line and field."""
    rules, _ = load_validated(path, parse_rule_file, unique=(("rules",), "id"),
                              not_mapping="a rule file must be a mapping with `rules:`")
    return rules


@cache
def _shipped() -> RuleFile:
    return load_rule_file(SHIPPED)


def load_rulebook(extra: Sequence[Path] = (), *, user: bool = True) -> Rulebook:
    """The shipped rules, then `extra` files, then the user's rule file if it exists.

    Raises ConfigError for a bad file; the shipped file is checked by the test suite.
    """
    files = [load_rule_file(path) for path in extra]
    user_file = user_rules_file()
    if user and user_file.is_file():
        files.append(load_rule_file(user_file))
    return merge(_shipped(), *files)
