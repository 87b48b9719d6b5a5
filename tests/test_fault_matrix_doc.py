"""The fault matrix in bench/README.md names the tests that prove each row: every named test
file and test function must exist, so the table cannot drift from the suite."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_test_the_fault_matrix_names_exists() -> None:
    text = (ROOT / "bench" / "README.md").read_text()
    matrix = text[text.index("## Fault matrix"):]
    named = 0
    for cell in re.findall(r"\| ([^|]*test_[^|]*) \|", matrix):
        current = None
        for ref in re.findall(r"`([^`]+)`", cell):
            file, _, func = ref.partition("::")
            if file.endswith(".py"):
                current = ROOT / "tests" / file
                assert current.exists(), f"bench/README.md names a missing test file: {file}"
            if func:
                assert current is not None, ref
                source = current.read_text()
                assert re.search(rf"^(async )?def {re.escape(func)}\(", source, re.M), \
                    f"bench/README.md names a missing test: {current.name}::{func}"
                named += 1
    assert named >= 15, named
