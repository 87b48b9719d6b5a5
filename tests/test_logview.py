"""Pilot tests of the log view on the replayed fleet: enter on a queue cell opens its log at
the end and follows appended lines; `/`, `n`, `N` search; enter on a failure opens its cell's
log at the failure's line with the whole line in the detail pane; `l` opens the master log;
`]` / `[` jump between classified lines; hostile bytes are shown, never obeyed.

The box's files are real files under a temporary root, read through a `Box` whose `open`
maps the box's absolute paths there (the replay's paths are `/root/autodl-tmp/...`); the
reads then go through the same `logread` code as over SFTP (sizes found by one-byte reads,
since such a box has no stat: `logread._ProbedLog`).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.widgets import DataTable, Static

from cockpit.services.transport.remote import CommandResult
from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.logview import LogScreen
from cockpit.ui.safe import PlainStatic
from tests.test_ui_app import SIZE, composed, make_app, settle, texts, until_ui

LOGS = "root/autodl-tmp/runs/logs"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


class _File:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)

    async def read(self, size: int, offset: int) -> bytes:
        return os.pread(self.fd, size, offset)

    async def close(self) -> None:
        os.close(self.fd)


class RootedBox:
    """A box whose filesystem is `root` (absolute paths are read under it); runs nothing."""

    def __init__(self, root: Path) -> None:
        self.root = root

    async def run(self, argv: list[str], timeout: float) -> CommandResult:
        raise AssertionError("the log view runs no command")

    async def open(self, path: str) -> _File:
        return _File(self.root / path.lstrip("/"))

    async def write(self, path: str, data: bytes, mode: int = 0o644) -> None:
        raise AssertionError("the log view writes nothing")

    async def close(self) -> None:
        """Nothing to close."""


def rooted(app: CockpitApp, root: Path) -> None:
    """Give `app` boxes rooted at `root` instead of SSH connections."""

    def factory(name: str, *, fresh: bool = False) -> Callable[[], Awaitable[tuple[Any, bool]]]:
        async def make() -> tuple[Any, bool]:
            return RootedBox(root), True

        return make

    app.box_factory = factory  # type: ignore[method-assign]


def write_logs(root: Path) -> Path:
    """Real logs for a1's cells: a long one with three `needle` lines, one with the OOM
    in the middle, one full of hostile bytes; and the master log."""
    logs = root / LOGS
    logs.mkdir(parents=True)
    lines = [f"step {i} loss {1 / (i + 1):.5f}" + (" needle" if i in (1000, 2000, 3000) else "")
             for i in range(5000)]
    (logs / "aug_strong.log").write_text("\n".join(lines) + "\n")
    oom = [f"Epoch {i}/50 | train_loss 0.9 | map 0.31" for i in range(3000)]
    oom[1500] = OOM
    (logs / "det_baseline.log").write_text("\n".join(oom) + "\n")
    (logs / "baseline.log").write_bytes(
        b"clean line\nesc \x1b[2J\x1b]52;c;aGk=\x07 nul \x00 bad \xff\xfe end\n"
        + b"W" * 300_000 + b"\nlast line\n")
    master = root / "root/autodl-tmp/proj/q1_master.log"
    master.parent.mkdir(parents=True)
    master.write_text("[2026-11-18 10:30:00] [1/4] STARTING baseline (reconstruction, 6ep)\n"
                      "=== master log tail ===\n")
    return logs


def rendered(widget: PlainStatic) -> str:
    """What the widget's content prints as, without any terminal styling: a control byte
    from the log would show up here raw."""
    console = Console(width=200, force_terminal=False, color_system=None)
    with console.capture() as capture:
        console.print(widget.content)
    return capture.get()


def body(screen: LogScreen) -> str:
    return rendered(screen.query_one("#log-body", PlainStatic))


def detail(screen: LogScreen) -> str:
    return rendered(screen.query_one("#log-detail-body", PlainStatic))


async def cursor_text(screen: LogScreen) -> str:
    assert screen.reader is not None
    line = (await screen.reader.lines(screen.cursor, 1))[0]
    return line.data.decode(errors="replace")


async def open_box(app: CockpitApp, pilot: Any) -> BoxScreen:
    await settle(app, pilot)
    app.open_box("a1")
    await until_ui(pilot, lambda: composed(app, BoxScreen, "#queue-table")
                   and app.screen.tables()["queue"].row_count == 4, "the box's queue rows")
    screen = app.screen
    assert isinstance(screen, BoxScreen)
    return screen


def select_row(table: DataTable[Any], needle: str) -> None:
    keys = [k for k in table.rows if needle in str(k.value)]
    assert keys, needle
    table.focus()
    table.move_cursor(row=table.get_row_index(keys[0]))


def opened(app: CockpitApp) -> bool:
    screen = app.screen
    return isinstance(screen, LogScreen) and screen.is_mounted and screen.rendered > 0


async def test_enter_on_a_cell_opens_its_log_at_the_end_follows_and_searches(tmp_path: Path) -> None:
    logs = write_logs(tmp_path / "box")
    app = make_app(tmp_path)
    rooted(app, tmp_path / "box")
    async with app.run_test(size=SIZE) as pilot:
        box = await open_box(app, pilot)
        select_row(box.tables()["queue"], "aug_strong")
        await pilot.press("enter")
        await until_ui(pilot, lambda: opened(app), "the log view")
        screen = app.screen
        assert isinstance(screen, LogScreen) and screen.reader is not None
        assert screen.path == "/root/autodl-tmp/runs/logs/aug_strong.log"
        # At the end, following; the index holds only the end of the log.
        assert screen.cursor == len(screen.reader) - 1 and screen.follow
        assert "step 4999 " in body(screen) and "step 4999 " in detail(screen)
        assert "step 0 " not in body(screen)
        assert screen.reader.bytes_read < (logs / "aug_strong.log").stat().st_size

        # Follow: appended lines appear and the cursor stays on the last one.
        with (logs / "aug_strong.log").open("a") as handle:
            handle.write("epoch 9999 appended\n")
        await until_ui(pilot, lambda: "epoch 9999 appended" in body(screen), "the appended line")
        assert await cursor_text(screen) == "epoch 9999 appended"

        # Search up for `needle`: the last one, then n goes on up, N comes back down.
        await pilot.press("slash")
        await pilot.press(*"needle")
        await pilot.press("enter")
        await until_ui(pilot, lambda: "found" in screen.note, "the first match")
        assert (await cursor_text(screen)).startswith("step 3000 ")
        assert not screen.follow
        await pilot.press("n")
        await until_ui(pilot, lambda: "step 2000 loss 0.00050 needle" in detail(screen),
                       "the second match")
        assert (await cursor_text(screen)).startswith("step 2000 ")
        await pilot.press("n")
        await until_ui(pilot, lambda: "step 1000 loss 0.00100 needle" in detail(screen), "the third match")
        await pilot.press("n")
        await until_ui(pilot, lambda: "not found above" in screen.note, "no fourth match")
        assert (await cursor_text(screen)).startswith("step 1000 ")
        await pilot.press("N")
        await until_ui(pilot, lambda: "step 2000 loss 0.00050 needle" in detail(screen), "back down")

        # f follows again: back at the end.
        await pilot.press("f")
        await until_ui(pilot, lambda: "epoch 9999 appended" in detail(screen), "following again")
        assert screen.follow
        await pilot.press("escape")
        await until_ui(pilot, lambda: isinstance(app.screen, BoxScreen), "back to the box")


async def test_enter_on_a_failure_opens_the_log_at_its_line(tmp_path: Path) -> None:
    write_logs(tmp_path / "box")
    app = make_app(tmp_path)
    rooted(app, tmp_path / "box")
    async with app.run_test(size=SIZE) as pilot:
        box = await open_box(app, pilot)
        failures = box.tables()["failures"]
        await until_ui(pilot, lambda: failures.row_count == 1, "the OOM failure row")
        # The failure's whole message is in the detail pane, not cut at 80 characters.
        assert OOM in texts([box.query_one("#failure-detail", Static)])
        select_row(failures, "det_baseline")
        await pilot.press("enter")
        await until_ui(pilot, lambda: opened(app), "the log view")
        screen = app.screen
        assert isinstance(screen, LogScreen)
        assert screen.path.endswith("/det_baseline.log")
        # The replay's failure was on line 2 of a shorter log; this log holds it on line
        # 1501: the view checks the number against the text and finds the line by its text.
        assert await cursor_text(screen) == OOM
        assert not screen.follow
        assert "line 1501" in detail(screen) and OOM in detail(screen) and "M2" in detail(screen)
        assert "▶" in body(screen)
        # ] from the line before finds it again; [ from the end does too.
        await pilot.press("k")
        await until_ui(pilot, lambda: "line 1500 " in detail(screen), "the line above")
        await pilot.press("right_square_bracket")
        await until_ui(pilot, lambda: "line 1501 " in detail(screen), "the next event")
        await pilot.press("G")
        await until_ui(pilot, lambda: "line 3000 " in detail(screen), "the last line")
        await pilot.press("left_square_bracket")
        await until_ui(pilot, lambda: "line 1501 " in detail(screen), "the previous event")
        await pilot.press("left_square_bracket")
        await until_ui(pilot, lambda: "not found above" in screen.note, "no earlier event")


async def test_master_log_and_hostile_bytes_are_shown_not_obeyed(tmp_path: Path) -> None:
    write_logs(tmp_path / "box")
    app = make_app(tmp_path)
    rooted(app, tmp_path / "box")
    async with app.run_test(size=SIZE) as pilot:
        box = await open_box(app, pilot)
        await pilot.press("l")
        await until_ui(pilot, lambda: opened(app), "the master log")
        screen = app.screen
        assert isinstance(screen, LogScreen)
        assert screen.path == "/root/autodl-tmp/proj/q1_master.log"
        assert "=== master log tail ===" in body(screen)
        await pilot.press("escape")
        await until_ui(pilot, lambda: app.screen is box, "back to the box")

        select_row(box.tables()["queue"], "baseline")
        assert box.highlighted_cell() is not None and box.highlighted_cell().name == "baseline"
        await pilot.press("enter")
        await until_ui(pilot, lambda: opened(app) and "last line" in body(app.screen),
                       "the hostile log")
        screen = app.screen
        assert isinstance(screen, LogScreen)
        shown = body(screen)
        assert "\x1b" not in shown and "\x00" not in shown and "\x07" not in shown
        assert "␛[2J" in shown and "␀" in shown and "\\xff" in shown
        # The 300 kB line is cut on its row, with a marker; the pane shows it whole.
        assert "whole in the pane below" in shown
        await pilot.press("k")
        await until_ui(pilot, lambda: "300000 bytes" in detail(screen), "the long line's detail")
        assert detail(screen).count("W") >= 200_000
