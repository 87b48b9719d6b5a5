"""Events the fleet service emits; the UI turns them into Textual messages."""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.models.snapshot import HostSnapshot, HostState


@dataclass(frozen=True)
class HostStateChanged:
    """A box's connection state changed (connected, stale since T, needs approval, ...)."""

    state: HostState


@dataclass(frozen=True)
class SnapshotTaken:
    """A complete probe record arrived from a box."""

    snapshot: HostSnapshot
    record: bytes = b""
    """The framed probe record it was parsed from (bounded by the fleet's record limit), so the
    watcher can keep it in the store and a TUI following that store parses it the same way."""
    base: bool = False
    """The record carries the master log's marks (first contact, or asked again on purpose):
    a follower's replay can start here."""


FleetEvent = HostStateChanged | SnapshotTaken
