"""Modal screens: the danger-clock banner, the host-key screen and the help screen."""

from __future__ import annotations

from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen

from cockpit.models.hostview import ClockCountdown
from cockpit.models.profile import Profile
from cockpit.models.snapshot import HostState, Reachability
from cockpit.models.text import remote_text
from cockpit.ui.safe import PlainStatic


def banner_text(profile: Profile, countdowns: list[ClockCountdown], now: float) -> RenderableType:
    """What the danger banner says about one platform, straight from its profile."""
    parts: list[RenderableType] = []
    clocks = profile.danger_clocks.clocks
    parts.append(Text("Danger clocks", style="bold underline"))
    if not clocks:
        parts.append(Text("  none recorded for this platform"))
    for clock in clocks:
        head = remote_text(f"• {clock.name}", style="bold")
        head.append(f"  ({clock.duration})" if clock.duration else "  (no fixed length)")
        parts.append(head)
        parts.append(remote_text(f"    starts: {clock.starts}"))
        parts.append(remote_text(f"    destroys: {clock.destroys}"))
        if clock.note:
            parts.append(remote_text(f"    {clock.note}"))
        for running in countdowns:
            if running.clock.id == clock.id:
                parts.append(remote_text(f"    RUNNING on {running.instance}: {running.text(now)}",
                                  style="bold reverse"))
    billing = profile.billing
    parts.append(Text(""))
    parts.append(Text("Billing while stopped", style="bold underline"))
    verdict = "a stopped box STILL BILLS" if billing.stopped_still_bills else "a stopped box stops billing"
    parts.append(remote_text(f"  {verdict}: {billing.while_stopped}"))
    parts += [remote_text(f"  • {trap}") for trap in billing.traps]
    meter = profile.meter
    parts.append(remote_text(f"  To stop the meter: {meter.stop_verb}"
                      f"{' (IRREVERSIBLE)' if meter.irreversible else ''}"))
    if profile.conveniences.items:
        parts.append(Text(""))
        parts.append(Text("Conveniences", style="bold underline"))
        parts += [remote_text(f"  • {item}") for item in profile.conveniences.items]
    parts.append(Text(""))
    parts.append(remote_text(f"Facts verified {profile.danger_clocks.verified} "
                      f"(profile {profile.platform}.yaml)."))
    return Group(*parts)


class DangerBanner(ModalScreen[bool]):
    """First contact with a platform: its danger clocks, billing traps and conveniences.

    Dismisses with True when acknowledged (stored with the facts' hash), False for "later".
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "acknowledge", "Acknowledge (I have read this)"),
        Binding("escape", "later", "Remind me next launch"),
    ]

    def __init__(self, profile: Profile, countdowns: list[ClockCountdown], now: float) -> None:
        super().__init__(classes="banner")
        self.profile = profile
        self.countdowns = countdowns
        self.now = now

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield PlainStatic(remote_text(f"First contact with {self.profile.display_name}: read before you "
                              f"rent, stop or destroy", style="bold"), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic(banner_text(self.profile, self.countdowns, self.now))
            yield PlainStatic("a: acknowledge     esc: remind me next launch", id="dialog-keys")

    def action_acknowledge(self) -> None:
        self.dismiss(True)

    def action_later(self) -> None:
        self.dismiss(False)


def host_key_text(state: HostState, where: str) -> RenderableType:
    """What the host-key screen says for an unknown or a changed key."""
    key = state.host_key
    parts: list[RenderableType] = []
    if key is None:
        return remote_text(f"{state.instance}: no host key information")
    if state.reachability is Reachability.KEY_CHANGED:
        parts.append(remote_text(f"REFUSED: {state.instance} ({where}) presented a DIFFERENT host key",
                          style="bold reverse"))
        parts.append(remote_text(f"  presented: {key.algorithm} {key.fingerprint}"))
        parts += [remote_text(f"  known:     {fp}") for fp in key.known_fingerprints]
        parts.append(Text(""))
        parts.append(Text("What to check:", style="bold"))
        parts += [remote_text(f"  • {line}") for line in (
            "Was the instance re-created? Rental platforms reuse host:port for new boxes "
            "(a recreated RunPod/vast.ai/AutoDL box gets a new key).",
            "Compare with the fingerprint the platform console or the box's first boot log shows.",
            "If it is a new box you own, remove the stale line yourself: "
            f"ssh-keygen -R '{where}' (then approve the new key here).",
            "If nothing changed on your side, treat it as an attack and do not connect.",
        )]
        parts.append(Text(""))
        parts.append(Text("A changed key can never be accepted from the cockpit.", style="bold"))
    else:
        parts.append(remote_text(f"{state.instance} ({where}) presented an UNKNOWN host key",
                          style="bold"))
        parts.append(remote_text(f"  {key.algorithm}"))
        parts.append(remote_text(f"  {key.fingerprint}", style="bold"))
        parts.append(Text(""))
        parts.append(Text("Compare it with the fingerprint from the platform console (or "
                          "`ssh-keygen -lf /etc/ssh/ssh_host_*_key.pub` on the box) before "
                          "approving. Approved keys go to the cockpit's own known_hosts."))
    return Group(*parts)


class HostKeyScreen(ModalScreen[bool]):
    """Approve an unknown host key by its fingerprint; a changed key is shown as refused."""

    def __init__(self, state: HostState, where: str) -> None:
        super().__init__(classes="hostkey")
        self.state = state
        self.where = where
        self.changed = state.reachability is Reachability.KEY_CHANGED

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "approve", "Approve this fingerprint"),
        Binding("escape", "close", "Close"),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A changed key has no approve action at all (hidden from the footer, inert)."""
        return not (action == "approve" and self.changed)

    def compose(self) -> ComposeResult:
        title = "Host key REFUSED" if self.changed else "Unknown host key"
        with Vertical(id="dialog"):
            yield PlainStatic(Text(title, style="bold"), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic(host_key_text(self.state, self.where))
            keys = "esc: close" if self.changed else "y: approve     esc: do not approve"
            yield PlainStatic(keys, id="dialog-keys")

    def action_approve(self) -> None:
        if not self.changed:
            self.dismiss(True)

    def action_close(self) -> None:
        self.dismiss(False)


class HelpScreen(ModalScreen[None]):
    """Every key binding active on the screen underneath, with what it does."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close help"),
    ]

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__(classes="help")
        self.rows = rows

    def compose(self) -> ComposeResult:
        text = Text()
        for key, description in self.rows:
            text.append(f"{key:>12}  ", style="bold")
            text.append(f"{description}\n")
        text.append("\nctrl+p opens the command palette (host: reconnect, theme: …, open box …).")
        with Vertical(id="dialog"):
            yield PlainStatic(Text("Keys", style="bold"), id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield PlainStatic(text)
            yield PlainStatic("esc: close", id="dialog-keys")

    def action_close(self) -> None:
        self.dismiss(None)
