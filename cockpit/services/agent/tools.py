"""What an agent may do with a sweep: read everything, act without destroying, and *ask*.

`AgentTools` holds one loaded sweep and its store's `RequestBook`. Each method returns the
same JSON document the CLI's `--json` prints for the same question (status, classify,
preflight, billing, teardown --dry-run, verify, launch/resume/rerun), built by the same
service functions, plus a bounded log slice and the teardown requests. The MCP layer
(`server.py`) only names these methods as tools and audits each call.

What is not here is the point: nothing in this package imports the teardown executor
(`custody.teardown`), the custody flow that drives it (`custody.flow`), or the gate's
approval; the request it stores is inert until a person approves it on the TUI's teardown
screen. `tests/test_mcp_safety.py` walks the imports to keep it so.

Every argument is data from an untrusted client: instance and action names must match the
sweep and its profile exactly, a cell name must be a plain file-name component, byte ranges
and lists are bounded by the constants below.
"""

from __future__ import annotations

import io
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from cockpit.models.alerts import Alert
from cockpit.models.gate import need_of
from cockpit.models.sweep import Instance
from cockpit.models.text import visible
from cockpit.services.agent.requests import MAX_REASON, RequestBook, RequestState
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.services.custody.plan import lock_line, plan_json
from cockpit.services.custody.verify import read_marker
from cockpit.services.transport.remote import Box

STATUS_TIMEOUT = 20.0
"""Seconds one box may take to answer a status read (a dead box must not hang the agent)."""
MAX_SLICE = 64 << 10
"""Bytes one log slice returns at most: a screenful of context for a model, not a download."""
FAILURE_TAIL = 256 << 10
"""Bytes read from the end of each failed cell's log to classify it (as the verify screen)."""
MAX_FAILED_CELLS = 20
"""Failed cells classified per call; the rest are listed by name only."""
MAX_RERUN_CELLS = 100
"""Cells one rerun may name."""
MAX_ARG = 200
"""Characters of a name argument (instance, action, cell) shown back in an error."""
CELL_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._+=@-]{0,199}")
"""A cell name as a log file name: one plain path component (no `/`, no leading dot)."""
QUEUE_LOG = "queue_log"
"""The `cell` of `log_slice` that names the queue's master log instead of a run log."""


class ToolRefused(Exception):
    """A call the cockpit refuses (unknown name, bad range, a service's refusal), with why."""


def _shown(value: object) -> str:
    return visible(str(value), limit=MAX_ARG)


