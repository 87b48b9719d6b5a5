"""`cockpit watch`: the fleet service headless, made to run for weeks on an always-on machine.

One process per sweep: it watches every box (the same `Fleet` as the TUI), judges them once a
second (`Monitor`), writes what happened into the sweep's store and sends each material alert
through the configured channels. It prints one JSON object per line on stdout (structured log:
`ts`, `event`, and the event's fields; every text from a box is escaped by `json_text`), so
`journalctl`, `tee` or a log shipper can read it.

Signals: SIGTERM and SIGINT stop it cleanly (watchers closed, store flushed, lock released);
SIGHUP re-reads the sweep file (a broken file is reported and the old sweep kept). `--once`
takes one record from every box, judges, records and delivers, then exits: for cron. Its alert
latch comes from the store, so a condition that was already reported is not sent again on
every run.

It never runs a remote command other than the read-only probe, and never tears anything down.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from cockpit.models.alerts import Alert
from cockpit.models.events import FleetEvent, HostStateChanged, SnapshotTaken
from cockpit.models.text import json_text
from cockpit.services.alerts.notify import ChannelResult
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import LoadedSweep, load_sweep
from cockpit.services.config.yamlfile import ConfigError
from cockpit.services.store.lock import WriterBusy
from cockpit.services.watch.feed import REBASE_S, FeedWriter
from cockpit.services.watch.monitor import Monitor, Recorder

TICK_S = 1.0
"""How often every box is judged: the TUI repaints (and judges) at this pace too."""
ONCE_TIMEOUT_S = 60.0
"""`--once`: how long one box may take to answer before it is reported unreachable."""
DELIVERY_GRACE_S = 30.0
"""On stop (and after `--once`): how long alerts already being sent may still finish."""

EXIT_OK = 0
EXIT_ALERTS = 1
EXIT_INPUT = 2


class JsonLog:
    """Structured log lines: one JSON object per line, flushed at once (a crash loses none)."""

    def __init__(self, out: TextIO, clock: Callable[[], float] = time.time) -> None:
        self.out = out
        self.clock = clock

    def __call__(self, event: str, **fields: Any) -> None:
        stamp = datetime.fromtimestamp(self.clock(), UTC).isoformat(timespec="seconds")
        document = {"ts": stamp, "event": event, **fields}
        try:
            self.out.write(json_text(document, indent=None) + "\n")
            self.out.flush()
        except (BrokenPipeError, ValueError):
            pass  # the reader went away (a closed pipe); the watcher goes on


def alert_fields(alert: Alert) -> dict[str, Any]:
    """An alert as log fields (text from a box stays data: json_text escapes it)."""
    return {"instance": alert.instance, "kind": alert.kind, "text": alert.text,
            "detail": alert.detail}


@dataclass
class WatchOptions:
    """What `cockpit watch` was asked to do."""

    sweep_path: Path
    once: bool = False
    db_path: Path | None = None
    metrics: tuple[str, int] | None = None
    feed_path: Path | None = None
    """Where to keep records for following TUIs (None: no feed)."""


Opener = Callable[[LoadedSweep, Path | None], tuple[Recorder | None, Callable[[], None]]]
"""Opens the sweep's store as its one writer: (recorder, close). Raises `WatcherRunning`."""
DeliverFactory = Callable[[LoadedSweep], Callable[[Alert], Awaitable[Sequence[ChannelResult]]] | None]


MetricsServer = Callable[[str, int, Monitor], Callable[[], None]]
"""Starts the OpenMetrics endpoint over a monitor's trackers: (host, port, monitor) -> stop."""


class WatcherRunning(Exception):
    """Another watcher already writes this sweep's store."""


