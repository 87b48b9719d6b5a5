"""Box operations from the TUI on the demo fleet: preflight, a refused second launch, stop
(after typing the name), resume from the first unfinished cell in our own tmux session."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, Static

from cockpit.services.config.acks import AckStore
from cockpit.services.config.sweepfile import load_sweep
from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.custody import ConfirmByTyping
from cockpit.ui.ops import ReportScreen
from tests.test_ui_app import composed, texts
from tests.test_ui_fleet import wait_until


async def report(app: CockpitApp, pilot: object, title: str, timeout: float = 60) -> str:
    await wait_until(pilot, lambda: composed(app, ReportScreen, "#report-body"), timeout, title)
    screen = app.screen
    assert isinstance(screen, ReportScreen)
    text = f"{screen.title_text}\n" + texts([screen.query_one("#report-body", Static)])
    await pilot.press("escape")  # type: ignore[attr-defined]
    await wait_until(pilot, lambda: composed(app, BoxScreen, "#queue-table"), 10, "back to the box")
    return text


async def confirm_by_typing(app: CockpitApp, pilot: object, name: str) -> None:
    """Type `name` into the stop dialog once its input exists and has the focus."""
    await wait_until(pilot, lambda: composed(app, ConfirmByTyping, "#confirm-input")
                     and isinstance(app.focused, Input), 10, "the dialog's input")
    await pilot.press(*name, "enter")  # type: ignore[attr-defined]


async def test_preflight_launch_stop_resume_from_the_box_screen(fresh_demo: Path, tmp_path: Path) -> None:
    # a1's queue must still run (the refused launch): a fleet of its own, not the shared one
    # whose aug_strong may have finished late in a loaded run
    demo = fresh_demo
    app = CockpitApp(load_sweep(demo / "sweep.yaml"), banners=False,
                     acks=AckStore(tmp_path / "acks.json"))
    async with app.run_test(size=(160, 44)) as pilot:
        await wait_until(pilot, lambda: app.trackers["a1"].snapshot is not None, 20, "a1")
        await wait_until(pilot, lambda: "STARTING aug_strong" in
                         (demo / "boxes" / "a1" / "data" / "q1_master.log").read_text(), 90, "cell 4")
        app.open_box("a1")
        await wait_until(pilot, lambda: composed(app, BoxScreen, "#queue-table"), 10, "the box screen")
        await pilot.press("P")
        text = await report(app, pilot, "preflight")
        assert "Preflight a1" in text and "gpu: 2 x NVIDIA A100" in text and "driver 550.54.15" in text
        await pilot.press("L")
        text = await report(app, pilot, "a refused launch")
        assert "refused" in text and "already runs" in text
        await pilot.press("S")
        await confirm_by_typing(app, pilot, "a1")
        text = await report(app, pilot, "stop")
        assert "killed tmux session q1" in text, text
        await pilot.press("R")
        text = await report(app, pilot, "resume", 90)
        # Cell 3 failed (no proof of success) and cell 4 was interrupted: the resume starts
        # after the last proven cell, 2; in the sweep's own tmux_session, q1 (issue 14).
        assert "resume a1: done" in text and "from cell 3" in text and "tmux session q1" in text
        # The resumed queue really re-runs det_baseline: it fails again (its OOM and FINISHED
        # mark) before the second stop.
        await wait_until(pilot, lambda: (demo / "boxes" / "a1" / "data" / "q1_master.log")
                         .read_text().count("FINISHED det_baseline (exit=") >= 2, 90,
                         "det_baseline re-run to its failure")
        await pilot.press("S")
        await confirm_by_typing(app, pilot, "a1")
        text = await report(app, pilot, "stop again")
        assert "killed tmux session q1" in text
        await pilot.press("q")
