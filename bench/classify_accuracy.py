"""Benchmark: the failure classifier's accuracy on real log excerpts (issue 17).

The corpus is `tests/data/realcorpus/`: excerpts copied from public issue threads, each with
its expected class in `index_*.yaml` (see that folder's README). Every excerpt gets ONE verdict
(`cockpit.models.classify.classify_excerpt`: the primary cause in evidence order, or none =
`clean`), and the verdicts are scored per class (precision, recall) with a confusion matrix,
separately for the tuning split and the test-only split.

The test-only split is fixed by the file name alone (`is_test_only`, decided before any rule
was tuned). Nothing here prints a test-only file's name, excerpt or verdict: that split is
reported only as figures. `--misses` lists the tuning split's misses one by one, which is what
tuning rules is allowed to look at.

`--baseline REV` judges the same corpus with the rulebook and code of git revision REV (a
detached `git worktree` in a temporary folder, imported in a child process) and prints its
figures beside today's. A revision without `classify_excerpt` is judged by its first finding,
which is what its `cockpit classify` showed first.

Run: .venv/bin/python -m bench.classify_accuracy [--baseline REV] [--misses] [--json]
Never part of the tests (tests/test_real_corpus.py gates on the same functions).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "data" / "realcorpus"
CLEAN = "clean"
CLASSES = ("real-bug", "host-oom", "disk-full", "hardware", "environment", "probabilistic",
           "ops", CLEAN)
"""Every expected class; `clean` means the classifier must raise no event."""
TEST_ONLY_MODULUS = 5
"""One file in five (by name hash) is test-only: the README's fixed 20% split."""
MAX_EXCERPT_BYTES = 4 << 20
"""An excerpt is a few KB; anything bigger than this is a corpus mistake, read only this far."""


def is_test_only(name: str) -> bool:
    """Whether corpus file `name` is in the test-only split (README: sha256(name) % 5 == 0).

    The one definition of the split: the bench, the test and any tuning tool import it."""
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % TEST_ONLY_MODULUS == 0


@dataclass(frozen=True)
class Entry:
    """One excerpt's index entry."""

    name: str
    source: str
    klass: str
    rule: str
    note: str
    index: str
    """Which index file holds it (index_a.yaml, ...)."""


def load_index(corpus: Path = CORPUS) -> dict[str, Entry]:
    """Every `index_*.yaml` merged: file name -> entry (a name twice is a ValueError)."""
    import yaml

    out: dict[str, Entry] = {}
    for index in sorted(corpus.glob("index_*.yaml")):
        data = yaml.safe_load(index.read_text(encoding="utf-8")) or {}
        if not isinstance(data, dict):
            raise ValueError(f"{index.name}: not a mapping")
        for name, meta in data.items():
            if name in out:
                raise ValueError(f"{name} is listed in {out[name].index} and {index.name}")
            meta = meta if isinstance(meta, dict) else {}
            out[str(name)] = Entry(str(name), str(meta.get("source", "")),
                                   str(meta.get("class", "")), str(meta.get("rule", "") or ""),
                                   str(meta.get("note", "")), index.name)
    return out


def read_excerpt(path: Path) -> bytes:
    """An excerpt's bytes, bounded by MAX_EXCERPT_BYTES."""
    with path.open("rb") as stream:
        return stream.read(MAX_EXCERPT_BYTES)


