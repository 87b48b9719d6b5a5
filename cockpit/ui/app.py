"""The cockpit Textual app: fleet overview, box screens, banners, host keys, themes.

Widgets never await SSH: one async worker (never a thread worker; asyncssh is bound to the
app's loop) consumes the fleet's events and feeds pure `HostTracker`s; a 1 Hz timer then
repaints only the hosts that changed, so a burst of records becomes one repaint.
Quitting closes connections and touches nothing on any box.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import PurePath
from typing import Any, ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.notifications import SeverityLevel
from textual.screen import ModalScreen, Screen
from textual.worker import Worker, WorkerState

from cockpit.models.alerts import Alert
from cockpit.models.custody import FailureCause
from cockpit.models.events import FleetEvent, HostStateChanged
from cockpit.models.gate import ApprovedPlan, GateError, link_group
from cockpit.models.history import HistoryItem, merge
from cockpit.models.rules import Rulebook
from cockpit.models.snapshot import Reachability
from cockpit.models.sweep import Instance
from cockpit.models.text import visible
from cockpit.models.trend import Trend, resample
from cockpit.services.config.acks import AckStore
from cockpit.services.config.resources import shipped_dir
from cockpit.services.config.rulebook import load_rulebook
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.services.config.yamlfile import ConfigError
from cockpit.services.custody.flow import Custody
from cockpit.services.custody.verify import make_pool, open_box, pull_folder
from cockpit.services.platforms.base import PlatformClient
from cockpit.services.transport import ssh
from cockpit.services.transport.fleet import Fleet
from cockpit.services.transport.remote import Box, SshBox
from cockpit.services.watch.monitor import Monitor
from cockpit.services.watch.wiring import Session, deliver_for
from cockpit.ui.box import BoxScreen
from cockpit.ui.commands import CockpitCommands
from cockpit.ui.custody import VerifyScreen
from cockpit.ui.fleet import FleetScreen
from cockpit.ui.modals import DangerBanner, HelpScreen, HostKeyScreen
from cockpit.ui.render import Palette
from cockpit.ui.themes import DEFAULT_THEME, shipped_themes

TREND_REFRESH_S = 30.0
"""How often a box screen's whole-run trend re-reads the store (a column spans minutes)."""
EventSource = Callable[[], AsyncIterator[FleetEvent]]
REPAINT_S = 1.0
"""Repaint at most once a second: every box's record in that second lands in one repaint."""


SLURM_POLL_S = 10.0
"""How often a Slurm instance's array job is read with squeue/sacct."""


