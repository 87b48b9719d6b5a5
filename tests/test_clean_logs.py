"""Whole logs of healthy training runs raise no event (issue 17: no alarm on any clean log).

`tests/data/cleanlogs/` holds complete logs of runs that went fine, copied unedited from
public repositories (see its README). The realcorpus's clean excerpts are short; these are
the long, noisy logs the watcher really reads: framework warnings, NCCL lines, metric names
with "error", tqdm carriage returns. Each is classified both whole and fed in small pieces,
the way the watcher reads a growing log.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest
import yaml

from cockpit.models.classify import LogClassifier, classify_excerpt
from cockpit.services.config.rulebook import load_rulebook

CLEANLOGS = Path(__file__).parent / "data" / "cleanlogs"
SOURCE_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+:\S+@[0-9a-f]{7,40}$")
FEED = 4096
"""Bytes per feed in the incremental pass: small enough that lines, tracebacks and tqdm bars
are cut across feeds many times per log."""
RULEBOOK = load_rulebook(user=False)


@cache
def _index() -> dict[str, dict[str, str]]:
    loaded = yaml.safe_load((CLEANLOGS / "index.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_every_log_has_a_complete_index_entry() -> None:
    index = _index()
    logs = sorted(p.name for p in CLEANLOGS.glob("*.log"))
    assert len(logs) >= 30
    assert sorted(index) == logs
    bad = [name for name, entry in index.items()
           if not SOURCE_RE.match(str(entry.get("source", "")))
           or not str(entry.get("note", "")).strip()]
    assert bad == []


@pytest.mark.parametrize("name", sorted(p.name for p in CLEANLOGS.glob("*.log")))
def test_a_healthy_run_raises_no_event_whole_or_fed_in_pieces(name: str) -> None:
    data = (CLEANLOGS / name).read_bytes()
    verdict = classify_excerpt(RULEBOOK, data)
    assert verdict is None, (verdict.rule.id, verdict.line_no, verdict.excerpt)
    classifier = LogClassifier(RULEBOOK)
    found = []
    for start in range(0, len(data), FEED):
        found += classifier.feed(data[start:start + FEED])
    found += classifier.finish()
    assert [(f.rule.id, f.line_no, f.excerpt) for f in found] == []