def judge_corpus(names: Iterable[str], corpus: Path = CORPUS) -> dict[str, tuple[str, str]]:
    """file name -> (class, rule id) of the verdict with the importable cockpit; `clean`, ""
    when it names no cause. Works with a revision that predates `classify_excerpt` too."""
    from cockpit.models import classify

    try:
        from cockpit.services.config.rulebook import load_rulebook
    except ImportError:  # revisions before services/ was split into subsystems
        from cockpit.services.rulebook import load_rulebook  # type: ignore[import-not-found,no-redef]
    rulebook = load_rulebook(user=False)
    out: dict[str, tuple[str, str]] = {}
    for name in names:
        data = read_excerpt(corpus / name)
        excerpt = getattr(classify, "classify_excerpt", None)
        if excerpt is not None:
            verdict = excerpt(rulebook, data)
            rule = verdict.rule if verdict is not None else None
        else:
            findings = classify.classify_bytes(rulebook, [data])
            first = min(findings, key=lambda f: f.line_no, default=None)
            rule = first.rule if first is not None else None
        out[name] = (rule.klass, rule.id) if rule is not None else (CLEAN, "")
    return out


@dataclass
class Scores:
    """Per-class precision and recall and the confusion matrix of one split."""

    total: int
    correct: int
    confusion: dict[str, dict[str, int]]
    """expected class -> predicted class -> count."""

    def precision(self, klass: str) -> float | None:
        """Of the excerpts judged `klass`, the share that are `klass` (None: none judged)."""
        judged = sum(row.get(klass, 0) for row in self.confusion.values())
        return self.confusion.get(klass, {}).get(klass, 0) / judged if judged else None

    def recall(self, klass: str) -> float | None:
        """Of the excerpts that are `klass`, the share judged `klass` (None: none present)."""
        row = self.confusion.get(klass, {})
        present = sum(row.values())
        return row.get(klass, 0) / present if present else None

    def support(self, klass: str) -> int:
        """How many excerpts of `klass` the split holds."""
        return sum(self.confusion.get(klass, {}).values())


def score(entries: Iterable[Entry], verdicts: Mapping[str, tuple[str, str]]) -> Scores:
    """Score verdicts against the expected classes."""
    confusion: dict[str, dict[str, int]] = {}
    total = correct = 0
    for entry in entries:
        got = verdicts[entry.name][0]
        row = confusion.setdefault(entry.klass, {})
        row[got] = row.get(got, 0) + 1
        total += 1
        correct += got == entry.klass
    return Scores(total, correct, confusion)


def splits(index: Mapping[str, Entry], corpus: Path = CORPUS) -> tuple[list[Entry], list[Entry]]:
    """(tuning, test-only) entries whose file exists."""
    present = [e for n, e in sorted(index.items()) if (corpus / n).is_file()]
    return ([e for e in present if not is_test_only(e.name)],
            [e for e in present if is_test_only(e.name)])


# --------------------------------------------------------------------------- baseline

def judge_at_revision(rev: str, names: list[str], corpus: Path = CORPUS) -> dict[str, tuple[str, str]]:
    """Verdicts by the code and rulebook of git revision `rev`, in a child process that
    imports cockpit from a temporary detached worktree of `rev` (this corpus, that code)."""
    with tempfile.TemporaryDirectory(prefix="cockpit-baseline-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "--quiet",
                        str(tree), rev], check=True)
        try:
            env = {**os.environ, "PYTHONPATH": str(tree), "XDG_CONFIG_HOME": tmp}
            child = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--judge-only", str(tree),
                 str(corpus)],
                input="\n".join(names), capture_output=True, text=True, env=env, check=False)
            if child.returncode != 0:
                raise RuntimeError(f"baseline {rev} failed: {child.stderr[-2000:]}")
            verdicts: dict[str, list[str]] = json.loads(child.stdout)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=False)
    return {name: (v[0], v[1]) for name, v in verdicts.items()}


def _judge_only(tree: str, corpus: str) -> int:
    """Child-process side of `judge_at_revision`: names on stdin, verdicts as JSON."""
    import cockpit

    if not Path(cockpit.__file__).resolve().is_relative_to(Path(tree).resolve()):
        print(f"imported {cockpit.__file__}, not the worktree {tree}", file=sys.stderr)
        return 2
    names = [line for line in sys.stdin.read().splitlines() if line]
    json.dump(judge_corpus(names, Path(corpus)), sys.stdout)
    return 0


