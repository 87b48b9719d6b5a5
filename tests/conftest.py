"""Shared fixtures: isolate HOME and the cockpit state dir from the developer's machine."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import hypothesis  # noqa: F401  (see below)
import pytest

# hypothesis is imported here, at start-up, on purpose: when a run collects no test that
# imports it, its pytest plugin imports it in the terminal summary instead, deep in the hook
# stack, where pytest's assertion rewriter trips CPython 3.11.7's AST recursion-depth bug
# ("SystemError: AST constructor recursion depth mismatch") and the run exits 1 after passing.
from tests.demo import demo, fresh_demo  # noqa: F401  (one shared fleet; a fresh one per test)
from tests.sshd import SSHD, Sshd, require


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("COCKPIT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("COCKPIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    """A real OpenSSH sshd on 127.0.0.1 (skipped locally without one; fails under CI=true)."""
    require(SSHD, "OpenSSH sshd")
    server = Sshd(tmp_path / "sshd")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI=true a skip hides a missing install step: report it as a failure."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if os.environ.get("CI") == "true" and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = f"skipped under CI=true (a skip there is a failure): {report.longrepr}"
