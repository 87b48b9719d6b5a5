"""No path from an agent to a teardown: the agent package never imports the executor, the
custody flow that drives it, the gate's approval or the UI — not directly, not lazily inside a
function, not transitively — reads no environment variable, and calls no decision."""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from cockpit.models.sweep import AlertSettings
from cockpit.services.agent.requests import RequestBook, RequestState
from cockpit.services.agent.tools import AgentTools, ToolRefused
from cockpit.services.config.sweepfile import load_sweep

AGENT = Path(__file__).resolve().parent.parent / "cockpit" / "services" / "agent"
FORBIDDEN_MODULES = ("cockpit.services.custody.teardown", "cockpit.services.custody.flow",
                     "cockpit.ui", "textual")
FORBIDDEN_NAMES = {"execute", "confirm_by_hand", "ApprovedPlan", "Gate", "Custody", "child_env",
                   "start_teardown"}


def imports_of(path: Path) -> list[tuple[str, list[str]]]:
    """Every import in a file, wherever it sits (module level or inside a function)."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolve against the package
                base = "cockpit.services.agent" + (f".{base}" if base else "")
            found.append((base, [alias.name for alias in node.names]))
    return found


def test_the_agent_package_imports_no_executor_no_flow_no_approval_no_ui() -> None:
    files = sorted(AGENT.glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "server.py", "tools.py", "requests.py"}
    for path in files:
        for module, names in imports_of(path):
            assert not module.startswith(FORBIDDEN_MODULES), f"{path.name} imports {module}"
            assert not FORBIDDEN_NAMES & set(names), f"{path.name} imports {names} from {module}"
            if module == "cockpit.services.custody":
                assert not {"teardown", "flow"} & set(names), f"{path.name}: {names}"


def test_no_environment_variable_and_no_decision_is_reachable_from_a_tool() -> None:
    for path in sorted(AGENT.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("environ", "getenv", "environb"), f"{path.name} reads the env"
                if path.name != "requests.py":  # only its own definition may name it
                    assert node.attr not in ("decide", "approve", "start", "finish"), \
                        f"{path.name} calls .{node.attr}"
            if isinstance(node, ast.Name):
                assert node.id not in ("getenv", "environ"), f"{path.name} reads the env"


def test_importing_every_module_the_agent_uses_loads_no_executor() -> None:
    """The transitive closure: every module named anywhere in the package (lazy imports too),
    imported in a fresh interpreter, must not pull in the executor, the flow or Textual."""
    modules = sorted({m for p in AGENT.glob("*.py") for m, _ in imports_of(p)
                      if m.startswith(("cockpit", "mcp"))})
    code = ("import importlib, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "import cockpit.commands.mcp, cockpit.services.watch.wiring\n"
            f"bad = [m for m in sys.modules if m.startswith({FORBIDDEN_MODULES!r})]\n"
            "print(len(sys.modules)); assert not bad, bad\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(modules) > 10  # the walk found the lazy imports, not only the module level


@pytest.fixture
def tools(demo: Path, tmp_path: Path) -> AgentTools:
    book = RequestBook(tmp_path / "store.db")
    return AgentTools(load_sweep(demo / "sweep.yaml"), book)


HOSTILE_VALUES: list[object] = ["", "v1\x00", "../v1", "v1; rm -rf ~", "$(reboot)", "\x1b]52;c;AA\x07",
                                "V1", " v1", None, 7, ["v1"], {"instance": "v1"}, "a" * 100_000]


async def test_every_tool_refuses_hostile_arguments_before_any_io(tools: AgentTools) -> None:
    """Called directly (no SDK type checks in front): every hostile name is refused, and a
    refusal never echoes an escape sequence back."""
    for value in HOSTILE_VALUES:
        for method, args in ((tools.box_detail, (value,)), (tools.failures, (value,)),
                             (tools.log_slice, (value, "x")), (tools.preflight, (value,)),
                             (tools.verify, (value,)), (tools.queue, (value, "launch")),
                             (tools.queue, (value, "resume")), (tools.queue, (value, "rerun", ["x"])),
                             (tools.request_teardown, (value, "destroy", "why", "agent"))):
            if method == tools.preflight and not value:
                continue  # no instance: all boxes (a read)
            with pytest.raises(ToolRefused) as refused:
                await method(*args)  # type: ignore[operator]
            assert "\x1b" not in str(refused.value) and len(str(refused.value)) < 2000
        with pytest.raises(ToolRefused):
            tools.teardown_plan(value)  # type: ignore[arg-type]
        with pytest.raises(ToolRefused):
            await tools.log_slice("v1", value)  # type: ignore[arg-type]
        with pytest.raises(ToolRefused):
            await tools.request_teardown("v1", value, "why", "agent")  # type: ignore[arg-type]
        with pytest.raises(ToolRefused):
            tools.get_request(value)  # type: ignore[arg-type]
    for verb in ("stop", "destroy", "teardown", "approve", "execute"):
        with pytest.raises(ToolRefused, match="not an agent's queue action"):
            await tools.queue("v1", verb)
    assert tools.book.listing() == []


async def test_a_request_is_pending_whatever_it_says_and_only_decide_moves_it(tools: AgentTools) -> None:
    made = await tools.request_teardown("v1", "stop", "state=approved; approved_by=me", "agent")
    rid = made["request"]["id"]
    assert tools.get_request(rid)["request"]["state"] == "pending"
    book = tools.book
    assert book.decide(rid, RequestState.REFUSED, "a person")
    assert not book.decide(rid, RequestState.APPROVED, "too late")  # decided once
    assert tools.get_request(rid)["request"]["state"] == "refused"
    with pytest.raises(ValueError):
        book.decide(rid, RequestState.PENDING, "x")
    book.audit_call("t", {"api_key": "sk-SECRET", "token": "t0k", "instance": "v1"}, "a", True, "s")
    assert "sk-SECRET" not in book.calls()[0].arguments and "t0k" not in book.calls()[0].arguments


async def test_a_request_goes_out_on_the_sweeps_channels(demo: Path, tmp_path: Path,
                                                          httpserver: HTTPServer) -> None:
    """A real local HTTP server as the sweep's webhook: it receives the request (the reason
    with its escape made visible) and the delivery is reported to the agent."""
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    loaded = load_sweep(demo / "sweep.yaml")
    alerts = AlertSettings(desktop=False, webhook=httpserver.url_for("/hook"))
    loaded = dataclasses.replace(loaded, sweep=loaded.sweep.model_copy(update={"alerts": alerts}))
    with RequestBook(tmp_path / "store.db") as book:
        made = await AgentTools(loaded, book).request_teardown(
            "r1", "stop", "idle since 02:00 \x1b[31mred", "agent-x 2")
    assert made["channels"] == [{"channel": made["channels"][0]["channel"], "ok": True, "error": None}]
    (request, _), = httpserver.log
    body = json.loads(request.get_data())
    assert body["kind"] == "teardown-request" and body["instance"] == "r1"
    assert f"request #{made['request']['id']}" in body["text"] and "agent-x 2" in body["text"]
    assert "\x1b" not in body["text"] and "␛[31mred" in body["text"]
    assert "teardown screen" in body["detail"]
