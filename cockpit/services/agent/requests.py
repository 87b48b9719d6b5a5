"""Teardown requests and the tool-call audit, kept in the sweep's store (schema v2).

An agent never tears anything down: it *asks*. A request is a row in `teardown_requests`
with who asked (the MCP client's name from the initialize handshake), why, and the
verification state when it asked; it is `pending` until a person decides on the TUI's
teardown screen, through the same gate as any teardown (fresh N/N, then the instance name
typed). Its state then becomes `approved` or `refused`; nothing here runs anything.

Every MCP tool call is a row in `tool_calls` (tool, arguments without secrets, a summary of
the result), written whatever the outcome.

The book opens its own read-write connection to the store file: the MCP server and the TUI
are other processes than the store's one writer (`cockpit watch` or `attach`), and SQLite
in WAL mode takes these few, small writes between the writer's ticks (`BUSY_TIMEOUT_MS`).
It never takes the writer lock, and it touches only its own two tables.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from cockpit.models.text import visible
from cockpit.services.store.db import BUSY_TIMEOUT_MS, cut
from cockpit.services.store.schema import migrate

MAX_REASON = 1000
"""Characters of an agent's reason: a paragraph at most; it is shown on the teardown screen
and sent on chat channels."""
MAX_WHO = 120
"""Characters of a client's name and version (from the handshake: the client chooses it)."""
MAX_ARGUMENTS = 2000
"""Characters of one audited call's arguments as JSON (a long value is cut, never dropped)."""
MAX_SUMMARY = 500
"""Characters of one audited call's result summary."""
MAX_VALUE = 300
"""Characters kept of any one argument value in the audit."""
MAX_NOTE = 300
"""Characters of a decision's note (who decided, on what)."""
MAX_LIST = 200
"""Requests one listing returns (newest first): a screen's worth, and a bound on a loop."""
SECRET_KEYS = re.compile(r"secret|token|key|passw|auth|cookie|credential", re.IGNORECASE)
"""Argument names whose values are never audited (replaced by `REDACTED`)."""
REDACTED = "(redacted)"


class RequestState(Enum):
    """Where a teardown request stands."""

    PENDING = "pending"
    APPROVED = "approved"
    REFUSED = "refused"


@dataclass(frozen=True)
class TeardownRequest:
    """One stored request."""

    id: int
    at: float
    instance: str
    action: str
    reason: str
    who: str
    verification: dict[str, Any]
    state: RequestState
    decided_at: float | None = None
    decided_by: str = ""
    note: str = ""

    def document(self) -> dict[str, Any]:
        """The request as the `get_request` tool returns it."""
        return {"id": self.id, "at": _iso(self.at), "instance": self.instance,
                "action": self.action, "reason": self.reason, "who": self.who,
                "verification": self.verification, "state": self.state.value,
                "decided_at": _iso(self.decided_at) if self.decided_at is not None else None,
                "decided_by": self.decided_by or None, "note": self.note or None}

    def line(self) -> str:
        """One visible line for a toast or a list: `#3 v1 destroy by claude-code: why`."""
        return visible(f"#{self.id} {self.instance} {self.action} by {self.who}: {self.reason}")


@dataclass(frozen=True)
class ToolCall:
    """One audited tool call."""

    id: int
    at: float
    who: str
    tool: str
    arguments: str
    ok: bool
    summary: str


def _iso(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch))


def scrub_arguments(arguments: Mapping[str, Any]) -> str:
    """The arguments as bounded JSON, values of secret-looking names replaced."""
    shown: dict[str, Any] = {}
    for name, value in arguments.items():
        if SECRET_KEYS.search(str(name)):
            shown[str(name)[:MAX_VALUE]] = REDACTED
        elif isinstance(value, bool | int | float) or value is None:
            shown[str(name)[:MAX_VALUE]] = value
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            shown[str(name)[:MAX_VALUE]] = cut(text, MAX_VALUE)
    return cut(json.dumps(shown, ensure_ascii=False, default=str), MAX_ARGUMENTS)


