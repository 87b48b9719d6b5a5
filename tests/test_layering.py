"""Layering: the headless layers (models, services) and `cockpit --help` never load Textual or
torch, and a few security invariants hold in the source (host keys, torch.load)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "cockpit"

HEADLESS_MODULES = (
    "cockpit.models.profile", "cockpit.models.sweep", "cockpit.models.snapshot", "cockpit.models.parse",
    "cockpit.services.transport.fleet", "cockpit.services.transport.ssh", "cockpit.services.config.profiles",
    "cockpit.services.config.sweepfile", "cockpit.services.alerts.report", "cockpit.services.custody.verify",
    "cockpit.services.custody.loadcheck", "cockpit.services.custody.flow",
    "cockpit.services.custody.teardown",
)
WORKER = PACKAGE / "services" / "custody" / "loadcheck.py"
"""The one module that loads checkpoints: it imports torch inside its functions only, and
runs them in worker processes."""


def fresh_python(*args: str) -> subprocess.CompletedProcess[str]:
    """Run a fresh interpreter with the checkout importable (the cwd plays no part)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          cwd=REPO.parent, timeout=60)


def loaded_top_levels(code: str) -> set[str]:
    """Run `code` in a fresh interpreter; the top-level package names then in sys.modules."""
    script = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    result = fresh_python("-c", script)
    assert result.returncode == 0, result.stderr
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_headless_layers_do_not_import_textual_or_torch() -> None:
    loaded = loaded_top_levels("\n".join(f"import {m}" for m in HEADLESS_MODULES))
    assert "cockpit" in loaded
    assert not loaded & {"textual", "torch"}


def test_cli_help_imports_no_heavy_packages() -> None:
    code = textwrap.dedent("""
        import contextlib, io
        from cockpit import cli
        with contextlib.redirect_stdout(io.StringIO()):
            try:
                cli.main(["--help"])
            except SystemExit as exc:
                assert exc.code == 0, exc.code
    """)
    loaded = loaded_top_levels(code)
    assert not loaded & {"textual", "torch", "pydantic"}


def test_python_m_cockpit_help_importtime() -> None:
    result = fresh_python("-X", "importtime", "-m", "cockpit", "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: cockpit" in result.stdout
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in result.stderr.splitlines()
        if line.startswith("import time:")
    }
    assert "cockpit" in imported  # the -X importtime report was read correctly
    assert not imported & {"textual", "torch", "pydantic"}


# -- static checks ---------------------------------------------------------------------------


def python_files(*folders: Path) -> Iterator[tuple[Path, ast.Module]]:
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def imported_top_levels(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def disabled_host_key_checks(tree: ast.AST) -> list[int]:
    """Lines that set known_hosts to None: `f(known_hosts=None)`, `{"known_hosts": None}`,
    `opts["known_hosts"] = None`. The phrase in a docstring or comment does not count."""
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            lines += [kw.value.lineno for kw in node.keywords
                      if kw.arg == "known_hosts" and is_none(kw.value)]
        elif isinstance(node, ast.Dict):
            lines += [value.lineno for key, value in zip(node.keys, node.values, strict=True)
                      if isinstance(key, ast.Constant) and key.value == "known_hosts" and is_none(value)]
        elif isinstance(node, ast.Assign) and is_none(node.value):
            for target in node.targets:
                if (isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant)
                        and target.slice.value == "known_hosts"):
                    lines.append(node.lineno)
    return lines


def unsafe_torch_loads(tree: ast.AST) -> list[int]:
    """Lines of `torch.load(...)` calls without `weights_only=True`, and `from torch import load`."""
    lines: list[int] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "torch":
            lines += [node.lineno for alias in node.names if alias.name == "load"]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "load" and (
            isinstance(func.value, ast.Name) and func.value.id == "torch"
        ):
            safe = any(kw.arg == "weights_only" and isinstance(kw.value, ast.Constant)
                       and kw.value.value is True for kw in node.keywords)
            if not safe:
                lines.append(node.lineno)
    return lines


def module_level(tree: ast.Module) -> ast.Module:
    """The module without its function bodies (imports that run at import time)."""
    body = [node for node in tree.body if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]
    return ast.Module(body=body, type_ignores=[])


def test_models_and_services_never_import_textual_or_torch() -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(bad)
        for path, tree in python_files(PACKAGE / "models", PACKAGE / "services")
        if (bad := imported_top_levels(module_level(tree) if path == WORKER else tree)
            & {"textual", "torch"})
    }
    assert offenders == {}


def test_the_tui_process_never_imports_torch() -> None:
    loaded = loaded_top_levels("import cockpit.ui.app, cockpit.ui.custody, cockpit.services.custody.verify")
    assert "textual" in loaded and "torch" not in loaded


def test_models_and_services_source_has_no_textual_import_text() -> None:
    for folder in (PACKAGE / "models", PACKAGE / "services"):
        for path in folder.rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            assert "import textual" not in source and "from textual" not in source, path


def test_host_key_checking_is_never_disabled() -> None:
    offenders = {str(path.relative_to(REPO)): lines for path, tree in python_files(PACKAGE)
                 if (lines := disabled_host_key_checks(tree))}
    assert offenders == {}


def test_torch_load_always_passes_weights_only() -> None:
    offenders = {str(path.relative_to(REPO)): lines for path, tree in python_files(PACKAGE)
                 if (lines := unsafe_torch_loads(tree))}
    assert offenders == {}


@pytest.mark.parametrize(
    ("source", "host_key_lines", "torch_lines"),
    [
        ('"""known_hosts=None is never passed."""\n# known_hosts=None\nx = 1\n', [], []),
        ("connect(h, known_hosts=None)\n", [1], []),
        ('opts = {"known_hosts": None}\n', [1], []),
        ('kw = {}\nkw["known_hosts"] = None\n', [2], []),
        ("connect(h, known_hosts=known)\n", [], []),
        ("torch.load(p)\n", [], [1]),
        ("torch.load(p, weights_only=False)\n", [], [1]),
        ("x = 1\ntorch.load(p, map_location='cpu', weights_only=True)\n", [], []),
        ("from torch import load\n", [], [1]),
    ],
)
def test_static_checkers_catch_what_they_should(
    source: str, host_key_lines: list[int], torch_lines: list[int],
) -> None:
    tree = ast.parse(source)
    assert disabled_host_key_checks(tree) == host_key_lines
    assert unsafe_torch_loads(tree) == torch_lines
