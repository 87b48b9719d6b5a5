"""What every cockpit screen shares."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.screen import Screen

if TYPE_CHECKING:
    from cockpit.ui.app import CockpitApp


class CockpitScreen(Screen[None]):
    """A screen of the cockpit app, with the app typed."""

    @property
    def cockpit(self) -> CockpitApp:
        """The app, typed."""
        from cockpit.ui.app import CockpitApp

        assert isinstance(self.app, CockpitApp)
        return self.app

    def whole(self, selector: str) -> bool:
        """Whether the screen still holds `selector` (one of the widgets it paints).

        Timers (the app's repaint and theme change walking the screen stack, a screen's own
        redraw) keep firing while a screen is popped or the app exits, and Textual removes a
        screen's widgets before the screen itself: a lookup then raises NoMatches out of the
        timer, which ends the app. A screen that is not whole has nothing left to paint.
        (Not `is_mounted`: that turns true only after `on_mount`, which paints first.)
        """
        return bool(self.query(selector))
