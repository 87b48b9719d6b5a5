"""Watch a sweep: one connection and one long-lived probe per box, ticks paced by the client.

A box whose link drops becomes "stale since T" and is reconnected with capped exponential
backoff. A lost connection says nothing about the remote run, so nothing here ever infers
"dead" from it, and nothing here ever changes anything on a box.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import asyncssh

from cockpit.models.durations import parse_duration
from cockpit.models.events import FleetEvent, HostStateChanged, SnapshotTaken
from cockpit.models.parse import parse_record
from cockpit.models.profile import Profile
from cockpit.models.snapshot import HostSnapshot, HostState, Reachability
from cockpit.models.sweep import Instance, SshSettings, Sweep
from cockpit.models.text import visible
from cockpit.services.transport import ssh
from cockpit.services.transport.probe import (
    ProbePlan,
    end_marker,
    probe_argv,
    probe_command,
    probe_stdin,
)
from cockpit.services.transport.remote import LOCAL_STREAM_LIMIT

log = logging.getLogger(__name__)

Clock = Callable[[], float]

RECORD_MAX = 2 * 1024 * 1024
"""The largest record read over SSH: asyncssh's default channel window (2 MiB), past which
its reader gives up. probe.sh bounds every section (logs share `LOG_BUDGET`) so a record
stays well inside it; one that does not is reported as such and the probe is restarted."""
MAX_REASON = 160
"""Characters of a bad record's reason kept (it is shown on the box and in `status`)."""


class ProbeLost(Exception):
    """The probe process ended or stopped answering (the connection may still be fine)."""


class BadRecord(Exception):
    """A record arrived but could not be used; the box is still watched."""


class ProbeChannel(Protocol):
    """A running probe: send a request, get its record back."""

    async def exchange(self, seq: int, request: bytes, timeout: float) -> bytes: ...

    async def close(self) -> None: ...


async def _read_record(reader: Any, seq: int, timeout: float) -> bytes:
    try:
        data: bytes = await asyncio.wait_for(reader.readuntil(end_marker(seq)), timeout)
    except asyncio.IncompleteReadError as exc:
        if len(exc.partial) >= RECORD_MAX // 2:  # asyncssh stops at its full window
            raise ProbeLost(f"a record larger than {RECORD_MAX // 1024} KiB "
                            f"({len(exc.partial)} bytes read)") from exc
        raise ProbeLost("the probe exited") from exc
    except (asyncio.LimitOverrunError, ValueError) as exc:  # the local stream's limit
        raise ProbeLost("a record larger than the local stream's limit") from exc
    except TimeoutError as exc:
        raise ProbeLost(f"no record within {timeout:.0f}s") from exc
    return data


class SshProbe:
    """The probe over an asyncssh connection (one session channel)."""

    def __init__(self, conn: Any, process: Any, slot: asyncio.Semaphore) -> None:
        self.conn = conn
        self.process = process
        self._slot: asyncio.Semaphore | None = slot

    @classmethod
    async def start(cls, conn: Any) -> SshProbe:
        """Start the remote probe process on `conn`, holding one of its channel slots."""
        slot = ssh.channel_slot(conn)
        await slot.acquire()
        try:
            process = await conn.create_process(probe_command(with_gpu=True), encoding=None)
            # The script goes on stdin, not in argv: `ps` on the box shows a short line.
            process.stdin.write(probe_stdin())
        except BaseException:
            slot.release()
            raise
        return cls(conn, process, slot)

    async def exchange(self, seq: int, request: bytes, timeout: float) -> bytes:
        self.process.stdin.write(request)
        return await _read_record(self.process.stdout, seq, timeout)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self.process.stdin.write_eof()
        with contextlib.suppress(Exception):
            self.process.close()
        if self._slot is not None:
            self._slot.release()
            self._slot = None


