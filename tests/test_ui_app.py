"""Pilot tests of the cockpit screens on a replayed fleet (real records, fixed clock)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text
from textual.screen import Screen
from textual.widgets import DataTable, Static

from cockpit.models.events import HostStateChanged
from cockpit.models.snapshot import HostKeyInfo, HostState, Reachability
from cockpit.services.config.acks import AckStore
from cockpit.services.config.sweepfile import LoadedSweep
from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.fleet import FleetScreen
from cockpit.ui.modals import DangerBanner, HelpScreen, HostKeyScreen
from tests.replay import NOW, replay_events, replay_sweep, source_of

SIZE = (120, 40)


def make_app(tmp_path: Path, *, banners: bool = False, key_problem: bool = False,
             loaded: LoadedSweep | None = None, theme: str | None = None) -> CockpitApp:
    loaded = loaded or replay_sweep(tmp_path)
    events = replay_events(with_key_problem=key_problem)
    return CockpitApp(loaded, source=lambda: source_of(events), clock=lambda: NOW,
                      acks=AckStore(tmp_path / "acks.json"), banners=banners, theme=theme)


async def settle(app: CockpitApp, pilot: object) -> None:
    """Let the replay drain and one repaint happen."""
    for _ in range(50):
        await pilot.pause(0.05)  # type: ignore[attr-defined]
        if all(t.snapshot is not None for n, t in app.trackers.items() if n != "v1") and not app.dirty:
            return


def composed(app: CockpitApp, kind: type[Screen[Any]], selector: str) -> bool:
    """`app.screen` is a `kind` whose `selector` widget has been composed and mounted.

    A pushed screen becomes `app.screen` before its compose has run: on a loaded machine a
    query straight after the push (or a key pressed at it) finds nothing, so tests wait for
    the widget they are about to read or type into, not only for the screen.
    """
    screen = app.screen
    if not isinstance(screen, kind) or not screen.is_mounted:
        return False
    return any(widget.is_mounted for widget in screen.query(selector))


async def until_ui(pilot: Any, check: Callable[[], bool], what: str, seconds: float = 10) -> None:
    """Poll `check` between pilot pauses; fail naming `what` after `seconds` (a deadline
    against a hang, not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await pilot.pause(0.05)


async def open_queue(pilot: Any, app: CockpitApp, rows: int) -> tuple[BoxScreen, DataTable[Any]]:
    """Press enter on the fleet's highlighted box and wait for its box screen's queue table
    to hold `rows` rows; the screen and that table."""
    await pilot.press("enter")
    await until_ui(pilot, lambda: composed(app, BoxScreen, "#queue-table"), "the box screen")
    box = app.screen
    assert isinstance(box, BoxScreen)
    queue = box.tables()["queue"]
    await until_ui(pilot, lambda: queue.row_count == rows, "queue rows")
    return box, queue


def texts(widgets: object) -> str:
    """The plain text of Static widgets (their rich content rendered without styles)."""
    console = Console(width=200, no_color=True)
    out = []
    for widget in widgets:  # type: ignore[attr-defined]
        with console.capture() as capture:
            console.print(widget.content)
        out.append(capture.get())
    return " ".join(out)


def fleet_table(app: CockpitApp) -> DataTable[object]:
    screen = app.screen
    assert isinstance(screen, FleetScreen), screen
    return screen.table()


async def test_banner_once_per_platform_and_again_when_facts_change(tmp_path: Path) -> None:
    app = make_app(tmp_path, banners=True)
    seen = []
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        while isinstance(app.screen, DangerBanner):
            seen.append(app.screen.profile.platform)
            await pilot.press("a")
            await pilot.pause(0.1)
        assert isinstance(app.screen, FleetScreen)
    assert seen == ["autodl", "runpod", "vastai"]

    again = make_app(tmp_path, banners=True)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        assert isinstance(again.screen, FleetScreen), "acknowledged banners must not return"

    # AutoDL's clock facts change (say the release timer became 7 days): only its banner returns.
    loaded = replay_sweep(tmp_path)
    autodl = loaded.profiles["autodl"]
    clocks = autodl.danger_clocks
    changed_clock = clocks.clocks[0].model_copy(update={"duration": "7d"})
    changed = autodl.model_copy(update={"danger_clocks": clocks.model_copy(
        update={"clocks": (changed_clock, *clocks.clocks[1:])})})
    assert changed.clock_facts_hash() != autodl.clock_facts_hash()
    loaded = LoadedSweep(loaded.path, loaded.sweep, {**loaded.profiles, "autodl": changed})
    third = make_app(tmp_path, banners=True, loaded=loaded)
    shown = []
    async with third.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)
        while isinstance(third.screen, DangerBanner):
            shown.append(third.screen.profile.platform)
            await pilot.press("escape")  # "later": not stored
            await pilot.pause(0.1)
    assert shown == ["autodl"]
    assert AckStore(tmp_path / "acks.json").needs_banner(changed)