# --------------------------------------------------------------------------- printing

def _pct(value: float | None) -> str:
    return "  -  " if value is None else f"{100 * value:5.1f}"


def table(title: str, now: Scores, before: Scores | None = None) -> str:
    """Per-class P/R (and the baseline's beside it) plus the confusion matrix."""
    lines = [f"== {title}: {now.correct}/{now.total} right"
             + (f" (baseline {before.correct}/{before.total})" if before else "")]
    head = f"{'class':<14}{'n':>4}  {'P':>5} {'R':>5}"
    if before:
        head += f"   {'P was':>5} {'R was':>5}"
    lines.append(head)
    for klass in CLASSES:
        row = f"{klass:<14}{now.support(klass):>4}  {_pct(now.precision(klass))} " \
              f"{_pct(now.recall(klass))}"
        if before:
            row += f"   {_pct(before.precision(klass))} {_pct(before.recall(klass))}"
        lines.append(row)
    short = {k: k[:6] for k in CLASSES}
    lines.append("confusion (rows: expected, columns: judged)")
    lines.append(" " * 14 + "".join(f"{short[k]:>7}" for k in CLASSES))
    for klass in CLASSES:
        row = now.confusion.get(klass, {})
        lines.append(f"{klass:<14}" + "".join(f"{row.get(k, 0) or '.':>7}" for k in CLASSES))
    return "\n".join(lines)


def as_json(scores: Scores) -> dict[str, Any]:
    """Machine-readable figures of one split."""
    return {"total": scores.total, "correct": scores.correct, "confusion": scores.confusion,
            "classes": {k: {"n": scores.support(k), "precision": scores.precision(k),
                            "recall": scores.recall(k)} for k in CLASSES}}


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] == "--judge-only":
        return _judge_only(sys.argv[2], sys.argv[3])
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", metavar="REV", help="also judge with git revision REV")
    parser.add_argument("--misses", action="store_true",
                        help="list the TUNING split's misses (never the test-only split's)")
    parser.add_argument("--json", action="store_true", help="print figures as JSON")
    parser.add_argument("--collectors", metavar="LETTERS",
                        help="score only the excerpts of these collectors (file-name prefixes, "
                             "e.g. 'hij': a round's files, unseen by rules tuned before it; "
                             "comma-separated for longer prefixes: 'aa,ab,ac')")
    args = parser.parse_args()
    index = load_index()
    if args.collectors:
        # 'hij' is three collectors; 'aa' (a two-letter collector, no comma) is one, not 'a'.
        prefixes = {name.split("_", 1)[0] for name in index}
        wanted = args.collectors
        letters = set(wanted.split(",") if "," in wanted or wanted in prefixes else wanted)
        index = {name: entry for name, entry in index.items()
                 if name.split("_", 1)[0] in letters}
    tuning, test_only = splits(index)
    names = [e.name for e in tuning + test_only]
    now = judge_corpus(names)
    before = judge_at_revision(args.baseline, names) if args.baseline else None
    results = {split: (entries, score(entries, now),
                       score(entries, before) if before else None)
               for split, entries in (("tuning split", tuning), ("test-only split", test_only))}
    if args.json:
        json.dump({split: {"now": as_json(s), "baseline": as_json(b) if b else None}
                   for split, (_, s, b) in results.items()}, sys.stdout, indent=1)
        print()
        return 0
    print(f"corpus: {len(index)} indexed, {len(names)} present "
          f"({len(tuning)} tuning, {len(test_only)} test-only)")
    for split, (_, now_scores, before_scores) in results.items():
        print()
        print(table(split, now_scores, before_scores))
    if args.misses:
        print("\n== tuning-split misses (expected -> judged rule)")
        for entry in tuning:
            klass, rule = now[entry.name]
            if klass != entry.klass:
                print(f"{entry.name}: {entry.klass} -> {klass} {rule} (want {entry.rule or '-'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
