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
