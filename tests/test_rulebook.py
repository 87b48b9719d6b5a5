"""The rulebook file: shipped rules, user rules, and errors that name file, line and field."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.models.rules import RuleFile
from cockpit.services.config.rulebook import SHIPPED, load_rule_file, load_rulebook
from cockpit.services.config.yamlfile import ConfigError

CLASSES = {"probabilistic", "disk-full", "real-bug", "host-oom", "hardware", "environment", "ops"}
# Ids the issue names from the catalog (platform-facts §3): each must be a rule.
CATALOG_IDS = {"U6", "U7", "U9", "U10", "U22", "U23", "U28", "U35", "M2", "M17", "O13", "D4", "D8",
               "D19", "DP4", "DP15", "MN3", "C18", "O3", "O14", "O20", "SLURM4", "K8S5"}


def test_shipped_rulebook_is_valid_and_large_enough() -> None:
    shipped = load_rule_file(SHIPPED)
    rules = shipped.rules
    assert len(rules) >= 40
    assert len({r.id for r in rules}) == len(rules)
    assert {r.klass for r in rules} == CLASSES, "every class is used"
    assert {r.id for r in rules} >= CATALOG_IDS
    for rule in rules:
        assert rule.remediation.strip() and rule.title.strip()
        assert "\n" not in rule.remediation, "one line"
    # The generic traceback rule comes last: anything more specific must win.
    assert rules[-1].id == "PY" and rules[-1].scope == "traceback"
    # Evidence tiers (issue 17): launcher signals, driver lines and symptoms are marked.
    tiers = {r.id: r.tier for r in rules}
    assert tiers["SLURM4"] == "scheduler" and tiers["U9"] == "signal"
    assert tiers["XID"] == "kernel" and tiers["PY"] == "text"
    assert {tiers["MN3"], tiers["D20"]} == {"symptom"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return path


GOOD = """version: 1
rules:
  - id: MY1
    title: our loader's own error
    class: real-bug
    retry: false
    patterns: ['ShardIndexError']
    remediation: rebuild the shard index
"""


@pytest.mark.parametrize(("body", "where"), [
    (GOOD.replace("'ShardIndexError'", "'(a)\\1'"), ":7: rules[0].patterns[0]: "),
    (GOOD.replace("'ShardIndexError'", "'(?<=x)y'"), ":7: rules[0].patterns[0]: "),
    (GOOD.replace("class: real-bug", "class: cosmic-ray"), ":5: rules[0].class: "),
    (GOOD.replace("    retry: false\n", "    retry: false\n    retyr: true\n"), ":7: rules[0].retyr: "),
    (GOOD.replace("    patterns: ['ShardIndexError']\n", ""), ":3: rules[0]: "),
    (GOOD + GOOD.split("rules:\n", 1)[1], ":9: rules[1].id: duplicate id"),
    (GOOD.replace("retry: false", "retry: 'no'"), ":6: rules[0].retry: "),
    (GOOD.replace("    retry: false\n", "    retry: false\n    tier: kernal\n"), ":7: rules[0].tier: "),
    (GOOD.replace("    retry: false\n", "    retry: false\n    warning: 'yes'\n"), ":7: rules[0].warning: "),
    ("version: 1\nrules:\n  - id: [unclosed\n", ":3: "),
])
def test_a_bad_user_rule_file_names_file_line_and_field(tmp_path: Path, body: str, where: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as info:
        load_rule_file(path)
    assert f"{path}{where}" in str(info.value)


def test_user_rules_come_first_and_replace_a_shipped_id(tmp_path: Path) -> None:
    override = GOOD.replace("id: MY1", "id: U9").replace("ShardIndexError", "^Killed$")
    path = write(tmp_path, override + "  - id: MY2\n    title: t\n    class: ops\n    retry: true\n"
                 "    patterns: ['CUDA out of memory']\n    remediation: r\n")
    rulebook = load_rulebook([path], user=False)
    assert rulebook.rules[0].id == "U9" and rulebook.rules[0].remediation == "rebuild the shard index"
    assert [r.id for r in rulebook.rules].count("U9") == 1
    rule = rulebook.match_line(b"RuntimeError: CUDA out of memory")
    assert rule is not None and rule.id == "MY2"


def test_the_user_rule_file_is_found_by_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, GOOD)
    monkeypatch.setenv("COCKPIT_RULES", str(path))
    rule = load_rulebook().match_line(b"ShardIndexError: shard 3 missing")
    assert rule is not None and rule.id == "MY1"
    monkeypatch.setenv("COCKPIT_RULES", str(tmp_path / "absent.yaml"))
    assert load_rulebook().match_line(b"ShardIndexError") is None  # no file: shipped rules only


def test_rule_file_model_rejects_a_rule_without_trigger() -> None:
    with pytest.raises(ValueError, match="patterns or exit_codes"):
        RuleFile.model_validate({"version": 1, "rules": (
            {"id": "X", "title": "t", "class": "ops", "retry": True, "remediation": "r"},)})


# ---------------------------------------------------------------------------------- the CLI
def cockpit(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], input=stdin,
                          capture_output=True, timeout=60, check=False)


def test_classify_cli_exit_codes_and_output(tmp_path: Path) -> None:
    crash = tmp_path / "crash.log"
    crash.write_bytes(b"Epoch 1/3 loss=0.3\nOSError: [Errno 28] No space left on device\n")
    clean = tmp_path / "clean.log"
    clean.write_bytes(b"Epoch 1/3 loss=0.3 val_error=0.1\n")
    soft = tmp_path / "soft.log"
    soft.write_bytes(b"wandb: ERROR Run initialization has timed out after 90.0 sec.\n")

    done = cockpit("classify", str(crash))
    assert done.returncode == 1, done.stderr
    out = done.stdout.decode()
    assert f"{crash}:2: U7 [disk-full]" in out and "df -i" in out

    assert cockpit("classify", str(clean)).returncode == 0
    assert cockpit("classify", str(soft)).returncode == 0, "a probabilistic class is not run-ending"

    piped = cockpit("classify", "-", "--json", stdin=crash.read_bytes())
    assert piped.returncode == 1
    doc = json.loads(piped.stdout)
    (event,) = doc["files"][0]["events"]
    assert (event["rule"], event["class"], event["line"], event["retry"]) == ("U7", "disk-full", 2, True)
    assert doc["severe"] is True
    assert doc["files"][0]["cause"] == "U7"

    # Several events: the cause is picked in evidence order (issue 17), named after them.
    mixed = tmp_path / "mixed.log"
    mixed.write_bytes(b"[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8)\n"
                      b"ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) "
                      b"local_rank: 3 (pid: 1) of binary: /usr/bin/python\n")
    done = cockpit("classify", str(mixed))
    assert done.returncode == 1
    assert done.stdout.decode().splitlines()[-1].startswith(f"{mixed}: cause U9 [host-oom]")


def test_classify_cli_bad_input_exits_2_without_a_traceback(tmp_path: Path) -> None:
    missing = cockpit("classify", str(tmp_path / "nope.log"))
    assert missing.returncode == 2
    assert b"no such file" in missing.stderr and b"Traceback" not in missing.stderr
    folder = cockpit("classify", str(tmp_path))
    assert folder.returncode == 2 and b"is a directory" in folder.stderr
    bad = write(tmp_path, GOOD.replace("'ShardIndexError'", "'(a)\\1'"))
    rules = cockpit("classify", "--rules", str(bad), "-", stdin=b"x\n")
    assert rules.returncode == 2
    assert f"{bad}:7: rules[0].patterns[0]".encode() in rules.stderr
    assert b"Traceback" not in rules.stderr