class Watch:
    """One running watcher: fleet, monitor, store, channels and the signal handlers."""

    def __init__(self, options: WatchOptions, loaded: LoadedSweep, log: JsonLog, *,
                 open_store: Opener | None = None,
                 deliver_for: DeliverFactory | None = None,
                 serve_metrics: MetricsServer | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.options = options
        self.loaded = loaded
        self.log = log
        self.clock = clock
        self.open_store = open_store
        self.deliver_for = deliver_for
        self.serve_metrics = serve_metrics
        self.tasks: set[asyncio.Task[Any]] = set()
        self.stopping = asyncio.Event()
        self.reload_requested = False
        self.recorder: Recorder | None = None
        self.feed: FeedWriter | None = None
        self.metrics_handle: Callable[[], None] | None = None
        """Records for TUIs that follow this watcher instead of probing (not with --once)."""
        self._close_store: Callable[[], None] = lambda: None
        deliver = deliver_for(loaded) if deliver_for is not None else None
        self.monitor = Monitor(loaded, load_rulebook(), clock=clock, deliver=deliver,
                               spawn=self._spawn)

    def _spawn(self, job: Awaitable[Any]) -> object:
        async def logged() -> None:
            results = await job
            for result in results or ():
                if isinstance(result, ChannelResult):
                    self.log("delivery", channel=result.channel, ok=result.ok,
                             attempts=result.attempts, error=result.error)

        task = asyncio.ensure_future(logged())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def _absorb(self, event: FleetEvent) -> None:
        if self.feed is not None:
            try:
                if isinstance(event, SnapshotTaken):
                    self.feed.add(event)
                else:
                    self.feed.state(event.state)
            except Exception as exc:  # the feed is a cache: failing it must not stop watching
                self.log("error", what="the follower feed could not be written",
                         reason=f"{type(exc).__name__}: {exc}"[:300])
        name = self.monitor.absorb(event)
        if name is None:
            self.log("error", what="an event could not be absorbed", reason=self.monitor.last_error)
        elif isinstance(event, HostStateChanged):
            state = event.state
            self.log("state", instance=state.instance, reachability=state.reachability.value,
                     detail=state.detail)

    def _tick(self) -> list[Alert]:
        errors = self.monitor.record_errors
        fresh = self.monitor.tick()
        for alert in fresh:
            self.log("alert", **alert_fields(alert))
        if self.monitor.record_errors != errors:
            self.log("error", what="the store could not be written",
                     reason=self.monitor.last_record_error)
        return fresh

    def _clients(self) -> list[Any]:
        """Read-only clients of the platforms this sweep's boxes are on (money alerts)."""
        from cockpit.services.platforms import sweep_clients

        return sweep_clients(self.loaded)

    def _open_store(self, loaded: LoadedSweep) -> None:
        if self.open_store is None:
            return
        try:
            self.recorder, self._close_store = self.open_store(loaded, self.options.db_path)
        except WriterBusy as exc:
            raise WatcherRunning(str(exc)) from exc
        if self.recorder is not None:
            self.monitor.attach_recorder(self.recorder)

    async def _drain(self) -> None:
        """Let alerts being sent finish (bounded), then stop waiting for them."""
        if not self.tasks:
            return
        _done, pending = await asyncio.wait(set(self.tasks), timeout=DELIVERY_GRACE_S)
        for task in pending:
            task.cancel()
        if pending:
            self.log("error", what=f"{len(pending)} deliveries still pending at exit were cancelled")

    # -- one round, for cron ----------------------------------------------------------------
    async def once(self) -> int:
        """One record from every box, judged, recorded and delivered; 1 if any alert is open."""
        from cockpit.services.platforms import poll_all
        from cockpit.services.transport.fleet import status_once

        self._open_store(self.loaded)
        try:
            sweep = self.loaded.sweep
            clients = self._clients()
            polled = poll_all(clients, {}, self.clock()) if clients else None
            results = await status_once(sweep, self.loaded.profiles, self.loaded.directory,
                                        timeout=ONCE_TIMEOUT_S, clock=self.clock)
            if polled is not None:
                self.monitor.truths = await polled
            for result in results:
                self._absorb(HostStateChanged(result.state))
                if result.snapshot is not None:
                    self._absorb(SnapshotTaken(result.snapshot))
            fresh = self._tick()
            await self._drain()
            active = self.monitor.latch.active
            self.log("round", instances=len(results), fresh_alerts=len(fresh),
                     open_alerts=len(active))
            return EXIT_ALERTS if active else EXIT_OK
        finally:
            self._close_store()

    # -- for weeks ----------------------------------------------------------------------------
    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop_signal, sig)
        loop.add_signal_handler(signal.SIGHUP, self._hup)

    def _remove_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(sig)

    def _stop_signal(self, sig: signal.Signals) -> None:
        self.log("stopping", signal=sig.name)
        self.stopping.set()

    def _hup(self) -> None:
        self.reload_requested = True

    def _reload(self) -> tuple[LoadedSweep, bool]:
        """Re-read the sweep file; on an error keep watching the old one and say why."""
        try:
            loaded = load_sweep(self.options.sweep_path)
        except ConfigError as exc:
            self.log("error", what="the sweep file could not be re-read; still watching the old one",
                     reason=str(exc))
            return self.loaded, False
        return loaded, True

    async def forever(self, *, started: Callable[[], None] | None = None) -> int:
        """Watch until SIGTERM/SIGINT (or `stopping` is set). Exit 0 on a clean stop."""
        from cockpit.services.transport.fleet import Fleet

        self._open_store(self.loaded)
        if self.options.feed_path is not None:
            self.feed = FeedWriter(self.options.feed_path)
        self._install_signals()
        metrics = None
        try:
            if self.options.metrics is not None:
                metrics = self._start_metrics(self.options.metrics)
            self.log("started", sweep=self.loaded.sweep.sweep,
                     instances=[i.name for i in self.loaded.sweep.instances],
                     sweep_file=str(self.options.sweep_path))
            if started is not None:
                started()
            while not self.stopping.is_set():
                clients = self._clients()
                money = asyncio.ensure_future(self.monitor.poll_platforms(clients)) if clients else None
                fleet = Fleet(self.loaded.sweep, self.loaded.profiles, self.loaded.directory,
                              clock=self.clock, rebase_s=REBASE_S if self.feed else 0.0)
                fleet.start()
                try:
                    await self._run_fleet(fleet)
                finally:
                    if money is not None:
                        money.cancel()
                        with contextlib.suppress(asyncio.CancelledError, Exception):
                            await money
                    await fleet.stop()
                if self.reload_requested and not self.stopping.is_set():
                    self.reload_requested = False
                    loaded, changed = self._reload()
                    if changed:
                        self.loaded = loaded
                        self.monitor.reload(loaded)
                        self.log("reloaded", instances=[i.name for i in loaded.sweep.instances])
            await self._drain()
            self.log("stopped")
            return EXIT_OK
        finally:
            if metrics is not None:
                with contextlib.suppress(Exception):
                    metrics()
            self._remove_signals()
            if self.feed is not None:
                self.feed.close()
            self._close_store()

    async def _run_fleet(self, fleet: Any) -> None:
        """Absorb events and tick until a stop or a reload is asked for."""
        events = fleet.events()
        next_event: asyncio.Task[FleetEvent] | None = None
        next_tick = time.monotonic() + TICK_S
        try:
            while not self.stopping.is_set() and not self.reload_requested:
                if next_event is None:
                    next_event = asyncio.ensure_future(anext(events))
                timeout = max(0.0, next_tick - time.monotonic())
                done, _ = await asyncio.wait({next_event}, timeout=min(timeout, 0.5))
                if next_event in done:
                    self._absorb(next_event.result())
                    next_event = None
                if time.monotonic() >= next_tick:
                    self._tick()
                    next_tick = time.monotonic() + TICK_S
        finally:
            if next_event is not None:
                next_event.cancel()
                with contextlib.suppress(asyncio.CancelledError, StopAsyncIteration):
                    await next_event

    def _start_metrics(self, where: tuple[str, int]) -> Callable[[], None]:
        """Serve OpenMetrics on `where`; the stop function."""
        if self.serve_metrics is None:
            raise RuntimeError("no metrics endpoint is available in this build")
        host, port = where
        stop = self.serve_metrics(host, port, self.monitor)
        self.metrics_handle = stop
        self.log("metrics", listen=str(getattr(stop, "url", f"{host}:{port}")))
        return stop


def systemd_unit(sweep_path: Path, *, executable: str | None = None,
                 extra: Sequence[str] = ()) -> str:
    """A `systemd --user` unit that keeps `cockpit watch SWEEP` running across reboots."""
    exe = executable or str(Path(sys.argv[0]).resolve())
    argv = [exe, "watch", str(sweep_path.resolve()), *extra]
    command = " ".join(shlex.quote(a) for a in argv)
    return (
        "# ~/.config/systemd/user/cockpit-watch.service\n"
        "# systemctl --user daemon-reload && systemctl --user enable --now cockpit-watch\n"
        "# loginctl enable-linger $USER   # keep it running after you log out\n"
        "[Unit]\n"
        "Description=cockpit watch: alerts and history for a training sweep\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "\n"
        "[Service]\n"
        f"ExecStart={command}\n"
        "ExecReload=/bin/kill -HUP $MAINPID\n"
        "Restart=on-failure\n"
        "RestartSec=30\n"
        "KillSignal=SIGTERM\n"
        "TimeoutStopSec=45\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )
