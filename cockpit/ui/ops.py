"""Box operations from the TUI: preflight, launch, resume and stop, as async workers.

Each shows its outcome in a `ReportScreen`; stop asks for the instance name first, because it
kills a running training. The services refuse what is unsafe (a second launch, a resume while
the queue runs, a runner in use) and the refusal is what the user sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer

from cockpit.models.preflight import Level
from cockpit.models.text import remote_text
from cockpit.ui.safe import PlainStatic

if TYPE_CHECKING:
    from cockpit.ui.app import CockpitApp


class ReportScreen(ModalScreen[None]):
    """A titled block of text; esc closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "close", "Close")]

    def __init__(self, title: str, body: Text) -> None:
        super().__init__(classes="banner")
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield PlainStatic(remote_text(self.title_text, style="bold"), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic(self.body, id="report-body")
            yield Footer()

    def action_close(self) -> None:
        self.dismiss(None)


async def run_operation(app: CockpitApp, name: str, verb: str, *,
                        cells: list[str] | None = None) -> None:
    """Run one operation on box `name` (`rerun`: of `cells`) and show what happened."""
    from cockpit.services.queue.control import control
    from cockpit.services.queue.launch import LaunchRefused
    from cockpit.services.queue.preflight import preflight_instance, report_text

    tracker = app.trackers[name]
    inst, sweep = tracker.instance, app.loaded.sweep
    app.notify(f"{name}: {verb} ...", timeout=2)
    if verb == "preflight":
        report = await preflight_instance(inst, tracker.profile, sweep, app.loaded.directory)
        style = {Level.PASS: app.palette.ok, Level.WARN: app.palette.warn, Level.FAIL: app.palette.bad}
        app.push_screen(ReportScreen(f"Preflight {name}: {report.level.name}",
                                     remote_text(report_text(report), style=style[report.level],
                                                 one_line=False)))
        return
    factory = app.box_factory(name, fresh=True)
    box, owned = await factory()
    try:
        text = await control(box, inst, tracker.profile, sweep.sweep, verb, cells=cells)
        app.push_screen(ReportScreen(f"{verb} {name}: done", remote_text(text, one_line=False)))
    except LaunchRefused as exc:
        app.push_screen(ReportScreen(f"{verb} {name}: refused",
                                     remote_text(str(exc), style=app.palette.bad, one_line=False)))
    except Exception as exc:  # an unreachable box: shown, not raised
        app.push_screen(ReportScreen(f"{verb} {name}: failed",
                                     remote_text(str(exc), style=app.palette.bad, one_line=False)))
    finally:
        if owned:
            await box.close()