class RequestBook:
    """The requests and the tool-call audit of one sweep's store."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        try:
            self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            self.conn.execute("PRAGMA journal_mode = WAL")
            migrate(self.conn)
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        """Close the connection."""
        self.conn.close()

    def __enter__(self) -> RequestBook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ---------------------------------------------------------------------------
    def add(self, instance: str, action: str, reason: str, who: str,
            verification: Mapping[str, Any], at: float | None = None) -> TeardownRequest:
        """Store a new pending request; returns it with its id."""
        when = time.time() if at is None else at
        cur = self.conn.execute(
            "INSERT INTO teardown_requests (at, instance, action, reason, who, verification, "
            "state) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (when, cut(instance, MAX_VALUE), cut(action, MAX_VALUE), cut(reason, MAX_REASON),
             cut(who, MAX_WHO), cut(json.dumps(dict(verification), default=str), MAX_ARGUMENTS),
             RequestState.PENDING.value))
        found = self.get(int(cur.lastrowid or 0))
        assert found is not None
        return found

    def get(self, request_id: int) -> TeardownRequest | None:
        """One request by id, or None."""
        row = self.conn.execute(_SELECT + " WHERE id = ?", (request_id,)).fetchone()
        return _request(row) if row is not None else None

    def listing(self, *, state: RequestState | None = None, instance: str | None = None,
                limit: int = MAX_LIST) -> list[TeardownRequest]:
        """Requests, newest first, optionally of one state and one instance."""
        where, args = [], []
        if state is not None:
            where.append("state = ?")
            args.append(state.value)
        if instance is not None:
            where.append("instance = ?")
            args.append(instance)
        sql = _SELECT + (" WHERE " + " AND ".join(where) if where else "") + \
            " ORDER BY id DESC LIMIT ?"
        return [_request(r) for r in self.conn.execute(sql, (*args, min(limit, MAX_LIST)))]

    def decide(self, request_id: int, state: RequestState, by: str, note: str = "",
               at: float | None = None) -> bool:
        """A person approved or refused a pending request on the teardown screen (the only
        caller). False when it was no longer pending."""
        if state is RequestState.PENDING:
            raise ValueError("a decision is approved or refused")
        cur = self.conn.execute(
            "UPDATE teardown_requests SET state = ?, decided_at = ?, decided_by = ?, note = ? "
            "WHERE id = ? AND state = ?",
            (state.value, time.time() if at is None else at, cut(by, MAX_WHO),
             cut(note, MAX_NOTE), request_id, RequestState.PENDING.value))
        return cur.rowcount == 1

    # -- the tool-call audit -------------------------------------------------------------------
    def audit_call(self, tool: str, arguments: Mapping[str, Any], who: str, ok: bool,
                   summary: str, at: float | None = None) -> None:
        """One tool call: its name, arguments (secrets removed, bounded), and outcome."""
        self.conn.execute(
            "INSERT INTO tool_calls (at, who, tool, arguments, ok, summary) VALUES (?, ?, ?, ?, ?, ?)",
            (time.time() if at is None else at, cut(who, MAX_WHO), cut(tool, MAX_VALUE),
             scrub_arguments(arguments), int(ok), cut(summary, MAX_SUMMARY)))

    def calls(self, limit: int = MAX_LIST) -> list[ToolCall]:
        """Audited calls, newest first."""
        rows = self.conn.execute("SELECT id, at, who, tool, arguments, ok, summary FROM tool_calls "
                                 "ORDER BY id DESC LIMIT ?", (min(limit, MAX_LIST),))
        return [ToolCall(int(i), float(a), str(w), str(t), str(g), bool(o), str(s))
                for i, a, w, t, g, o, s in rows]


_SELECT = ("SELECT id, at, instance, action, reason, who, verification, state, decided_at, "
           "decided_by, note FROM teardown_requests")


def _request(row: tuple[Any, ...]) -> TeardownRequest:
    rid, at, instance, action, reason, who, verification, state, decided_at, by, note = row
    try:
        doc = json.loads(verification)
    except ValueError:
        doc = {}
    try:
        parsed = RequestState(state)
    except ValueError:  # a state this cockpit does not know is not an approval
        parsed = RequestState.REFUSED
    return TeardownRequest(int(rid), float(at), str(instance), str(action), str(reason), str(who),
                           doc if isinstance(doc, dict) else {}, parsed,
                           None if decided_at is None else float(decided_at), str(by), str(note))