class LocalProbe:
    """The same probe run as a local subprocess; GPUs come from NVML instead of nvidia-smi."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls) -> LocalProbe:
        """Start the probe script locally (no SSH, no nvidia-smi)."""
        proc = await asyncio.create_subprocess_exec(
            *probe_argv(with_gpu=False), executable="/bin/sh",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, limit=LOCAL_STREAM_LIMIT,
        )
        assert proc.stdin is not None
        proc.stdin.write(probe_stdin())  # the script on stdin: `ps` shows `cockpit-probe -c …`
        return cls(proc)

    async def exchange(self, seq: int, request: bytes, timeout: float) -> bytes:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        if self.proc.returncode is not None:
            raise ProbeLost("the local probe exited")
        self.proc.stdin.write(request)
        await self.proc.stdin.drain()
        return await _read_record(self.proc.stdout, seq, timeout)

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        with contextlib.suppress(TimeoutError, ProcessLookupError):
            await asyncio.wait_for(self.proc.wait(), 2)
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with jitter, so a fleet does not reconnect in lockstep."""

    base: float = 1.0
    cap: float = 15.0
    jitter: float = 0.2

    def delay(self, attempt: int) -> float:
        """Seconds to wait before reconnect attempt number `attempt` (1-based)."""
        raw = min(self.cap, self.base * (2 ** max(0, attempt - 1)))
        return float(raw * (1 + random.uniform(-self.jitter, self.jitter)))


