"""`cockpit mcp SWEEP`: the agent tools as a Model Context Protocol server over stdio.

Built on the official `mcp` SDK (`MCPServer`, the FastMCP style of decorated functions).
Each tool returns one JSON text, the document the CLI's `--json` prints, written with
`json_text` (exact values, nothing a terminal obeys). Every call is audited in the store's
`tool_calls` table, refused or not, with the client's name from the initialize handshake.

There is deliberately no tool that approves, runs or reaches a teardown: `request_teardown`
stores a request that only a person can decide, on the TUI's teardown screen.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from cockpit.models.text import json_text, visible
from cockpit.services.agent.requests import MAX_SUMMARY, MAX_WHO, RequestBook
from cockpit.services.agent.tools import MAX_SLICE, AgentTools, ToolRefused
from cockpit.services.config.sweepfile import LoadedSweep

SERVER_NAME = "cockpit"
INSTRUCTIONS = (
    "The cockpit watches a sweep of training runs on rented GPU boxes. Read tools show the "
    "fleet, one box, classified failures, log slices, preflight, billing and the teardown plan. "
    "Act tools verify results (pull + hash + safe load) and launch, resume or rerun queues. "
    "Nothing here destroys: request_teardown stores a request that only a person can approve "
    "in the cockpit's teardown screen (fresh N/N verification, then the instance name typed); "
    "poll it with get_request.")


def client_name(ctx: Context[Any, Any] | None) -> str:
    """`name version` of the MCP client from the initialize handshake (its own claim, bounded
    and made visible), or `unknown client`."""
    try:
        params = ctx.session.client_params if ctx is not None else None
    except Exception:  # no session (called outside a request)
        params = None
    if params is None or params.client_info is None:
        return "unknown client"
    info = params.client_info
    return visible(f"{info.name} {info.version or ''}".strip(), limit=MAX_WHO) or "unknown client"


def summary_of(document: dict[str, Any]) -> str:
    """A short result summary for the audit (compact JSON, cut)."""
    text = json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)
    return text[:MAX_SUMMARY]


async def audited(tools: AgentTools, ctx: Context[Any, Any] | None, tool: str,
                  arguments: dict[str, Any], work: Callable[[], Awaitable[dict[str, Any]]]) -> str:
    """Run one tool, audit it, and return its JSON text; a refusal or failure becomes a
    tool error (the client sees why) and is audited too."""
    who = client_name(ctx)
    try:
        document = await work()
    except ToolRefused as exc:
        tools.book.audit_call(tool, arguments, who, False, f"refused: {exc}")
        raise ToolError(visible(str(exc), one_line=False)) from None
    except Exception as exc:  # a box that cannot be reached, a service's error: said plainly
        why = visible(f"{type(exc).__name__}: {exc}", one_line=False)
        tools.book.audit_call(tool, arguments, who, False, f"failed: {why}")
        raise ToolError(why) from None
    tools.book.audit_call(tool, arguments, who, True, summary_of(document))
    return json_text(document)


def build_server(tools: AgentTools) -> MCPServer:
    """The MCP server with every agent tool registered."""
    # WARNING: INFO would put every SSH connection asyncssh opens on the client's stderr.
    app: MCPServer = MCPServer(SERVER_NAME, instructions=INSTRUCTIONS, log_level="WARNING")

    def tool(fn: Callable[..., Awaitable[str]]) -> None:
        app.tool(structured_output=False)(fn)

    async def _sync(document: dict[str, Any]) -> dict[str, Any]:
        return document

    @tool
    async def fleet_status(ctx: Context[Any, Any]) -> str:
        """Every box's probe record: reachability, GPUs, disks and inodes, queue progress
        with each cell's evidence (the `cockpit status --json` document)."""
        return await audited(tools, ctx, "fleet_status", {}, tools.fleet_status)

    @tool
    async def box_detail(instance: str, ctx: Context[Any, Any]) -> str:
        """One box in detail: GPU, disk and inodes, queue cells with their evidence, and
        from the store its judgement episodes (stalled, idle burn, stale) and events."""
        return await audited(tools, ctx, "box_detail", {"instance": instance},
                             lambda: tools.box_detail(instance))

    @tool
    async def failures(instance: str, ctx: Context[Any, Any]) -> str:
        """Classified failures of a box's failed cells (rule, class, excerpt, remediation;
        the `cockpit classify --json` document over each failed cell's log tail)."""
        return await audited(tools, ctx, "failures", {"instance": instance},
                             lambda: tools.failures(instance))

    @tool
    async def log_slice(instance: str, cell: str, ctx: Context[Any, Any], start: int = -MAX_SLICE,
                        length: int = MAX_SLICE) -> str:
        """Bytes [start, start+length) of a cell's run log (cell `queue_log`: the queue's
        master log); a negative start counts from the end. At most 65536 bytes; the text has
        control characters made visible. `size` and `more_before` say where to go on."""
        return await audited(tools, ctx, "log_slice",
                             {"instance": instance, "cell": cell, "start": start, "length": length},
                             lambda: tools.log_slice(instance, cell, start, length))

    @tool
    async def preflight(ctx: Context[Any, Any], instance: str | None = None) -> str:
        """Per box PASS / WARN / FAIL before a run: GPUs, driver, free bytes and inodes,
        durable mount, tmux (the `cockpit preflight --json` document)."""
        return await audited(tools, ctx, "preflight", {"instance": instance},
                             lambda: tools.preflight(instance))

    @tool
    async def billing(ctx: Context[Any, Any], offline: bool = False) -> str:
        """What the sweep bills, per currency, with each platform's own word, orphans and
        money clocks (the `cockpit billing --json` document); offline skips the platforms."""
        return await audited(tools, ctx, "billing", {"offline": offline},
                             lambda: tools.billing(offline))

    @tool
    async def teardown_plan(instance: str, ctx: Context[Any, Any]) -> str:
        """The teardown plan (dry run): each action's keeps, destroys, reversibility,
        billing after, exact command and `needs` (the `cockpit teardown --dry-run --json`
        document). Runs nothing."""
        return await audited(tools, ctx, "teardown_plan", {"instance": instance},
                             lambda: _sync(tools.teardown_plan(instance)))

    @tool
    async def verify(instance: str, ctx: Context[Any, Any]) -> str:
        """Pull a box's finished cells and verify them: hashes against the box's manifest,
        safe load of every checkpoint, N/N (the `cockpit verify --json` document)."""
        return await audited(tools, ctx, "verify", {"instance": instance},
                             lambda: tools.verify(instance))

    @tool
    async def launch(instance: str, ctx: Context[Any, Any]) -> str:
        """Start the box's queue detached (refused while it already runs)."""
        return await audited(tools, ctx, "launch", {"instance": instance},
                             lambda: tools.queue(instance, "launch"))

    @tool
    async def resume(instance: str, ctx: Context[Any, Any]) -> str:
        """Start the queue again after its last cell with proof of success (refused while
        anything of it runs; never re-runs a proven cell)."""
        return await audited(tools, ctx, "resume", {"instance": instance},
                             lambda: tools.queue(instance, "resume"))

    @tool
    async def rerun(instance: str, cells: list[str], ctx: Context[Any, Any]) -> str:
        """Run only the named (failed) cells again, as a new queue file beside the original
        (refused while the queue runs)."""
        return await audited(tools, ctx, "rerun", {"instance": instance, "cells": cells},
                             lambda: tools.queue(instance, "rerun", cells))

    @tool
    async def request_teardown(instance: str, action: str, reason: str,
                               ctx: Context[Any, Any]) -> str:
        """ASK for a teardown action (an id from teardown_plan). Stores a pending request
        with your name, the reason and the verification state, and notifies the humans.
        Nothing runs: only a person approves, on the cockpit's teardown screen after a fresh
        N/N and typing the instance name. Poll get_request for the decision."""
        who = client_name(ctx)
        return await audited(tools, ctx, "request_teardown",
                             {"instance": instance, "action": action, "reason": reason},
                             lambda: tools.request_teardown(instance, action, reason, who))

    @tool
    async def get_request(request_id: int, ctx: Context[Any, Any]) -> str:
        """A teardown request's state: pending, approved or refused (and by whom, when)."""
        return await audited(tools, ctx, "get_request", {"request_id": request_id},
                             lambda: _sync(tools.get_request(request_id)))

    @tool
    async def list_requests(ctx: Context[Any, Any], state: str | None = None) -> str:
        """Teardown requests, newest first (state: pending, approved or refused)."""
        return await audited(tools, ctx, "list_requests", {"state": state},
                             lambda: _sync(tools.list_requests(state)))

    return app


def serve_stdio(loaded: LoadedSweep, db: Path) -> None:
    """Serve the sweep's tools on stdin/stdout until the client closes the stream."""
    book = RequestBook(db)
    tools = AgentTools(loaded, book)
    try:
        build_server(tools).run()
    finally:
        tools.close()
        book.close()
