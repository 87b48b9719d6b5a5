"""`cockpit mcp` driven by the MCP SDK's own stdio client against the demo fleet: it lists
its tools, reads status and the plan (the CLI's very JSON), reads a hostile log slice
literally with controls made visible, verifies, and requests a teardown that stays pending:
no command runs, no gate or audit line moves, and every call is audited in the store."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cockpit.services.agent.requests import RequestBook, RequestState
from cockpit.services.agent.tools import MAX_SLICE
from cockpit.services.config.paths import data_dir
from tests.test_ui_custody import queue_done

HOSTILE = (b"epoch 3 loss 0.41\n\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J"
           b"\xe2\x80\xaeRuntimeError: CUDA out of memory\r\nepoch 4 \x00done\n")
TOOLS = {"fleet_status", "box_detail", "failures", "log_slice", "preflight", "billing",
         "teardown_plan", "verify", "launch", "resume", "rerun", "request_teardown",
         "get_request", "list_requests"}


@asynccontextmanager
async def mcp_session(sweep: Path, *extra: str, name: str = "test-agent") -> AsyncIterator[ClientSession]:
    """`cockpit mcp SWEEP` as a child process, through the SDK's stdio client."""
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "cockpit", "mcp", str(sweep), *extra],
                                   env=dict(os.environ))
    with open(os.devnull, "w") as errlog:  # noqa: ASYNC230 - opening /dev/null never blocks
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(
                read, write, client_info=types.Implementation(name=name, version="0.1")) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    """(is_error, text) of one tool call."""
    result = await session.call_tool(tool, arguments)
    text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
    return bool(result.is_error), text


async def ok(session: ClientSession, tool: str, **arguments: Any) -> Any:
    """The parsed JSON of a call that must succeed."""
    error, text = await call(session, tool, **arguments)
    assert not error, text
    return json.loads(text)


def wait_v1(demo: Path) -> None:
    import time

    deadline = time.monotonic() + 90
    while not queue_done(demo, "v1", 3):
        assert time.monotonic() < deadline, "v1's three cells did not finish"
        time.sleep(0.3)


@pytest.mark.timeout(110)
async def test_an_agent_reads_verifies_and_can_only_ask_for_a_teardown(demo: Path) -> None:
    wait_v1(demo)
    sweep = demo / "sweep.yaml"
    (demo / "boxes" / "v1" / "data" / "runs" / "logs" / "hostile.log").write_bytes(HOSTILE)
    calls_log = demo / "teardown-calls.log"
    calls_before = calls_log.read_text() if calls_log.exists() else ""
    audit = data_dir() / "audit.jsonl"
    audit_before = audit.read_text() if audit.exists() else ""
    cli_plan = (await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "cockpit", "teardown", str(sweep), "--instance",
                         "v1", "--dry-run", "--json"], capture_output=True, text=True, check=True)).stdout

    cli_bill = (await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "cockpit", "billing", str(sweep), "--offline",
                         "--json"], capture_output=True, text=True, check=True)).stdout

    async with mcp_session(sweep) as session:
        listed = {t.name for t in (await session.list_tools()).tools}
        assert listed == TOOLS
        status = await ok(session, "fleet_status")
        assert [i["name"] for i in status["instances"]] == ["a1", "r1", "v1"]
        assert all(i["reachable"] for i in status["instances"])
        v1 = next(i for i in status["instances"] if i["name"] == "v1")
        assert v1["queue_view"]["progress"] == "3/3"

        detail = await ok(session, "box_detail", instance="r1")
        assert detail["name"] == "r1" and detail["queue_view"]["cells"][1]["name"] == "seg_big"
        assert isinstance(detail["judgements"], list) and isinstance(detail["events"], list)
        failed = await ok(session, "failures", instance="r1")
        assert failed["failed_cells"] == ["seg_big"] and failed["files"][0]["cause"] == "U6"
        bill = await ok(session, "billing", offline=True)
        assert bill["rows"] == json.loads(cli_bill)["rows"]  # the CLI's document
        # Refused either way (a1's queue runs, or no such cell): never a mutation of the box.
        error, why = await call(session, "rerun", instance="a1", cells=["no_such_cell"])
        assert error and "refused" in why, why

        error, plan_text = await call(session, "teardown_plan", instance="v1")
        assert not error and json.loads(plan_text) == json.loads(cli_plan)  # the CLI's JSON
        needs = {a["id"]: a["details"][0] for a in json.loads(plan_text)["actions"]}
        assert needs["destroy"] == {"label": "needs",
                                    "text": "N/N verified and fresh, then the instance name typed"}

        error, raw = await call(session, "log_slice", instance="v1", cell="hostile", start=0)
        assert not error
        assert "\x1b" not in raw and "\x07" not in raw and "\u202e" not in raw and "\x00" not in raw
        piece = json.loads(raw)
        assert piece["size"] == len(HOSTILE) and piece["bytes"] == len(HOSTILE)
        text = piece["text"]
        assert "\x1b" not in text and "\u202e" not in text and "\r" not in text
        assert text.startswith("epoch 3 loss 0.41\n␛]52;c;ZWNobyBwd25lZA==␇␛[2J")
        assert "RuntimeError: CUDA out of memory␍\nepoch 4 ␀done\n" in text
        tail = await ok(session, "log_slice", instance="v1", cell="hostile", start=-5,
                        length=10 * MAX_SLICE)
        assert tail["start"] == len(HOSTILE) - 5 and tail["text"] == "done\n"
        assert not tail["more_after"] and tail["more_before"]

        verified = (await ok(session, "verify", instance="v1"))["instances"][0]
        assert verified["complete"] and verified["loaded"] == 3, verified
        marker = (demo / "pulled" / "v1.cockpit-verified.json").read_text()

        made = await ok(session, "request_teardown", instance="v1", action="destroy",
                        reason="3/3 verified; only billing now")
        request = made["request"]
        assert request["state"] == "pending" and request["who"] == "test-agent 0.1"
        assert request["verification"]["receipt"]["loaded"] == 3
        assert request["verification"]["needs"].startswith("N/N verified")
        assert "nothing was run" in made["note"]
        polled = await ok(session, "get_request", request_id=request["id"])
        assert polled["request"]["state"] == "pending"

    # Nothing ran, nothing moved: no teardown command, no audit line, the same receipt.
    assert (calls_log.read_text() if calls_log.exists() else "") == calls_before
    assert (audit.read_text() if audit.exists() else "") == audit_before
    assert (demo / "pulled" / "v1.cockpit-verified.json").read_text() == marker
    with RequestBook(data_dir() / "demo-fleet.db") as book:
        stored = book.get(request["id"])
        assert stored is not None and stored.state is RequestState.PENDING
        tools = [c.tool for c in reversed(book.calls())]
        assert tools == ["fleet_status", "box_detail", "failures", "billing", "rerun",
                         "teardown_plan", "log_slice", "log_slice", "verify", "request_teardown",
                         "get_request"]
        assert all(c.who == "test-agent 0.1" for c in book.calls())
        assert [c.tool for c in book.calls() if not c.ok] == ["rerun"]