def _failure_detail(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text != type(exc).__name__ else text


class HostWatcher:
    """Connection, probe and state of one instance."""

    def __init__(
        self,
        instance: Instance,
        profile: Profile,
        settings: SshSettings,
        sweep_dir: Path,
        *,
        emit: Callable[[FleetEvent], None] | None = None,
        clock: Clock = time.time,
        backoff: Backoff | None = None,
        record_timeout: float = 20.0,
        record_limit: float = 300.0,
        rebase_every: int = 0,
    ) -> None:
        self.instance = instance
        self.profile = profile
        self.settings = settings
        self.sweep_dir = sweep_dir
        self.emit = emit or (lambda event: None)
        self.clock = clock
        self.backoff = backoff or Backoff()
        self.record_timeout = record_timeout
        """Seconds without the awaited record before the box shows as stale (data this old)."""
        self.record_limit = record_limit
        """Seconds before a probe that still has not answered is given up and restarted."""
        self.plan = ProbePlan(instance, profile, rebase_every=rebase_every)
        self.conn: Any = None
        self.probe: ProbeChannel | None = None
        self.probe_restarts = 0
        self.last_snapshot: HostSnapshot | None = None
        self.state = HostState(instance.name, Reachability.CONNECTING, clock())
        self._ever_connected = False

    def _set(self, reach: Reachability, detail: str = "", **extra: Any) -> None:
        now = self.clock()
        keep_since = reach == self.state.reachability and reach != Reachability.CONNECTED
        since = self.state.since if keep_since else now
        attempts = extra.pop("attempts", self.state.attempts)
        self.state = HostState(self.instance.name, reach, since, detail, attempts=attempts,
                               bad_records=self.state.bad_records,
                               bad_reason=self.state.bad_reason, crashes=self.state.crashes,
                               **extra)
        self.emit(HostStateChanged(self.state))

    def _bad(self, reason: str) -> None:
        """Count a record (or part of one) that could not be used, and say why."""
        self.state = dataclasses.replace(
            self.state, bad_records=self.state.bad_records + 1,
            bad_reason=visible(reason[:MAX_REASON]))
        self.emit(HostStateChanged(self.state))

    def crashed(self, exc: BaseException, *, restarting: bool = True) -> None:
        """The watcher died of an unexpected error: shown as stale with the error and
        counted; the fleet restarts it (`restarting`)."""
        log.error("watcher of %s crashed", self.instance.name, exc_info=exc)
        self.state = dataclasses.replace(self.state, crashes=self.state.crashes + 1)
        then = f"; restarted {self.state.crashes}x" if restarting else ""
        self._set(Reachability.STALE,
                  visible(f"the watcher crashed ({_failure_detail(exc)})"[:MAX_REASON]) + then)

    async def connect(self) -> bool:
        """One connection attempt; updates the state and returns True when connected."""
        try:
            if self.instance.is_local:
                self.probe = await LocalProbe.start()
            else:
                target = ssh.build_target(self.instance, self.settings, self.sweep_dir)
                self.conn = await ssh.connect(target)
                self.probe = await SshProbe.start(self.conn)
        except ssh.HostKeyProblem as exc:
            reach = Reachability.KEY_CHANGED if exc.changed else Reachability.NEEDS_APPROVAL
            self._set(reach, str(exc), host_key=exc.info, attempts=self.state.attempts + 1)
            await self._drop()
            return False
        except asyncssh.PermissionDenied as exc:
            self._set(Reachability.AUTH_FAILED, _failure_detail(exc),
                      attempts=self.state.attempts + 1)
            await self._drop()
            return False
        except (OSError, asyncssh.Error, TimeoutError, ValueError) as exc:
            self._lost(exc)
            await self._drop()
            return False
        self._ever_connected = True
        self._set(Reachability.CONNECTED, attempts=0)
        return True

    def _lost(self, exc: BaseException) -> None:
        reach = Reachability.STALE if self._ever_connected else Reachability.UNREACHABLE
        self._set(reach, _failure_detail(exc), attempts=self.state.attempts + 1)

    async def _drop(self) -> None:
        if self.probe is not None:
            await self.probe.close()
            self.probe = None
        if self.conn is not None:
            self.conn.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.conn.wait_closed(), 2)
            self.conn = None

    async def _exchange(self, probe: ProbeChannel) -> tuple[bytes, float]:
        """One request/record round trip and how long it took, in milliseconds.

        A record late by `record_timeout` makes the box stale but keeps waiting on the same
        probe: the connection is alive (keepalives catch a dead link within seconds), and a
        host that is merely slow (overloaded, a `df` on a sluggish mount) only gets slower if
        it is also made to accept a new connection and start a new probe. At 200 hosts on
        one small machine, reconnecting on a 20 s timeout fed a storm of handshakes. Only
        after `record_limit` is the probe given up.
        """
        seq, request = self.plan.request()
        started = time.perf_counter()
        pending = asyncio.ensure_future(probe.exchange(seq, request, self.record_limit))
        try:
            done, _ = await asyncio.wait({pending}, timeout=self.record_timeout)
            if not done:
                self._set(Reachability.STALE,
                          f"no record for {self.record_timeout:.0f}s; the connection is up and "
                          "the probe still runs (an overloaded host or a slow disk?)")
            record = await pending
        finally:
            if not pending.done():
                pending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await pending
        if self.state.reachability is not Reachability.CONNECTED:
            self._set(Reachability.CONNECTED, attempts=0)
        return record, (time.perf_counter() - started) * 1000.0

    async def tick(self) -> HostSnapshot:
        """Ask the probe for one record. Restarts a dead probe once on a live connection."""
        if self.probe is None:
            raise ProbeLost("not connected")
        try:
            record, elapsed_ms = await self._exchange(self.probe)
        except ProbeLost:
            if self.conn is None or self.conn.is_closed():
                raise
            # The connection is alive but the probe died (killed, OOM, ...): restart it.
            self.probe_restarts += 1
            await self.probe.close()
            self.probe = await SshProbe.start(self.conn)
            record, elapsed_ms = await self._exchange(self.probe)
        try:
            snap = parse_record(record, instance=self.instance.name, observed_at=self.clock(),
                                probe_ms=elapsed_ms)
        except Exception as exc:  # parse_record is total; this is the last line of defence
            self._bad(f"record {self.plan.seq}: {_failure_detail(exc)}")
            raise BadRecord(self.state.bad_reason) from exc
        if snap.bad:
            more = f" (+{len(snap.bad) - 1} more)" if len(snap.bad) > 1 else ""
            self._bad(f"record {snap.seq}: {snap.bad[0]}{more}")
        if self.instance.is_local:
            from cockpit.services.transport.nvml import read_gpus

            snap = dataclasses.replace(snap, gpu=await asyncio.to_thread(read_gpus))
        marks = self.plan.marks
        self.plan.absorb(snap)
        if marks == "rebase":
            # The marks were asked for again only so this record can start a follower's
            # replay; this box's own model has them already and must not read them twice.
            snap = dataclasses.replace(snap, queue=dataclasses.replace(snap.queue, queue_marks=None))
        self.last_snapshot = snap
        self.emit(SnapshotTaken(snap, record, base=bool(marks)))
        return snap

    async def run(self, interval: float) -> None:
        """Watch forever: connect, tick every `interval` after the previous tick finished,
        and reconnect with backoff when the link is lost."""
        while True:
            if self.probe is None and not await self.connect():
                await asyncio.sleep(self.backoff.delay(self.state.attempts))
                continue
            try:
                await self.tick()
            except BadRecord:
                pass  # counted and shown; the next record may be fine
            except (ProbeLost, OSError, asyncssh.Error, TimeoutError) as exc:
                self._lost(exc)
                await self._drop()
                await asyncio.sleep(self.backoff.delay(self.state.attempts))
                continue
            await asyncio.sleep(interval)

    async def close(self) -> None:
        """Close the probe and connection. Touches nothing on the remote."""
        await self._drop()


