"""`cockpit screenshots`: drive the real app headless on the demo fleet and write SVGs.

For each shipped theme it captures the danger-clock banner, the fleet overview, a box
screen, and the host-key screen for an unknown and for a changed key; in the dark theme the
fleet and box screens also at 80x24, 120x40 and 200x60 (`fleet-80x24-cockpit-dark.svg`). The host-key shots
use a copy of the demo's ssh files whose known_hosts is empty (unknown key) or holds a
different key (changed key): the same strict checking as for a real box.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import asyncssh
from textual.pilot import Pilot

from cockpit.models.snapshot import Reachability
from cockpit.services.config.acks import AckStore
from cockpit.services.config.sweepfile import LoadedSweep, load_sweep
from cockpit.ui.app import CockpitApp
from cockpit.ui.box import BoxScreen
from cockpit.ui.custody import TeardownScreen, VerifyScreen
from cockpit.ui.modals import DangerBanner, HostKeyScreen
from cockpit.ui.themes import shipped_themes

SIZE = (120, 40)
SIZES = ((80, 24), (120, 40), (200, 60))
"""Terminal sizes the fleet and box screens are also shot at (dark theme): a laptop's
default terminal, the usual, and a wide monitor."""
SIZED_THEME = "cockpit-dark"


async def _until(app: CockpitApp, check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            states = ", ".join(f"{n}: {t.state.reachability.value} {t.state.detail}"
                               for n, t in app.trackers.items())
            raise TimeoutError(f"timed out waiting for {what} ({states}; screen {app.screen!r})")
        await asyncio.sleep(0.2)


def _key_variant(demo: Path, kind: str) -> LoadedSweep:
    """A sweep over the demo's first box whose known_hosts is empty or holds a wrong key."""
    known = demo / f"known_hosts.{kind}"
    if kind == "changed":
        real = (demo / "known_hosts").read_text().splitlines()[0].split()[0]
        other = asyncssh.generate_private_key("ssh-ed25519").export_public_key("openssh")
        known.write_text(f"{real} {other.decode().strip()}\n")
    else:
        known.write_text("")
    config = (demo / "ssh_config").read_text().replace(str(demo / "known_hosts"), str(known))
    (demo / f"ssh_config.{kind}").write_text(config)
    sweep_text = (demo / "sweep.yaml").read_text().replace(
        "- ssh_config\n", f"- ssh_config.{kind}\n").replace("- known_hosts\n", f"- known_hosts.{kind}\n")
    path = demo / f"sweep.{kind}.yaml"
    path.write_text(sweep_text)
    loaded = load_sweep(path)
    first = loaded.sweep.instances[0]
    sweep = loaded.sweep.model_copy(update={"instances": (first,)})
    return LoadedSweep(path, sweep, {first.profile: loaded.profiles[first.profile]})


def _key_screen_up(app: CockpitApp, wanted: Reachability) -> bool:
    return isinstance(app.screen, HostKeyScreen) and any(
        t.state.reachability is wanted for t in app.trackers.values())


async def _shoot_theme(sweep: Path, theme: str, out: Path, state: Path) -> list[Path]:
    written: list[Path] = []

    def save(app: CockpitApp, name: str) -> None:
        path = out / f"{name}-{theme}.svg"
        app.save_screenshot(str(path))
        written.append(path)

    async def save_sizes(app: CockpitApp, pilot: Pilot[int], name: str) -> None:
        """`name` at every size of SIZES (dark theme only), then back to SIZE."""
        if theme != SIZED_THEME:
            return
        for width, height in SIZES:
            await pilot.resize_terminal(width, height)
            await pilot.pause(0.8)
            path = out / f"{name}-{width}x{height}-{theme}.svg"
            app.save_screenshot(str(path))
            written.append(path)
        await pilot.resize_terminal(*SIZE)
        await pilot.pause(0.5)

    app = CockpitApp(load_sweep(sweep), theme=theme, acks=AckStore(state / f"acks-{theme}.json"))
    async with app.run_test(size=SIZE) as pilot:
        await _until(app, lambda: isinstance(app.screen, DangerBanner), "the banner")
        await _until(app, lambda: all(t.snapshot for t in app.trackers.values()), "a record from every box")
        await pilot.pause(0.5)
        save(app, "banner")
        while isinstance(app.screen, DangerBanner):
            await pilot.press("a")
            await pilot.pause(0.2)
        # A few records for sparklines and trends, and the demo's first failure (a CUDA OOM).
        await _until(app, lambda: bool(app.trackers["a1"].failures.events), "a failure event", 90)
        await asyncio.sleep(2)
        await pilot.pause(0.5)
        save(app, "fleet")
        await save_sizes(app, pilot, "fleet")
        await pilot.press("dollar_sign")
        await pilot.pause(1.0)
        save(app, "billing")
        await pilot.press("escape")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await _until(app, lambda: isinstance(app.screen, BoxScreen), "the box screen")
        await pilot.pause(0.5)
        save(app, "box")
        await save_sizes(app, pilot, "box")
        await pilot.press("escape")
        # v1's queue is short: verify it to N/N, then look at its (now open) teardown plan.
        await _until(app, lambda: app.trackers["v1"].queue_view().done, "v1's queue to finish", 90)
        app.open_verify("v1")
        await _until(app, lambda: isinstance(app.screen, VerifyScreen), "the verify screen")
        await pilot.press("p")
        custody = app.custody_of("v1")
        await _until(app, lambda: custody.report is not None and not custody.busy, "verification", 90)
        await pilot.pause(1.0)
        save(app, "verify")
        await pilot.press("t")
        await _until(app, lambda: isinstance(app.screen, TeardownScreen), "the teardown screen")
        await pilot.press("down")
        await pilot.pause(1.0)
        save(app, "teardown")

    for kind in ("unknown", "changed"):
        loaded = _key_variant(sweep.parent, kind)
        app = CockpitApp(loaded, theme=theme, acks=AckStore(state / f"acks-{theme}.json"),
                         banners=False)
        wanted = Reachability.NEEDS_APPROVAL if kind == "unknown" else Reachability.KEY_CHANGED
        async with app.run_test(size=SIZE) as pilot:
            await _until(app, partial(_key_screen_up, app, wanted), f"the {kind}-key screen")
            await pilot.pause(0.5)
            save(app, f"hostkey-{kind}")
    return written


def write_screenshots(out: Path) -> list[Path]:
    """Serve the demo fleet, shoot every screen in every shipped theme, return the files."""
    from cockpit.demo.server import serving_in_child

    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with tempfile.TemporaryDirectory(prefix="cockpit-shots-") as tmp:
        root = Path(tmp)
        state = root / "state"
        state.mkdir()
        # Approvals and acknowledgements made while shooting stay in the temp dir.
        previous = os.environ.get("COCKPIT_STATE_DIR")
        os.environ["COCKPIT_STATE_DIR"] = str(state)
        previous_data = os.environ.get("COCKPIT_DATA_DIR")
        os.environ["COCKPIT_DATA_DIR"] = str(state)
        try:
            with serving_in_child(root / "demo", root / "server.log") as sweep:
                for theme in shipped_themes():
                    written += asyncio.run(_shoot_theme(sweep, theme.name, out, state))
        finally:
            for name, value in (("COCKPIT_STATE_DIR", previous), ("COCKPIT_DATA_DIR", previous_data)):
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
    return written