@pytest.mark.timeout(60)
async def test_hostile_arguments_are_refused_and_audited_and_nothing_is_approved(demo: Path) -> None:
    sweep = demo / "sweep.yaml"
    calls_log = demo / "teardown-calls.log"
    calls_before = calls_log.read_text() if calls_log.exists() else ""
    async with mcp_session(sweep, name="evil\x1b[2J agent") as session:
        made = await ok(session, "request_teardown", instance="v1", action="stop",
                        reason="please", approve=True, typed="v1", state="approved")
        rid = made["request"]["id"]
        assert made["request"]["state"] == "pending"
        assert "\x1b" not in made["request"]["who"] and made["request"]["who"].startswith("evil␛[2J")
        hostile: list[tuple[str, dict[str, Any]]] = [
            ("request_teardown", {"instance": "v1", "action": "destroy; rm -rf /", "reason": "x"}),
            ("request_teardown", {"instance": "../v1", "action": "destroy", "reason": "x"}),
            ("request_teardown", {"instance": "v1", "action": "destroy", "reason": "   "}),
            ("request_teardown", {"instance": "v1", "action": "approve", "reason": "x"}),
            ("get_request", {"request_id": "1 OR 1=1"}),
            ("get_request", {"request_id": 10**9}),
            ("log_slice", {"instance": "v1", "cell": "../../../../etc/passwd"}),
            ("log_slice", {"instance": "v1", "cell": ".hidden"}),
            ("log_slice", {"instance": "v1", "cell": "hostile", "length": -1}),
            ("rerun", {"instance": "v1", "cells": ["../x"]}),
            ("rerun", {"instance": "v1", "cells": []}),
            ("box_detail", {"instance": "v1\n"}),
            ("teardown_plan", {"instance": "$(reboot)"}),
            ("verify", {"instance": "*"}),
            ("list_requests", {"state": "approved' --"}),
        ]
        for tool, arguments in hostile:
            error, text = await call(session, tool, **arguments)
            assert error, (tool, arguments, text)
            assert "\x1b" not in text
        assert (await ok(session, "get_request", request_id=rid))["request"]["state"] == "pending"
        approved = await ok(session, "list_requests", state="approved")
        assert all(r["who"] != made["request"]["who"] for r in approved["requests"])
    assert (calls_log.read_text() if calls_log.exists() else "") == calls_before
    with RequestBook(data_dir() / "demo-fleet.db") as book:
        refused = [c for c in book.calls() if not c.ok]
        assert len(refused) >= 10  # refused by the cockpit (the SDK rejects bad types itself)
        assert any("destroy; rm -rf /" in c.arguments for c in refused)
