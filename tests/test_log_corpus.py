"""The log corpus (tests/data/logs): real library messages, each file with its expected rule ids.

Every file is classified whole and in small chunks (as the probe delivers it); the distinct
rule ids, in order of first appearance, must equal `expected.yaml`. Trap files expect none.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cockpit.models.classify import Finding, classify_bytes
from cockpit.services.config.rulebook import load_rulebook

CORPUS = Path(__file__).resolve().parent / "data" / "logs"
EXPECTED: dict[str, list[str]] = yaml.safe_load((CORPUS / "expected.yaml").read_text())
RULEBOOK = load_rulebook(user=False)


def distinct(found: list[Finding]) -> list[str]:
    return list(dict.fromkeys(f.rule.id for f in found))


def test_every_corpus_file_has_an_expectation() -> None:
    assert sorted(EXPECTED) == sorted(p.name for p in CORPUS.glob("*.log"))
    assert len(EXPECTED) >= 40
    assert sum(1 for ids in EXPECTED.values() if not ids) >= 4, "trap files"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file_yields_its_rule_ids(name: str) -> None:
    data = (CORPUS / name).read_bytes()
    whole = classify_bytes(RULEBOOK, [data])
    assert distinct(whole) == EXPECTED[name], [(f.rule.id, f.line_no, f.excerpt) for f in whole]
    chunks = [data[i:i + 997] for i in range(0, len(data), 997)]
    cut = classify_bytes(RULEBOOK, chunks)
    assert [(f.key, f.line_no) for f in cut] == [(f.key, f.line_no) for f in whole]


def test_the_corpus_covers_most_rules() -> None:
    covered = {rule for ids in EXPECTED.values() for rule in ids}
    assert len(covered) >= 40, sorted(covered)
