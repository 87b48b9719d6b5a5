"""Command templates as argv: where a shell wrapper's script is, and `$NAME` references.

Shared by the profile validator (which refuses a secret outside a shell script) and the
teardown gate (which shell-quotes values only inside that script).
"""

from __future__ import annotations

import os
import re

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "busybox"})
ENV_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def script_index(words: list[str]) -> int | None:
    """The index of the script word of a shell wrapper anywhere in the argv (`sh -c S`,
    `bash -lc S`, `timeout 60 sh -c S`, `env X=1 sh -c S`, `nohup bash -ec S`), else None."""
    for i, word in enumerate(words):
        if os.path.basename(word) not in SHELLS:
            continue
        for j in range(i + 1, len(words) - 1):
            flag = words[j]
            if not flag.startswith("-") or flag.startswith("--"):
                break
            if "c" in flag[1:]:
                return j + 1
    return None


def secret_outside_script(words: list[str]) -> str | None:
    """A word outside a shell script that names `$NAME` (it would have to be filled into the
    argv, where `ps` shows it to every user), or None."""
    script = script_index(words)
    return next((w for i, w in enumerate(words) if i != script and ENV_VAR.search(w)), None)