STALE_AFTER_RECORDS = 3
"""A box is stale once its record is this many intervals late (a missed record can be a slow
`df`; three in a row is a box whose numbers can no longer be trusted as current)."""
MIN_STALE_S = 5.0
"""...but never sooner than this: a 1 s interval must not flap on one slow tick."""


class Fleet:
    """All watchers of a sweep, with one stream of events for the UI."""

    def __init__(
        self,
        sweep: Sweep,
        profiles: dict[str, Profile],
        sweep_dir: Path,
        *,
        clock: Clock = time.time,
        backoff: Backoff | None = None,
        rebase_s: float = 0.0,
    ) -> None:
        self.sweep = sweep
        self.interval = parse_duration(sweep.interval)
        rebase_every = max(1, round(rebase_s / self.interval)) if rebase_s > 0 else 0
        self.queue: asyncio.Queue[FleetEvent] = asyncio.Queue()
        self.backoff = backoff or Backoff()
        # A box whose record is this late shows as stale (the link may be fine: the numbers
        # are simply this old), well before the keepalive drops a frozen link.
        record_timeout = max(MIN_STALE_S, STALE_AFTER_RECORDS * self.interval)
        self.watchers = {
            inst.name: HostWatcher(inst, profiles[inst.profile], sweep.ssh, sweep_dir,
                                   emit=self.queue.put_nowait, clock=clock, backoff=backoff,
                                   rebase_every=rebase_every, record_timeout=record_timeout)
            for inst in sweep.instances
        }
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def start(self) -> None:
        """Start watching every box."""
        for name, watcher in self.watchers.items():
            self._tasks[name] = asyncio.create_task(self._supervised(watcher))

    async def _supervised(self, watcher: HostWatcher) -> None:
        """Run one box's watcher; if it dies of an unexpected error, show it and restart it.

        One box's watcher dying used to leave that box "connected" while its data aged,
        silently. Its state now says the watcher crashed (stale, with the error and a
        count) until its next record, and the other boxes are never touched.
        """
        while True:
            try:
                await watcher.run(self.interval)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # supervision: any error, one box
                watcher.crashed(exc)
                with contextlib.suppress(Exception):
                    await watcher.close()
                await asyncio.sleep(self.backoff.delay(watcher.state.crashes))

    async def reconnect(self, name: str) -> None:
        """Drop one box's connection and try again now, skipping any backoff wait.

        Used after a host key was approved, or when the user asks. Touches nothing remote.
        """
        watcher = self.watchers[name]
        task = self._tasks.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await watcher.close()
        watcher.state = dataclasses.replace(watcher.state, attempts=0)
        self._tasks[name] = asyncio.create_task(self._supervised(watcher))

    async def events(self) -> AsyncIterator[FleetEvent]:
        """Every state change and snapshot, in arrival order."""
        while True:
            yield await self.queue.get()

    async def stop(self) -> None:
        """Stop all watchers and close their connections."""
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await asyncio.gather(*(w.close() for w in self.watchers.values()))


@dataclass(frozen=True)
class InstanceStatus:
    """One instance's answer to `cockpit status`."""

    instance: Instance
    state: HostState
    snapshot: HostSnapshot | None


async def status_once(
    sweep: Sweep, profiles: dict[str, Profile], sweep_dir: Path, *, timeout: float = 30.0,
    clock: Clock = time.time,
) -> list[InstanceStatus]:
    """Connect to every box, take one probe record from each, disconnect."""

    async def one(watcher: HostWatcher) -> InstanceStatus:
        snap = None
        try:
            async with asyncio.timeout(timeout):
                if await watcher.connect():
                    try:
                        snap = await watcher.tick()
                    except BadRecord:
                        pass  # counted on the state: status shows it
                    except (ProbeLost, OSError, asyncssh.Error) as exc:
                        watcher._lost(exc)
        except TimeoutError:
            watcher._lost(TimeoutError(f"no answer within {timeout:.0f}s"))
        except Exception as exc:  # one box's surprise is that box's row, never a traceback
            watcher.crashed(exc, restarting=False)
        finally:
            await watcher.close()
        return InstanceStatus(watcher.instance, watcher.state, snap)

    watchers = [
        HostWatcher(inst, profiles[inst.profile], sweep.ssh, sweep_dir, clock=clock)
        for inst in sweep.instances
    ]
    return list(await asyncio.gather(*(one(w) for w in watchers)))
