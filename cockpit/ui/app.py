"""The cockpit Textual app: a live fleet table fed by the fleet service.

Widgets never await SSH: one async worker (never a thread worker; asyncssh is bound to
the app's loop) consumes the fleet's events and posts messages; the table updates only
the cells that changed.
"""

from __future__ import annotations

from pathlib import PurePath
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable, Footer, Header

from cockpit.models.events import HostStateChanged, SnapshotTaken
from cockpit.models.snapshot import HostSnapshot, HostState
from cockpit.models.summary import gpu_summary, log_age, pct, queue_state, state_text, worst
from cockpit.services.fleet import Fleet
from cockpit.services.resources import shipped_dir
from cockpit.services.sweepfile import LoadedSweep

COLUMNS = ("instance", "platform", "state", "GPU util", "GPU mem", "disk", "inodes",
           "memory", "queue", "last log", "$/h")


class FleetEventArrived(Message):
    """A fleet event reached the UI."""

    def __init__(self, event: HostStateChanged | SnapshotTaken) -> None:
        super().__init__()
        self.event = event


class CockpitApp(App[int]):
    """The fleet overview."""

    TITLE = "cockpit"
    CSS_PATH: ClassVar[list[str | PurePath]] = [shipped_dir("themes") / "cockpit.tcss"]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "Quit (touches no remote)"),
    ]

    def __init__(self, loaded: LoadedSweep, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.loaded = loaded
        self.fleet: Fleet | None = None
        self.states: dict[str, HostState] = {}
        self.snapshots: dict[str, HostSnapshot] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield DataTable(id="fleet", cursor_type="row")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.loaded.sweep.sweep
        table = self.query_one("#fleet", DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        for inst in self.loaded.sweep.instances:
            price = "" if inst.price_per_hour is None else f"{inst.price_per_hour:.2f}"
            row = [inst.name, inst.profile, "connecting", *[""] * (len(COLUMNS) - 4), price]
            table.add_row(*row, key=inst.name)
        self.watch_fleet()

    @work(exclusive=True, group="fleet", exit_on_error=False)
    async def watch_fleet(self) -> None:
        """Run the fleet service on the app's loop and forward its events."""
        self.fleet = Fleet(self.loaded.sweep, self.loaded.profiles, self.loaded.directory)
        self.fleet.start()
        try:
            async for event in self.fleet.events():
                self.post_message(FleetEventArrived(event))
        finally:
            await self.fleet.stop()

    @on(FleetEventArrived)
    def _apply(self, message: FleetEventArrived) -> None:
        event = message.event
        table = self.query_one("#fleet", DataTable)
        if isinstance(event, HostStateChanged):
            self.states[event.state.instance] = event.state
            self._set(table, event.state.instance, "state", state_text(event.state))
            return
        snap = event.snapshot
        self.snapshots[snap.instance] = snap
        util, mem = gpu_summary(snap)
        cells = {
            "GPU util": util,
            "GPU mem": mem,
            "disk": pct(worst([m.bytes_pct for m in snap.mounts])),
            "inodes": pct(worst([m.inodes_pct for m in snap.mounts])),
            "memory": pct(snap.memory.pct),
            "queue": queue_state(snap),
            "last log": log_age(snap),
        }
        for column, value in cells.items():
            self._set(table, snap.instance, column, value)

    @staticmethod
    def _set(table: DataTable[Any], row: str, column: str, value: str) -> None:
        if table.get_cell(row, column) != value:
            table.update_cell(row, column, value, update_width=True)


def run_app(loaded: LoadedSweep, theme: str | None = None) -> int:
    """Run the TUI until the user quits. Quitting never touches a remote box."""
    app = CockpitApp(loaded)
    result = app.run()
    return int(result or 0)
