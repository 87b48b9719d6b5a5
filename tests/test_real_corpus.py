"""The classifier on real log excerpts from public issue threads (issue 17).

The corpus (`tests/data/realcorpus/`) is split by file name alone (`is_test_only`); rules are
tuned on the tuning split only. This file gates on the TEST-ONLY split's figures: per-class
precision and recall of the one verdict per excerpt, and no event on any clean log. It never
prints a test-only file's name or content: a failure shows figures only.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache

import pytest

from bench.classify_accuracy import (
    CLASSES,
    CLEAN,
    CORPUS,
    Entry,
    Scores,
    is_test_only,
    judge_corpus,
    load_index,
    score,
    splits,
)

BAR = 0.95
"""Precision and recall the issue demands for every class on the test-only split."""
SOURCE_RE = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+#\d+$")
FAILURE_CLASSES = [k for k in CLASSES if k != CLEAN]


@cache
def _index() -> dict[str, Entry]:
    return load_index()


@cache
def _test_only() -> tuple[list[Entry], dict[str, tuple[str, str]]]:
    _, test_only = splits(_index())
    return test_only, judge_corpus([e.name for e in test_only])


@cache
def _scores() -> Scores:
    entries, verdicts = _test_only()
    return score(entries, verdicts)


def test_the_split_is_the_readme_rule() -> None:
    # The README fixes the split before any tuning: sha256 of the file name, modulo 5.
    names = sorted(_index())
    for name in names:
        digest = int(hashlib.sha256(name.encode()).hexdigest(), 16)
        assert is_test_only(name) == (digest % 5 == 0)
    share = sum(map(is_test_only, names)) / len(names)
    assert 0.1 < share < 0.3, share


def test_every_file_has_a_complete_index_entry() -> None:
    index = _index()
    logs = sorted(p.name for p in CORPUS.glob("*.log"))
    assert logs, "the corpus is empty"
    assert [n for n in logs if n not in index] == [], "log files without an index entry"
    assert [n for n in index if not (CORPUS / n).is_file()] == [], "index entries without a file"
    bad = [(e.name, field) for e in index.values() for field, ok in (
        ("source", bool(SOURCE_RE.match(e.source))),
        ("class", e.klass in CLASSES),
        ("note", bool(e.note.strip())),
    ) if not ok]
    assert bad == []


def test_no_thread_is_the_source_of_two_excerpts() -> None:
    # Two excerpts of one thread are near-copies: one in each split would leak the test-only
    # split into tuning (round 1 had three such pairs; the later copies were removed).
    seen: dict[str, str] = {}
    twice = []
    for entry in _index().values():
        if entry.source in seen:
            twice.append((entry.source, seen[entry.source], entry.name))
        seen.setdefault(entry.source, entry.name)
    assert twice == []


def _figure(klass: str) -> str:
    s = _scores()
    p, r = s.precision(klass), s.recall(klass)
    return (f"{klass}: n={s.support(klass)} precision="
            f"{'-' if p is None else f'{p:.3f}'} recall={'-' if r is None else f'{r:.3f}'}")


# Classes that do not meet the bar yet on the test-only split (measured; the lead decides).
# strict=True: the day one meets it, the xfail fails and must be removed.
BELOW_BAR: dict[str, str] = {
    "real-bug": "test-only split: precision 0.745, recall 0.787 (n=89)",
    "host-oom": "test-only split: precision 1.000, recall 0.921 (n=38)",
    "disk-full": "test-only split: precision 0.973, recall 0.923 (n=39; met the bar until round 14)",
    "hardware": "test-only split: precision 0.921, recall 0.778 (n=45)",
    "environment": "test-only split: precision 0.952, recall 0.789 (n=76)",
    "probabilistic": "test-only split: precision 0.928, recall 0.780 (n=82)",
    "ops": "test-only split: precision 0.897, recall 0.722 (n=72)",
}
CLEAN_ALARMS = ("test-only split: 3 of 89 clean logs raise a real-bug event; two came with round 9 "
                "(collector t) and raised it with the rules of the session that added them too; the "
                "third since the rules judge a log that ends inside a traceback (PY-CUT, session 28)")
"""The no-alarm bar is not met either (measured; strict: the day it is met this must go)."""
KNOWN_CLEAN_ALARMS = 3
"""Clean test-only logs that raise an event today: a ratchet, so a rule that adds one fails."""


@pytest.mark.parametrize("klass", [
    pytest.param(k, marks=pytest.mark.xfail(strict=True, reason=BELOW_BAR[k]))
    if k in BELOW_BAR else k for k in FAILURE_CLASSES])
def test_precision_and_recall_per_class_on_the_test_only_split(klass: str) -> None:
    s = _scores()
    assert s.support(klass) > 0, f"no {klass} excerpt in the test-only split"
    precision, recall = s.precision(klass) or 0.0, s.recall(klass) or 0.0
    assert precision >= BAR and recall >= BAR, _figure(klass)


@pytest.mark.xfail(strict=True, reason=CLEAN_ALARMS)
def test_no_event_on_any_clean_log_of_the_test_only_split() -> None:
    entries, verdicts = _test_only()
    clean = [e for e in entries if e.klass == CLEAN]
    assert clean, "no clean excerpt in the test-only split"
    alarms = sum(1 for e in clean if verdicts[e.name][0] != CLEAN)
    assert alarms == 0, f"{alarms} of {len(clean)} clean test-only logs raised an event"


def test_clean_alarms_on_the_test_only_split_do_not_grow() -> None:
    entries, verdicts = _test_only()
    alarms = sum(1 for e in entries if e.klass == CLEAN and verdicts[e.name][0] != CLEAN)
    assert alarms <= KNOWN_CLEAN_ALARMS, f"{alarms} clean test-only logs raised an event"