class AgentTools:
    """The tools of one sweep. Not thread-safe: one MCP session drives it on one loop."""

    def __init__(self, loaded: LoadedSweep, book: RequestBook, *,
                 status_timeout: float = STATUS_TIMEOUT) -> None:
        self.loaded = loaded
        self.book = book
        self.status_timeout = status_timeout
        self._pool: ProcessPoolExecutor | None = None

    def close(self) -> None:
        """Stop the verification workers (if any were started)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    # -- helpers ---------------------------------------------------------------------------
    @property
    def sweep_name(self) -> str:
        """The sweep's name."""
        return self.loaded.sweep.sweep

    def instance(self, name: object) -> Instance:
        """The sweep's instance named exactly `name`, or a refusal."""
        if isinstance(name, str):
            for inst in self.loaded.sweep.instances:
                if inst.name == name:
                    return inst
        known = ", ".join(i.name for i in self.loaded.sweep.instances)
        raise ToolRefused(f"no instance {_shown(name)!r} in the sweep (instances: {known})")

    @property
    def pull_dir(self) -> Path:
        """Where verified cells are pulled."""
        return (self.loaded.directory / self.loaded.sweep.pull_dir).resolve()

    async def _box(self, inst: Instance) -> Box:
        from cockpit.services.custody.verify import open_box
        from cockpit.services.transport import ssh

        return await open_box(inst, lambda i: ssh.build_target(
            i, self.loaded.sweep.ssh, self.loaded.directory))

    async def _status(self, insts: list[Instance]) -> list[Any]:
        from cockpit.services.transport.fleet import status_once

        sweep = self.loaded.sweep.model_copy(update={"instances": insts})
        return await status_once(sweep, self.loaded.profiles, self.loaded.directory,
                                 timeout=self.status_timeout)

    # -- read ------------------------------------------------------------------------------
    async def fleet_status(self) -> dict[str, Any]:
        """`cockpit status --json`: one probe record per box."""
        from cockpit.services.alerts.report import status_document

        return status_document(await self._status(list(self.loaded.sweep.instances)), self.sweep_name)

    async def box_detail(self, instance: str) -> dict[str, Any]:
        """One box's `status --json` entry (GPU, disks and inodes, queue cells with their
        evidence) and, from the store, its judgement episodes and classified events."""
        from cockpit.services.alerts.report import status_document, to_jsonable

        inst = self.instance(instance)
        doc: dict[str, Any] = status_document(await self._status([inst]),
                                              self.sweep_name)["instances"][0]
        doc["judgements"], doc["events"], doc["history_note"] = [], [], ""
        db = self.book.path
        try:
            from cockpit.services.store.db import StoreReader

            with StoreReader(db) as reader:
                doc["judgements"] = to_jsonable(reader.judgements(instance=inst.name, limit=50))
                doc["events"] = to_jsonable(reader.events(instance=inst.name, limit=50))
        except Exception as exc:  # no store yet, or one being upgraded: said, not fatal
            doc["history_note"] = f"no history from the store: {visible(str(exc))}"
        return doc

    async def failures(self, instance: str) -> dict[str, Any]:
        """`cockpit classify --json` over the tail of each failed cell's run log."""
        from cockpit.services.alerts.classify import FileReport, classify_stream, report_json
        from cockpit.services.alerts.report import queue_view_of
        from cockpit.services.config.rulebook import load_rulebook
        from cockpit.services.transport.logread import open_log_file

        inst = self.instance(instance)
        if not inst.run_logs:
            raise ToolRefused(f"{inst.name}: the sweep names no run_logs folder")
        result = (await self._status([inst]))[0]
        if result.snapshot is None:
            raise ToolRefused(f"{inst.name}: not reachable ({visible(result.state.detail)})")
        failed = [c.name for c in queue_view_of(inst, result.snapshot).failed]
        rulebook = load_rulebook()
        reports = []
        box = await self._box(inst)
        try:
            for cell in failed[:MAX_FAILED_CELLS]:
                path = f"{inst.run_logs.rstrip('/')}/{cell}.log"
                report = FileReport(path)
                reports.append(report)
                if not CELL_NAME.fullmatch(cell):
                    report.error = "not a plain cell name"
                    continue
                try:
                    log = await open_log_file(box, path)
                    try:
                        size = await log.size()
                        start = max(0, size - FAILURE_TAIL)
                        data = await log.read(size - start, start)
                    finally:
                        await log.close()
                except Exception as exc:  # a missing or unreadable log is reported per cell
                    report.error = f"cannot read: {exc}"
                    continue
                classify_stream(rulebook, io.BytesIO(data[:FAILURE_TAIL]), report)
        finally:
            await box.close()
        doc = report_json(reports)
        doc.update({"instance": inst.name, "failed_cells": failed,
                    "tail_bytes": FAILURE_TAIL, "not_classified": failed[MAX_FAILED_CELLS:]})
        return doc

    async def log_slice(self, instance: str, cell: str, start: int = -MAX_SLICE,
                        length: int = MAX_SLICE) -> dict[str, Any]:
        """Bytes `[start, start + length)` of a cell's run log (`queue_log`: the master log);
        a negative `start` counts from the end. At most `MAX_SLICE` bytes; the text comes
        back with every control character made visible."""
        from cockpit.services.transport.logread import open_log_file

        inst = self.instance(instance)
        if not isinstance(start, int) or not isinstance(length, int) or isinstance(start, bool):
            raise ToolRefused("start and length are integers")
        if length < 0:
            raise ToolRefused("length must be >= 0")
        if cell == QUEUE_LOG:
            if not inst.queue_log:
                raise ToolRefused(f"{inst.name}: the sweep names no queue_log")
            path = inst.queue_log
        else:
            if not isinstance(cell, str) or not CELL_NAME.fullmatch(cell):
                raise ToolRefused(f"{_shown(cell)!r} is not a plain cell name")
            if not inst.run_logs:
                raise ToolRefused(f"{inst.name}: the sweep names no run_logs folder")
            path = f"{inst.run_logs.rstrip('/')}/{cell}.log"
        length = min(length, MAX_SLICE)
        box = await self._box(inst)
        try:
            try:
                log = await open_log_file(box, path)
            except Exception as exc:
                raise ToolRefused(f"{inst.name}: cannot open {visible(path)}: {visible(str(exc))}") from exc
            try:
                size = await log.size()
                first = max(0, size + start) if start < 0 else min(start, size)
                stop = min(size, first + length)
                data = await log.read(stop - first, first) if stop > first else b""
            finally:
                await log.close()
        finally:
            await box.close()
        data = data[:MAX_SLICE]
        return {"instance": inst.name, "path": path, "size": size, "start": first,
                "stop": first + len(data), "bytes": len(data), "more_before": first > 0,
                "more_after": first + len(data) < size, "max_slice": MAX_SLICE,
                "text": visible(data.decode("utf-8", errors="surrogateescape"),
                                one_line=False, limit=0)}

    async def preflight(self, instance: str | None = None) -> dict[str, Any]:
        """`cockpit preflight --json` (one box, or all)."""
        from cockpit.services.queue import preflight as svc

        chosen = [self.instance(instance)] if instance else list(self.loaded.sweep.instances)
        reports = await svc.preflight(self.loaded.sweep, self.loaded.profiles,
                                      self.loaded.directory, chosen)
        return {"sweep": self.sweep_name, "instances": [svc.report_json(r) for r in reports]}

    async def billing(self, offline: bool = False) -> dict[str, Any]:
        """`cockpit billing --json [--offline]`: prices, the platforms' word, money clocks."""
        from cockpit.models.billing import bill_json
        from cockpit.services.platforms import headless_bill

        return bill_json(await headless_bill(self.loaded, offline=offline))

    def teardown_plan(self, instance: str) -> dict[str, Any]:
        """`cockpit teardown --dry-run --json`: every action with what it keeps, destroys and
        needs, and the gate as the last receipt left it. Runs nothing."""
        inst = self.instance(instance)
        return plan_json(self.sweep_name, inst, self.loaded.profiles[inst.profile], self.pull_dir)

    # -- act, never destroying -----------------------------------------------------------------
    async def verify(self, instance: str) -> dict[str, Any]:
        """`cockpit verify --json --instance NAME`: roster, manifest, pull, hash, safe load;
        writes the receipt at N/N. Unlocks nothing: every TUI session's gate starts locked
        and re-verifies before a teardown."""
        from cockpit.services.custody.verify import (
            VerifyReport,
            make_pool,
            pull_folder,
            report_json,
            run_verification,
        )

        inst = self.instance(instance)
        if self._pool is None:
            self._pool = make_pool(quiet=True)
        try:
            box = await self._box(inst)
        except Exception as exc:  # reported like the CLI does
            report = VerifyReport(inst.name, error=f"cannot connect: {exc}")
        else:
            try:
                report = await run_verification(box, inst, pull_folder(self.pull_dir, inst.name),
                                                self.sweep_name, self._pool)
            finally:
                await box.close()
        return {"sweep": self.sweep_name, "instances": [report_json(report)]}

    async def queue(self, instance: str, verb: str, cells: list[str] | None = None) -> dict[str, Any]:
        """`cockpit launch|resume|rerun --json`: the existing queue control (never `stop`)."""
        from cockpit.services.queue.control import control
        from cockpit.services.queue.launch import LaunchRefused

        if verb not in ("launch", "resume", "rerun"):
            raise ToolRefused(f"{_shown(verb)!r} is not an agent's queue action")
        inst = self.instance(instance)
        if verb == "rerun" and (not cells or len(cells) > MAX_RERUN_CELLS or not all(
                isinstance(c, str) and CELL_NAME.fullmatch(c) for c in cells)):
            raise ToolRefused(f"rerun needs 1..{MAX_RERUN_CELLS} plain cell names")
        box = await self._box(inst)
        try:
            result = await control(box, inst, self.loaded.profiles[inst.profile], self.sweep_name,
                                   verb, cells=list(cells) if verb == "rerun" and cells else None)
        except LaunchRefused as exc:
            raise ToolRefused(f"refused: {exc}") from exc
        finally:
            await box.close()
        return {"instance": inst.name, "action": verb, "result": result}

    # -- ask -------------------------------------------------------------------------------------
    def verification_state(self, inst: Instance) -> dict[str, Any]:
        """What the last receipt says now (stored with a request: what the agent saw)."""
        marker = read_marker(self.pull_dir / inst.name)
        keep = ("loaded", "expected", "verified_at_utc", "manifest_sha256")
        return {"gate": lock_line(self.pull_dir, inst),
                "receipt": {k: marker.get(k) for k in keep} if marker else None}

    async def request_teardown(self, instance: str, action: str, reason: str, who: str) -> dict[str, Any]:
        """Store a pending request for a person to decide on the teardown screen, and send
        it on the sweep's channels. Runs nothing; no argument changes that."""
        from cockpit.services.alerts.notify import Notifier

        inst = self.instance(instance)
        profile = self.loaded.profiles[inst.profile]
        chosen = next((a for a in profile.teardown.actions
                       if isinstance(action, str) and a.id == action), None)
        if chosen is None:
            ids = ", ".join(a.id for a in profile.teardown.actions)
            raise ToolRefused(f"{inst.name} ({profile.platform}) has no teardown action "
                              f"{_shown(action)!r} (actions: {ids})")
        if not isinstance(reason, str) or not reason.strip():
            raise ToolRefused("a request needs a reason a person can judge")
        state = self.verification_state(inst)
        state["needs"] = need_of(chosen).value
        request = self.book.add(inst.name, chosen.id, reason[:MAX_REASON], who, state)
        alert = Alert(("teardown-request", inst.name, str(request.id)), inst.name,
                      "teardown-request",
                      visible(f"{inst.name}: {who} asks to {chosen.label} (request #{request.id}): "
                              f"{reason}", limit=MAX_REASON),
                      "a person approves or refuses it on the cockpit's teardown screen "
                      "(fresh N/N, then the instance name typed)")
        results = await Notifier(self.loaded.sweep.alerts, self.sweep_name).deliver(alert)
        return {"request": request.document(),
                "channels": [{"channel": r.channel, "ok": r.ok, "error": r.error or None}
                             for r in results],
                "note": "nothing was run: only a person can approve this, on the cockpit's "
                        "teardown screen, after a fresh N/N and typing the instance name; "
                        "poll get_request for its state"}

    def get_request(self, request_id: int) -> dict[str, Any]:
        """One request's state (pending, approved or refused)."""
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            raise ToolRefused("a request id is an integer")
        found = self.book.get(request_id)
        if found is None:
            raise ToolRefused(f"no request #{request_id}")
        return {"request": found.document()}

    def list_requests(self, state: str | None = None) -> dict[str, Any]:
        """Requests, newest first (one state, or all)."""
        try:
            wanted = RequestState(state) if state else None
        except ValueError as exc:
            raise ToolRefused(f"state is one of {[s.value for s in RequestState]}") from exc
        return {"requests": [r.document() for r in self.book.listing(state=wanted)]}