async def test_banner_shows_running_clock_countdown(tmp_path: Path) -> None:
    app = make_app(tmp_path, banners=True)
    async with app.run_test(size=SIZE) as pilot:
        await until_ui(pilot, lambda: composed(app, DangerBanner, "Static")
                       and "6d left" in texts(app.screen.query(Static)), "the banner's countdown")
        assert isinstance(app.screen, DangerBanner)
        text = texts(app.screen.query(Static))
        assert "Auto-release" in text
        # Powered off 9 days ago on a 15-day clock.
        assert "RUNNING on a1: 6d left" in text


async def test_fleet_rows_box_panels_and_failure_filter(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = fleet_table(app)
        assert table.row_count == 3
        assert str(table.get_cell("a1", "GPU")) == "52% x2"
        assert str(table.get_cell("a1", "queue")) == "3/4 aug_strong"
        assert str(table.get_cell("a1", "inodes")) == "92%"
        assert str(table.get_cell("r1", "mem")) == "93%"
        assert str(table.get_cell("v1", "state")) == "stale since " + str(
            table.get_cell("v1", "state")).split("since ")[1]
        await pilot.press("enter")
        await until_ui(pilot, lambda: composed(app, BoxScreen, "#gpu-body") and "A100-SXM4-80GB"
                       in texts(app.screen.query("#gpu-body")), "the box screen's GPU panel")
        screen = app.screen
        assert isinstance(screen, BoxScreen) and screen.instance == "a1"
        gpu = texts([screen.query_one("#gpu-body", Static)])
        assert "A100-SXM4-80GB" in gpu and "pid 48213" in gpu
        disk = texts([screen.query_one("#disk-body", Static)])
        assert "/root/autodl-tmp" in disk and "LOST on destroy" in disk and "inodes" in disk
        assert "OOM kills: 0" in disk
        queue = screen.tables()["queue"]
        assert [str(queue.get_cell(k, "state")) for k in queue.rows] == [
            "finished ok", "finished ok", "failed exit=1", "running"]
        head = texts([screen.query_one("#queue-head", Static)])
        # A cell is running: no resume command is offered while the queue runs (issue 14).
        assert "3/4 finished, 1 failed" in head and "run_queue.sh" not in head
        failures = screen.tables()["failures"]
        rows = {(str(failures.get_cell(k, "rule")), str(failures.get_cell(k, "class")))
                for k in failures.rows}
        # The OOM in the cell's log and its FINISHED exit=1 are one event, named by the cause.
        assert rows == {("M2", "real-bug")}
        health = texts([screen.query_one("#health", Static)])
        assert "det_baseline failed: CUDA out of memory (PyTorch allocator)" in health
        assert "(M2)" in health and "inodes 92% /root/autodl-tmp" in health
        await pilot.press("slash")
        await pilot.press(*"disk")
        await pilot.pause(0.1)
        assert failures.row_count == 0
        await pilot.press(*["backspace"] * 4, *"m2")
        await pilot.pause(0.1)
        assert [str(failures.get_cell(k, "rule")) for k in failures.rows] == ["M2"]
        detail = texts([screen.query_one("#failure-detail", Static)])
        assert "expandable_segments" in detail and "same-config retry: NO, fix first" in detail
        await pilot.press("escape")  # clears the filter first
        await pilot.pause(0.1)
        assert failures.row_count == 1
        await pilot.press("escape")  # then goes back
        await pilot.pause(0.1)
        assert isinstance(app.screen, FleetScreen)


async def test_slash_filters_the_fleet_and_escape_restores(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("slash")
        await pilot.press(*"runpod")
        await pilot.pause(0.1)
        table = fleet_table(app)
        assert [k.value for k in table.rows] == ["r1"]
        await pilot.press("enter")  # keep the filter, back to the table
        await pilot.pause(0.1)
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert [k.value for k in table.rows] == ["a1", "r1", "v1"]
        assert str(table.get_cell("a1", "queue")) == "3/4 aug_strong", "cells survive the filter"


async def test_help_lists_bindings(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        descriptions = [d for _, d in app.screen.rows]
        for wanted in ("Quit (touches no remote)", "Help", "Theme", "Filter", "Open box",
                       "Reconnect", "Danger clocks"):
            assert wanted in descriptions, descriptions
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert isinstance(app.screen, FleetScreen)


async def test_theme_switch_recolours_cells(tmp_path: Path) -> None:
    app = make_app(tmp_path, theme="cockpit-dark")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = fleet_table(app)
        before = table.get_cell("r1", "disk")
        assert isinstance(before, Text) and str(before.style) == app.palette.bad
        await pilot.press("T")
        await pilot.pause(0.4)
        assert app.theme == "cockpit-light"
        after = table.get_cell("r1", "disk")
        assert isinstance(after, Text) and str(after.style) == app.palette.bad
        assert str(after.style) != str(before.style), "the light theme has its own error colour"
        await pilot.press("T")
        await pilot.pause(0.2)
        assert app.theme == "cockpit-contrast"


async def run_command(pilot: Any, text: str) -> None:
    """Open the command palette, type `text`, run the best hit."""
    from textual.command import CommandPalette
    from textual.widgets import Input

    await pilot.press("ctrl+p")
    # Keys typed before the palette's input is mounted and focused would be lost.
    await until_ui(pilot, lambda: isinstance(pilot.app.screen, CommandPalette)
                   and isinstance(pilot.app.focused, Input), "the command palette's input")
    await pilot.press(*text)
    await pilot.pause(0.5)
    await pilot.press("enter")
    await pilot.pause(0.3)


async def test_command_palette_switches_theme_and_opens_a_box(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await run_command(pilot, "theme: cockpit-contrast")
        assert app.theme == "cockpit-contrast"
        await run_command(pilot, "host: open r1")
        assert isinstance(app.screen, BoxScreen) and app.screen.instance == "r1"


async def test_unknown_key_prompts_and_changed_key_cannot_be_approved(tmp_path: Path) -> None:
    app = make_app(tmp_path, key_problem=True)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await until_ui(pilot, lambda: composed(app, HostKeyScreen, "Static") and "SHA256:7lB0Rj3b"
                       in texts(app.screen.query(Static)), "the fingerprint on the key screen")
        screen = app.screen
        assert isinstance(screen, HostKeyScreen) and not screen.changed
        text = texts(screen.query(Static))
        assert "SHA256:7lB0Rj3b2iXz4q1oWm0cVnHq0c8v0sQ2lq7N4yXo9zE" in text
        await pilot.press("escape")
        await pilot.pause(0.1)
        assert isinstance(app.screen, FleetScreen)
        # The same box now presents a changed key: shown as refused, `y` does nothing.
        changed = HostKeyInfo("ssh-ed25519", "SHA256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                              ("SHA256:7lB0Rj3b2iXz4q1oWm0cVnHq0c8v0sQ2lq7N4yXo9zE",))
        app.absorb(HostStateChanged(HostState("v1", Reachability.KEY_CHANGED, NOW, "changed",
                                              host_key=changed)))
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, HostKeyScreen) and screen.changed
        approvals = []
        app.approve_key = lambda *a: approvals.append(a)  # type: ignore[method-assign]
        await pilot.press("y")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HostKeyScreen), "y must not dismiss a refused key"
        assert approvals == []
        await pilot.press("escape")


async def test_quit_touches_no_remote(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("q")
        await pilot.pause(0.1)
    assert app.return_code == 0
    assert app.fleet is None  # the replay has no connections; `q` only exits


async def test_the_fleet_table_re_renders_only_the_cells_that_changed(tmp_path: Path) -> None:
    from rich.text import Text as RichText

    from cockpit.ui.fleet import StableTable

    app = make_app(tmp_path)
    async with app.run_test() as pilot:
        await settle(app, pilot)
        table = app.query_one("#fleet", StableTable)
        await pilot.pause(0.2)
        before = table.renders
        table.update_cell("r1", "GPU", RichText("99% x1"))
        await pilot.pause(0.2)
        changed = table.renders - before
        assert 1 <= changed <= 2, changed  # the one cell (a plain DataTable re-renders all ~40)
        assert str(table.get_cell("r1", "GPU")) == "99% x1"
        before = table.renders
        table.refresh()
        await pilot.pause(0.2)
        assert table.renders == before, "a repaint without a change renders nothing new"
        await pilot.press("q")


async def test_timers_leave_a_screen_alone_once_its_widgets_are_gone(tmp_path: Path) -> None:
    """Textual takes a screen's widgets away before the screen leaves the stack (a pop, the
    app's exit), while the app's repaint and the screens' own timers keep firing. A repaint,
    a theme change or a tick then must paint nothing rather than raise NoMatches out of the
    timer, which ends the whole app (CI saw it: a repaint during a test's shutdown)."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        fleet = app.screen
        assert isinstance(fleet, FleetScreen)
        app.open_box("r1")
        await pilot.pause(0.1)
        box = app.screen
        assert isinstance(box, BoxScreen)
        for screen in (fleet, box):
            await screen.query_children().remove()  # what a prune does first
        app.dirty = set(app.trackers)
        app.repaint()
        fleet.tick()
        app.set_theme("cockpit-light")
        await pilot.pause(0.2)
        assert app.is_running and app._exception is None
    assert app._exception is None
