"""Material events fire once per episode; the webhook retries a bounded number of times."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from cockpit.models.alerts import STALE_ALERT_S, AlertLatch, material
from cockpit.models.hostview import HostTracker
from cockpit.models.profile import Profile
from cockpit.models.snapshot import HostState, Memory, Reachability
from cockpit.services.alerts.notify import webhook
from cockpit.services.config.profiles import load_named
from tests.test_hostview import RULEBOOK, instance, mount, snapshot, ts
from tests.test_ui_app import make_app, settle


@pytest.fixture(scope="module")
def profile() -> Profile:
    return load_named("autodl")


def test_each_event_fires_once_per_episode(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    latch = AlertLatch()
    full = mount(used=95, avail=5)
    tracker.absorb(snapshot(mounts=(full,), memory=Memory("none", 1, 1, 0), pids=(1,)))
    first = latch.update("a1", material(tracker, 0.0))
    assert [a.kind for a in first] == ["disk-pressure"]
    for _ in range(3):  # the same condition on later ticks: silent
        tracker.absorb(snapshot(mounts=(full,), pids=(1,)))
        assert latch.update("a1", material(tracker, 0.0)) == []
    tracker.absorb(snapshot(mounts=(mount(used=50, avail=50),), pids=(1,)))
    assert latch.update("a1", material(tracker, 0.0)) == []  # cleared
    tracker.absorb(snapshot(mounts=(full,), pids=(1,)))
    assert [a.kind for a in latch.update("a1", material(tracker, 0.0))] == ["disk-pressure"]


def test_failed_cell_queue_done_and_stale_after_five_minutes(profile: Profile) -> None:
    tracker = HostTracker(instance(clocks_started={}), profile, RULEBOOK)
    latch = AlertLatch()
    marks = (f"{ts('00:00:00')} [1/2] STARTING a (t, 1ep)\n{ts('00:01:00')} [1/2] FINISHED a (exit=0)\n"
             f"{ts('00:01:00')} [2/2] STARTING b (t, 1ep)\n{ts('00:02:00')} [2/2] FINISHED b (exit=1)\n")
    tracker.absorb(snapshot(queue_text="a.yaml t 1\nb.yaml t 1\n", marks=marks, pids=()))
    fired = latch.update("a1", material(tracker, 0.0))
    assert sorted(a.kind for a in fired) == ["cell-failed", "queue-done"]
    assert "verify now" in next(a.text for a in fired if a.kind == "queue-done")
    tracker.absorb_state(HostState("a1", Reachability.STALE, 1000.0))
    assert [a.kind for a in latch.update("a1", material(tracker, 1000.0 + STALE_ALERT_S - 1))] == []
    late = latch.update("a1", material(tracker, 1000.0 + STALE_ALERT_S))
    assert [a.kind for a in late] == ["stale"]
    assert latch.update("a1", material(tracker, 2000.0 + STALE_ALERT_S)) == []


class Hook(http.server.BaseHTTPRequestHandler):
    codes: ClassVar[list[int]] = []
    bodies: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        length = int(self.headers["Content-Length"])
        Hook.bodies.append(json.loads(self.rfile.read(length)))
        self.send_response(Hook.codes.pop(0) if Hook.codes else 200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Hook.bodies = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()


def test_webhook_retries_then_succeeds_or_gives_up(hook: str) -> None:
    Hook.codes = [500, 503]
    ok, attempts, error = asyncio.run(webhook(hook, {"text": "a1 failed"}, backoff=(0.01,)))
    assert (ok, attempts, error) == (True, 3, "")
    assert [b["text"] for b in Hook.bodies] == ["a1 failed"] * 3
    Hook.codes = [500, 500, 500, 500]
    ok, attempts, error = asyncio.run(webhook(hook, {"text": "x"}, backoff=(0.01,)))
    assert (ok, attempts, error) == (False, 3, "HTTP 500")
    assert len(Hook.bodies) == 6, "bounded: exactly 3 attempts"
    ok, attempts, error = asyncio.run(webhook("http://127.0.0.1:9/none", {"text": "x"},
                                              backoff=(0.01,), timeout=1.0))
    assert not ok and attempts == 3 and error


async def test_the_app_rings_and_toasts_each_alert_once(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test() as pilot:
        await settle(app, pilot)
        await pilot.pause(2.5)  # two more 1 Hz checks
        kinds = {(a.instance, a.kind) for a in app.alerts_fired}
        assert ("a1", "cell-failed") in kinds and ("a1", "disk-pressure") in kinds
        keys = [a.key for a in app.alerts_fired]
        assert len(keys) == len(set(keys)), "each event once"
        app.check_alerts()
        assert [a.key for a in app.alerts_fired] == keys
        await pilot.press("q")
