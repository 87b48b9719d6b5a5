"""Cockpit commands in Textual's command palette (ctrl+p).

Hit texts carry instance and platform names from the sweep and profiles: they are shown
literally (Textual parses a str hit, and the matcher's highlight, as markup)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content
from textual.markup import escape

from cockpit.models.text import visible


class CockpitCommands(Provider):
    """host: open / reconnect / host key, theme: NAME, banner: PLATFORM."""

    def _commands(self) -> list[tuple[str, Callable[[], object], str]]:
        from cockpit.ui.app import CockpitApp

        app = self.app
        assert isinstance(app, CockpitApp)
        out: list[tuple[str, Callable[[], object], str]] = []
        for name in app.trackers:
            out.append((f"host: open {name}", partial(app.open_box, name), "show the box's panels"))
            out.append((f"host: reconnect {name}", partial(app.reconnect, name),
                        "drop the link and connect again now (touches nothing remote)"))
            out.append((f"host: host key {name}", partial(app.show_host_key, name),
                        "show or approve the presented host key"))
        for theme in app.cockpit_themes:
            out.append((f"theme: {theme}", partial(app.set_theme, theme), "switch the theme"))
        for platform in sorted({t.profile.platform for t in app.trackers.values()}):
            out.append((f"banner: {platform}", partial(app.show_banner, platform, True),
                        "show the platform's danger clocks again"))
        return out

    async def discover(self) -> Hits:
        for text, callback, help_text in self._commands():
            yield DiscoveryHit(Content(visible(text)), callback, text=visible(text),
                               help=escape(visible(help_text)))

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, callback, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(escape(visible(text))), callback, text=visible(text),
                          help=escape(visible(help_text)))

