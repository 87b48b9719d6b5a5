"""Write `bench/mcp_transcript.md`: one agent session driving the demo fleet through
`cockpit mcp`, every tool call and its result as the MCP SDK's own stdio client saw them.

    .venv/bin/python bench/mcp_transcript.py [--out bench/mcp_transcript.md]

Starts `cockpit demo --serve` in a temporary folder (its store and audit log there too),
waits for v1's three cells to finish, plants a run log with terminal escapes on v1 (text a
box may print), and then plays the agent: tools, status, the plan, verify, the hostile log
slice, a teardown request, polling it, a hostile action id. Nothing here approves: the request stays pending,
and the transcript ends by showing that no teardown command ran. Results longer than
`SHOWN` characters are cut in the file (the cut is marked).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from cockpit.demo.server import start_serving
from cockpit.services.agent.requests import RequestBook
from cockpit.services.store.db import db_file_name

SHOWN = 1500
"""Characters of one result shown in the transcript."""
HOSTILE = (b"epoch 3 loss 0.41\n\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J"
           b"\xe2\x80\xaeRuntimeError: CUDA out of memory\r\nepoch 4 \x00done\n")
"""A run log line set with what a box can print: an OSC 52 clipboard write, a clear-screen,
a bidi override, a bare CR and a NUL."""


def plant_hostile_log(root: Path) -> str:
    """Write the hostile log as v1's `hostile` cell log; returns the cell name."""
    logs = root / "boxes" / "v1" / "data" / "runs" / "logs"
    (logs / "hostile.log").write_bytes(HOSTILE)
    return "hostile"


def wait_for(check: Any, timeout: float, what: str) -> None:
    """Poll `check()` until true, or raise after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout:.0f} s for {what}")
        time.sleep(0.3)


def v1_done(root: Path) -> bool:
    """v1's three demo cells have their FINISHED marks."""
    log = root / "boxes" / "v1" / "data" / "q1_master.log"
    return log.exists() and log.read_text().count("FINISHED") >= 3


def server_params(sweep: Path, env: dict[str, str]) -> StdioServerParameters:
    """`cockpit mcp SWEEP` run with this interpreter."""
    return StdioServerParameters(command=sys.executable, args=["-m", "cockpit", "mcp", str(sweep)],
                                 env=env)


def result_text(result: types.CallToolResult) -> str:
    """The text of a tool result (one text block)."""
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def play(sweep: Path, env: dict[str, str], hostile: str) -> list[tuple[str, dict[str, Any], bool, str]]:
    """The agent's session: (tool, arguments, is_error, result text) per call."""
    calls: list[tuple[str, dict[str, Any], bool, str]] = []
    async with stdio_client(server_params(sweep, env)) as (read, write), ClientSession(
            read, write, client_info=types.Implementation(name="transcript-agent", version="1.0")) as session:
        await session.initialize()
        listed = await session.list_tools()
        calls.append(("(tools/list)", {}, False,
                      json.dumps([t.name for t in listed.tools])))

        async def call(name: str, **arguments: Any) -> str:
            result = await session.call_tool(name, arguments)
            text = result_text(result)
            calls.append((name, arguments, bool(result.is_error), text))
            return text

        await call("fleet_status")
        await call("failures", instance="r1")
        await call("teardown_plan", instance="v1")
        await call("verify", instance="v1")
        await call("log_slice", instance="v1", cell=hostile, start=0, length=4096)
        await call("request_teardown", instance="v1", action="destroy",
                   reason="all three cells verified 3/3; the box only bills now")
        request = json.loads(calls[-1][3])["request"]["id"]
        await call("get_request", request_id=request)
        await call("request_teardown", instance="v1", action="destroy; rm -rf /",
                   reason="hostile action id")
    return calls


def render(calls: list[tuple[str, dict[str, Any], bool, str]], teardown_calls: str,
           audit: list[str]) -> str:
    """The transcript as Markdown."""
    out = ["# An agent session through `cockpit mcp` (generated)", "",
           "Written by `bench/mcp_transcript.py` against the demo fleet (`cockpit demo --serve`),",
           "driven by the official MCP SDK's stdio client as `transcript-agent 1.0`. Each call",
           "is shown with its arguments and the server's result (cut at "
           f"{SHOWN} characters).", ""]
    for index, (tool, arguments, error, text) in enumerate(calls, 1):
        out.append(f"## {index}. `{tool}` {json.dumps(arguments) if arguments else ''}".rstrip())
        out.append("")
        out.append("error:" if error else "result:")
        shown = text if len(text) <= SHOWN else text[:SHOWN] + f"\n… ({len(text) - SHOWN} more characters)"
        out += ["", "```json" if not error else "```", shown, "```", ""]
    out += ["## After the session", "",
            "Teardown commands run on the demo boxes (`teardown-calls.log`): "
            + (f"\n\n```\n{teardown_calls}```" if teardown_calls else "none."), "",
            "The store's audit of the session (`tool_calls`, oldest first: client, tool, ok, "
            "arguments):", "", "```", *audit, "```", ""]
    return "\n".join(out)


def main() -> int:
    """Run the session and write the transcript."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("mcp_transcript.md"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cockpit-mcp-") as tmp:
        root = Path(tmp) / "demo"
        env = {**os.environ, "COCKPIT_DATA_DIR": str(Path(tmp) / "data"),
               "COCKPIT_STATE_DIR": str(Path(tmp) / "state")}
        os.environ.update({k: env[k] for k in ("COCKPIT_DATA_DIR", "COCKPIT_STATE_DIR")})
        demo = start_serving(root, open(os.devnull, "wb"))  # noqa: SIM115 - closed with the process
        try:
            wait_for(lambda: v1_done(root), 120, "v1's three cells")
            hostile = plant_hostile_log(root)
            calls = asyncio.run(play(root / "sweep.yaml", env, hostile))
            log = root / "teardown-calls.log"
            teardown_calls = log.read_text() if log.exists() else ""
            with RequestBook(Path(tmp) / "data" / db_file_name("demo-fleet")) as book:
                audit = [f"{c.who} | {c.tool} | {'ok' if c.ok else 'refused'} | {c.arguments}"
                         for c in reversed(book.calls())]
        finally:
            demo.send_signal(signal.SIGTERM)
            demo.wait(30)
    args.out.write_text(render(calls, teardown_calls, audit))
    print(f"wrote {args.out} ({len(calls)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