class CockpitApp(App[int]):
    """Watch a sweep: fleet table, box panels, danger banners, host keys."""

    TITLE = "cockpit"
    CSS_PATH: ClassVar[list[str | PurePath]] = [shipped_dir("themes") / "cockpit.tcss"]
    COMMANDS = App.COMMANDS | {CockpitCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit", tooltip="Quit (touches no remote)"),
        Binding("question_mark", "help", "Help"),
        # `T`, not `t`: `t` is Teardown on the verify screen (one meaning per key).
        Binding("T", "next_theme", "Theme", show=False),
        Binding("exclamation_mark", "events", "Events", show=False,
                tooltip="Events: what happened, newest first"),
        Binding("A", "requests", "Agent requests", show=False,
                tooltip="Teardown requests from agents (cockpit mcp); decided on the teardown screen"),
        Binding("J", "jobs", "Job view", show=False,
                tooltip="Job view: the selected box's distributed job (jobs: in the sweep) as one job"),
    ]

    def __init__(
        self,
        loaded: LoadedSweep,
        *,
        theme: str | None = None,
        source: EventSource | None = None,
        clock: Callable[[], float] = time.time,
        acks: AckStore | None = None,
        banners: bool = True,
        rulebook: Rulebook | None = None,
        session: Session | None = None,
        metrics: tuple[str, int] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.loaded = loaded
        self.clock = clock
        self.source = source
        self._replayed = source is not None
        """Events come from a test or a replay: no platform API is asked (no real keys)."""
        self.acks = acks if acks is not None else AckStore()
        self.banners = banners
        self.fleet: Fleet | None = None
        self.rulebook = rulebook if rulebook is not None else load_rulebook()
        self.monitor = Monitor(loaded, self.rulebook, clock=clock,
                               deliver=deliver_for(loaded), spawn=self._spawn_delivery)
        self.trackers = self.monitor.trackers
        self.dirty: set[str] = set()
        self.cockpit_themes: list[str] = []
        for spec in shipped_themes():
            self.register_theme(spec)
            self.cockpit_themes.append(spec.name)
        self.theme = theme or DEFAULT_THEME
        self.palette = Palette.from_variables(self.theme_variables)
        self._modals: deque[tuple[Callable[[], ModalScreen[Any]], Callable[[Any], None]]] = deque()
        self._prompted_keys: set[tuple[str, str, str]] = set()
        self.repaints = 0
        self.fleet_errors = 0
        """Fleet events that could not be absorbed (shown and dropped)."""
        self.fleet_crashes = 0
        """Times the fleet worker died and was restarted (shown in the title)."""
        self.first_frame_at: float | None = None
        self.custody: dict[str, Custody] = {}
        self.alerts_fired: list[Alert] = []
        self.history_reader: Callable[[str | None], list[HistoryItem]] | None = None
        """Reads the store's history for the events list (set when a store is open)."""
        self.history_where = ""
        self.history_error = ""
        self.session = session
        self._channel_warned: dict[str, str] = {}
        self._trend_cache: dict[tuple[str, str], tuple[float, list[tuple[float, float]]]] = {}
        """The store side of this session (writer, or follower of a `cockpit watch`)."""
        self.metrics_at = metrics
        self.metrics_handle: Callable[[], None] | None = None
        if session is not None:
            if self.source is None:
                self.source = session.source
            if session.recorder is not None:
                self.monitor.attach_recorder(session.recorder)
            self.history_reader = session.history
            self.history_where = str(session.db)
        self._pool: ProcessPoolExecutor | None = None

    def get_default_screen(self) -> Screen[Any]:
        return FleetScreen()

    def on_mount(self) -> None:
        self.sub_title = self.loaded.sweep.sweep
        if self.session is not None and self.session.note:
            self.sub_title = visible(f"{self.loaded.sweep.sweep} - {self.session.note}"[:200])
        if self.metrics_at is not None:
            from cockpit.services.watch.wiring import serve_metrics

            try:
                self.metrics_handle = serve_metrics(*self.metrics_at, self.monitor)
            except OSError as exc:
                self.notify(f"--metrics: cannot listen on {self.metrics_at[0]}:{self.metrics_at[1]}: "
                            f"{exc}", title="cockpit", severity="error", timeout=20)
        # theme_variables reflect the chosen theme only once the app is running.
        self.palette = Palette.from_variables(self.theme_variables)
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.set_interval(REPAINT_S, self.repaint)
        if self.banners:
            seen: set[str] = set()
            for tracker in self.trackers.values():
                platform = tracker.profile.platform
                if platform not in seen:
                    seen.add(platform)
                    self.show_banner(platform)
        self.watch_fleet()
        if not self._replayed:
            self.poll_platforms()
        if any(t.profile.detach.primitive == "sbatch" for t in self.trackers.values()):
            self.set_interval(SLURM_POLL_S, self.poll_slurm)
        self.call_after_refresh(self._first_frame)
        from cockpit.ui.requests import watch_requests

        watch_requests(self)  # toast agents' teardown requests as they arrive in the store

    def _first_frame(self) -> None:
        self.first_frame_at = time.perf_counter()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every toast is shown literally, whoever raises it (screens' `notify` lands here).

        Toasts carry instance and cell names, alert texts and exception messages from a box;
        Textual would parse them as markup (`markup` is accepted for the signature and
        ignored), so a hostile name could crash the app or become an action.
        """
        super().notify(visible(message, one_line=False), title=visible(title),
                       severity=severity, timeout=timeout, markup=False)

    # -- fleet events ------------------------------------------------------------------------
    @work(exclusive=True, group="fleet", exit_on_error=False)
    async def watch_fleet(self) -> None:
        """Run the fleet service (or the given event source) on the app's loop."""
        if self.source is not None:
            async for event in self.source():
                self.absorb_isolated(event)
            return
        self.fleet = Fleet(self.loaded.sweep, self.loaded.profiles, self.loaded.directory)
        self.fleet.start()
        try:
            async for event in self.fleet.events():
                self.absorb_isolated(event)
        finally:
            await self.fleet.stop()

    def platform_clients(self) -> list[PlatformClient]:
        """Read-only clients of the platforms this sweep's boxes are on."""
        from cockpit.services.platforms import sweep_clients

        return sweep_clients(self.loaded)

    @work(exclusive=True, group="platforms", exit_on_error=False)
    async def poll_platforms(self) -> None:
        """What the platforms say (state, price, balance), polled for ever in the background:
        money alerts (runway, contract end, stopped but billing) fire with the app closed to
        the billing view too."""
        clients = self.platform_clients()
        if clients:
            await self.monitor.poll_platforms(clients)

    def absorb_isolated(self, event: FleetEvent) -> None:
        """`absorb`, but an event that fails is shown and dropped: one box's event must not
        end the worker that feeds every box (they would all keep showing stale numbers)."""
        errors = self.monitor.errors
        try:
            self.absorb(event)
        except Exception as exc:  # isolation: one event, never the fleet
            self.fleet_errors += 1
            self.notify(f"an event could not be shown ({type(exc).__name__}: {exc})",
                        title="cockpit", severity="error", timeout=10)
            return
        if self.monitor.errors != errors:
            self.fleet_errors += 1
            self.notify(f"an event could not be shown ({self.monitor.last_error})",
                        title="cockpit", severity="error", timeout=10)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The fleet worker died anyway: say so in the title and a toast, and restart it."""
        worker = event.worker
        if worker.group != "fleet" or event.state is not WorkerState.ERROR:
            return
        self.fleet_crashes += 1
        error = f"{type(worker.error).__name__}: {worker.error}"
        self.sub_title = visible(f"{self.loaded.sweep.sweep} - the fleet watcher crashed "
                                 f"{self.fleet_crashes}x, restarted ({error})"[:200])
        self.notify(f"the fleet watcher crashed and was restarted: {error}",
                    title="cockpit", severity="error", timeout=30)
        self.set_timer(min(30.0, 2.0 ** self.fleet_crashes), self.watch_fleet)

    def absorb(self, event: FleetEvent) -> None:
        """Feed one event to its tracker; the next repaint shows it."""
        if isinstance(event, HostStateChanged):
            state = event.state
            if self.monitor.absorb(event) is None:
                return
            self.dirty.add(state.instance)
            key = state.host_key
            prompt = (state.instance, state.reachability.value, key.fingerprint if key else "")
            if key is not None and prompt not in self._prompted_keys:
                self._prompted_keys.add(prompt)
                self.show_host_key(state.instance)
            return
        if self.monitor.absorb(event) is not None:
            self.dirty.add(event.snapshot.instance)

    def repaint(self) -> None:
        """Push changed hosts to every live screen: one repaint per burst of events."""
        if not self.is_running:  # exiting: the screens are being taken apart
            return
        self.check_alerts()
        names = self.dirty
        if not names:
            return
        self.dirty = set()
        self.repaints += 1
        for screen in self.screen_stack:
            if isinstance(screen, FleetScreen | BoxScreen):
                screen.refresh_hosts(names)

    def poll_slurm(self) -> None:
        """Read the array jobs of Slurm instances into their queue panels (squeue/sacct)."""
        from cockpit.services.queue import slurm

        async def one(name: str, job: int) -> None:
            tracker = self.trackers[name]
            box, owned = await self.box_factory(name, fresh=True)()
            try:
                tasks = await slurm.states(box, tracker.instance, job, len(tracker.queue_lines) or None)
            finally:
                if owned:
                    await box.close()
            tracker.absorb_slurm(tasks, self.clock())
            self.dirty.add(name)

        for name, tracker in self.trackers.items():
            if tracker.profile.detach.primitive != "sbatch":
                continue
            jobs = slurm.recorded_jobs(self.loaded.sweep.sweep, name)
            if jobs:
                self.run_worker(one(name, jobs[-1]), group=f"slurm-{name}", exclusive=True,
                                exit_on_error=False)

    def check_alerts(self) -> None:
        """Judge every box (the monitor records and sends each material event once); ring the
        bell and toast the ones that just became true."""
        for alert in self.monitor.tick(self.clock()):
            self.alerts_fired.append(alert)
            self.bell()
            self.notify(alert.text, title="cockpit alert", severity="warning", timeout=10)
        for channel, error in self.monitor.failing_channels.items():
            if self._channel_warned.get(channel) != error:
                self._channel_warned[channel] = error
                self.notify(f"alerts are not reaching {channel}: {error}", title="cockpit",
                            severity="error", timeout=15)

    def history(self, instance: str | None = None) -> list[HistoryItem]:
        """What happened, newest first: the store's history (when a store is open) and this
        session's alerts, for the fleet or one box."""
        stored: list[HistoryItem] = []
        if self.history_reader is not None:
            try:
                stored = self.history_reader(instance)
            except Exception as exc:  # a locked or damaged store must not close the list
                self.history_error = visible(f"{type(exc).__name__}: {exc}"[:200])
        return merge(stored, self.monitor.session_history(instance))

    def trend(self, name: str, metric: str, live: list[tuple[float, float]],
              columns: int, start: float | None = None) -> tuple[Trend, str]:
        """One of box `name`'s store series (a percentage) over the whole run, then this
        session's `live` points after the store's last one, resampled to `columns` (from
        `start`, so lines drawn together share one time axis)."""
        stored = self._stored_points(name, metric)
        last = stored[-1][0] if stored else None
        merged = stored + [p for p in live if last is None or p[0] > last]
        trend = resample(merged, self.clock(), columns, start)
        return trend, ("whole run" if stored else "this session")

    def _stored_points(self, name: str, metric: str) -> list[tuple[float, float]]:
        """A store series as (time, peak) points, re-read at most every `TREND_REFRESH_S`."""
        if self.session is None:
            return []
        key = (name, metric)
        cached = self._trend_cache.get(key)
        now = time.monotonic()
        if cached is not None and now - cached[0] < TREND_REFRESH_S:
            return cached[1]
        from cockpit.services.store.db import StoreReader

        points: list[tuple[float, float]] = []
        try:
            if self.session.db.exists():
                with StoreReader(self.session.db) as reader:
                    points = [(p.at, p.peak) for p in reader.samples(name, metric)]
        except Exception as exc:  # a locked or damaged store: this session's line instead
            self.history_error = visible(f"{type(exc).__name__}: {exc}"[:200])
        self._trend_cache[key] = (now, points)
        return points

    def failing_channels(self) -> dict[str, str]:
        """Channel label -> last error, for channels whose latest delivery failed: this
        session's and the store's (a watcher's channels fail while no TUI is open)."""
        out: dict[str, str] = {}
        if self.session is not None:
            try:
                out.update(self.session.failing_channels())
            except Exception as exc:  # a locked or damaged store: the list says so
                self.history_error = visible(f"{type(exc).__name__}: {exc}"[:200])
        out.update(self.monitor.failing_channels)
        return out

    def history_source(self) -> str:
        """Where the events list's rows come from, in words."""
        if self.history_reader is None:
            return "This session only (no store is open)."
        text = f"From the store {self.history_where} and this session."
        if self.history_error:
            text += f" The store could not be read: {self.history_error}"
        return text

    def action_requests(self) -> None:
        """The teardown requests agents made through `cockpit mcp` (decided on the teardown
        screen, never here)."""
        from cockpit.ui.requests import RequestsScreen

        self.push_screen(RequestsScreen())

    def action_events(self) -> None:
        """The fleet's events list (`!`)."""
        from cockpit.ui.events import EventsScreen

        self.push_screen(EventsScreen())

    def _spawn_delivery(self, job: Awaitable[Any]) -> object:
        """Send an alert on a worker of the app's loop (asyncssh is never touched there)."""

        async def run() -> None:
            await job

        return self.run_worker(run(), group="alerts", exit_on_error=False)

    # -- themes ------------------------------------------------------------------------------
    def _theme_changed(self, _theme: object) -> None:
        self.palette = Palette.from_variables(self.theme_variables)
        for screen in self.screen_stack:
            if isinstance(screen, FleetScreen):
                screen.refresh_hosts(set(self.trackers))  # new colours differ: cells update
            if isinstance(screen, BoxScreen) and screen.is_mounted and screen.whole("#box-title"):
                screen.redraw(force=True)

    def set_theme(self, name: str) -> None:
        """Switch theme at run time."""
        self.theme = name

    def action_next_theme(self) -> None:
        names = self.cockpit_themes
        current = names.index(self.theme) if self.theme in names else -1
        self.set_theme(names[(current + 1) % len(names)])
        self.notify(f"theme: {self.theme}", timeout=2)

    # -- modals (one at a time, in order) ------------------------------------------------------
    def _enqueue(self, factory: Callable[[], ModalScreen[Any]],
                 on_result: Callable[[Any], None]) -> None:
        self._modals.append((factory, on_result))
        self._next_modal()

    def _next_modal(self) -> None:
        if not self._modals or isinstance(self.screen, ModalScreen):
            return
        factory, on_result = self._modals.popleft()

        def finished(result: Any) -> None:
            on_result(result)
            self._next_modal()

        self.push_screen(factory(), callback=finished)

    def show_banner(self, platform: str, force: bool = False) -> None:
        """The danger-clock banner of a platform, unless already acknowledged (or `force`)."""
        trackers = [t for t in self.trackers.values() if t.profile.platform == platform]
        profile = trackers[0].profile
        if not force and not self.acks.needs_banner(profile):
            return
        countdowns = [c for t in trackers for c in t.clocks]

        def acknowledged(result: bool | None) -> None:
            if result:
                self.acks.acknowledge(profile)

        self._enqueue(lambda: DangerBanner(profile, countdowns, self.clock()), acknowledged)

    def show_host_key(self, name: str) -> None:
        """The host-key screen for a box whose key is unknown or changed."""
        tracker = self.trackers[name]
        state = tracker.state
        if state.host_key is None or state.reachability not in (
                Reachability.NEEDS_APPROVAL, Reachability.KEY_CHANGED):
            self.notify(f"{name}: its host key is not in question ({state.reachability.value})",
                        timeout=3)
            return
        inst = tracker.instance
        where = inst.host if inst.port is None else f"[{inst.host}]:{inst.port}"
        fingerprint = state.host_key.fingerprint
        changed = state.reachability is Reachability.KEY_CHANGED

        def answered(result: bool | None) -> None:
            if result and not changed:
                self.approve_key(name, fingerprint)

        self._enqueue(lambda: HostKeyScreen(state, where), answered)

    @work(group="approve", exit_on_error=False)
    async def approve_key(self, name: str, fingerprint: str) -> None:
        """Trust the fingerprint the user approved (unknown keys only), then reconnect."""
        from cockpit.services.transport import ssh

        inst = self.trackers[name].instance
        target = ssh.build_target(inst, self.loaded.sweep.ssh, self.loaded.directory)
        try:
            info = await ssh.approve_host_key(target, fingerprint)
        except ssh.HostKeyProblem as exc:
            self.notify(f"{name}: refused: {exc}", severity="error", timeout=8)
            return
        except (ValueError, OSError) as exc:
            self.notify(f"{name}: not trusted: {exc}", severity="error", timeout=8)
            return
        self.notify(f"{name}: trusted {info.fingerprint}", timeout=4)
        if self.fleet is not None:
            await self.fleet.reconnect(name)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            return
        # The screen's and the app's own bindings first (a focused table shadows `enter`
        # in active_bindings), then whatever the focused widget adds.
        bindings = [b for b in [*type(self.screen).BINDINGS, *self.BINDINGS] if isinstance(b, Binding)]
        bindings += [a.binding for a in self.screen.active_bindings.values()]
        rows: list[tuple[str, str]] = []
        for binding in bindings:
            # The footer shows the short description; help the long one (its tooltip).
            row = (binding.key_display or self.get_key_display(binding),
                   binding.tooltip or binding.description)
            if binding.description and row not in rows:
                rows.append(row)
        self.push_screen(HelpScreen(rows))

    # -- actions on boxes ------------------------------------------------------------------------
    def action_jobs(self) -> None:
        """Open the job view of the selected box's job group (else the sweep's first job)."""
        from cockpit.ui.jobs import JobScreen

        jobs = self.loaded.sweep.jobs
        if not jobs:
            self.notify("this sweep declares no job groups (`jobs:`)", severity="warning")
            return
        selected = getattr(self.screen, "selected", None)
        name = selected() if callable(selected) else None
        job = self.loaded.sweep.job_of(name) if isinstance(name, str) else None
        self.push_screen(JobScreen((job or jobs[0]).name))

    def open_box(self, name: str) -> None:
        """Push the box screen of `name`."""
        self.push_screen(BoxScreen(name))

    # -- custody: verify and teardown -----------------------------------------------------------
    def custody_of(self, name: str) -> Custody:
        """The verification and teardown state of `name` (made on first use)."""
        custody = self.custody.get(name)
        if custody is None:
            tracker = self.trackers[name]
            sweep, base = self.loaded.sweep, self.loaded.directory
            custody = Custody(tracker.instance, tracker.profile, sweep.sweep,
                              pull_folder((base / sweep.pull_dir).resolve(), name),
                              tuple(base / p for p in sweep.cli_path), self.box_factory(name))
            self.custody[name] = custody
            job = sweep.job_of(name)
            if job is not None:  # a job's boxes are torn down only once all are N/N (issue 21)
                link_group(job.name, [self.custody_of(m.instance).gate for m in job.members])
        return custody

    def box_factory(self, name: str, *, fresh: bool = False) -> Callable[[], Awaitable[tuple[Box, bool]]]:
        """Opens a Box for `name`: the fleet's live connection when there is one (a pull rides
        on it), or with `fresh` a connection of its own (an operation must not die with a
        watcher that reconnects)."""
        async def factory() -> tuple[Box, bool]:
            instance = self.trackers[name].instance
            watcher = self.fleet.watchers.get(name) if self.fleet is not None and not fresh else None
            def target_for(i: Instance) -> ssh.Target:
                return ssh.build_target(i, self.loaded.sweep.ssh, self.loaded.directory)

            if watcher is not None and watcher.conn is not None and not watcher.conn.is_closed():
                # The live connection (only SFTP is closed after); its target lets a large
                # file on a fast link ride the system ssh client.
                return SshBox(watcher.conn, target=target_for(instance)), True
            box = await open_box(instance, target_for)
            return box, not instance.is_local

        return factory

    def open_verify(self, name: str) -> None:
        """Push the verify screen of `name`."""
        self.push_screen(VerifyScreen(name))

    def cause_of(self, name: str, cell: str) -> FailureCause | None:
        """The classified failure of a cell as the live failure log saw it (rule, class, line)."""
        event = self.trackers[name].failures.cause(cell)
        if event is None:
            return None
        return FailureCause(event.rule_id, event.klass, event.title, event.message)

    def start_verify(self, name: str) -> None:
        """Pull and verify `name` in an async worker (loading happens in worker processes)."""
        if self._pool is None:
            self._pool = make_pool(quiet=True)
        pool = self._pool
        tracker = self.trackers[name]
        causes = {cell: cause for cell in {e.cell for e in tracker.failures.events}
                  if (cause := self.cause_of(name, cell)) is not None}
        self.run_worker(self.custody_of(name).verify(pool, causes), group=f"verify-{name}",
                        exclusive=True, exit_on_error=False)

    def start_operation(self, name: str, verb: str) -> None:
        """preflight / launch / resume / stop of one box, in an async worker."""
        from cockpit.ui.ops import run_operation

        if verb == "stop":
            from rich.text import Text

            from cockpit.ui.custody import ConfirmByTyping

            def confirmed(typed: str | None) -> None:
                if typed == name:
                    self.run_worker(run_operation(self, name, verb), group=f"ops-{name}",
                                    exclusive=True, exit_on_error=False)
                elif typed is not None:
                    self.notify(f"typed {typed!r}, not {name!r}: nothing stopped", severity="error")

            self.push_screen(ConfirmByTyping(
                f"Stop the queue on {name}?", Text("This kills the running training (the exact "
                                                   "tmux session, or the queue's verified PIDs)."),
                name), confirmed)
            return
        self.run_worker(run_operation(self, name, verb), group=f"ops-{name}", exclusive=True,
                        exit_on_error=False)

    def start_teardown(self, name: str, plan: ApprovedPlan) -> None:
        """Run (or record as done by hand) an approved step in an async worker."""
        custody = self.custody_of(name)

        async def go() -> None:
            try:
                if plan.step.argv is None:
                    result = await custody.by_hand(plan, True)
                else:
                    result = await custody.run(plan)
            except GateError as exc:
                custody.output.append(f"refused: {exc}\n")
                custody.changed()
                self.notify(f"{name}: {exc}", severity="error", timeout=8)
                return
            self.notify(f"{name}: {plan.step.action.label} "
                        f"{'done' if result.ok else 'FAILED'} (recorded in the audit log)",
                        severity="information" if result.ok else "error", timeout=6)

        self.run_worker(go(), group=f"teardown-{name}", exclusive=True, exit_on_error=False)

    def on_unmount(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self.metrics_handle is not None:
            self.metrics_handle()

    def reconnect(self, name: str) -> None:
        """Reconnect one box now (no remote side effect)."""
        if self.fleet is None:
            self.notify(f"{name}: no live fleet to reconnect", timeout=3)
            return
        self.run_worker(self.fleet.reconnect(name), group="reconnect", exit_on_error=False)
        self.notify(f"{name}: reconnecting", timeout=2)


def run_app(loaded: LoadedSweep, theme: str | None = None,
            rulebook: Rulebook | None = None, *, session: Session | None = None,
            metrics: tuple[str, int] | None = None) -> int:
    """Run the TUI until the user quits. Quitting never touches a remote box."""
    from textual.theme import BUILTIN_THEMES

    known = [t.name for t in shipped_themes()] + sorted(BUILTIN_THEMES)
    if theme is not None and theme not in known:
        print(f"unknown theme {theme!r}; choose one of: {', '.join(known)}", file=sys.stderr)
        return 2
    try:
        rules = rulebook if rulebook is not None else load_rulebook()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    app = CockpitApp(loaded, theme=theme, rulebook=rules, session=session, metrics=metrics)
    result = app.run()
    return int(result or 0)
