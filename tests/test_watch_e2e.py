"""`cockpit watch` end to end: a real sshd box, a real watcher process, a real HTTP receiver.

No TUI is open while a cell fails: the watcher alone notices, writes the event into the
store and posts the notification; a TUI opened afterwards lists that event from the store.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.sshd import Sshd, free_port

DEADLINE_S = 60.0


class Receiver:
    """A local HTTP server that keeps every POST body it receives."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.paths: list[str] = []
        received = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received.bodies.append(self.rfile.read(length))
                received.paths.append(self.path)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    try:
        yield server
    finally:
        server.close()


def write_box(root: Path) -> Path:
    """A box whose queue runs cellA (started, not finished yet)."""
    box = root / "box"
    (box / "runs" / "logs").mkdir(parents=True)
    (box / "ckpt").mkdir()
    (box / "queue.txt").write_text("configs/cellA.yaml recon 2\nconfigs/cellB.yaml recon 2\n")
    (box / "master.log").write_text("[2026-11-24 10:00:00] [1/2] STARTING cellA\n")
    (box / "runs" / "logs" / "cellA.log").write_text("Epoch 1/2 | loss 0.5\n")
    return box


def write_sweep(directory: Path, config: Path, box: Path, webhook: str) -> Path:
    path = directory / "sweep.yaml"
    path.write_text(
        f"""sweep: watch-e2e
interval: 1s
ssh:
  config: [{config}]
  keepalive_interval: 1s
  connect_timeout: 5s
alerts:
  desktop: false
  webhook: {webhook}/hook
instances:
  - name: b1
    profile: generic-ssh
    host: gpu-box-1
    queue: "{box}/queue.txt"
    queue_log: "{box}/master.log"
    run_logs: "{box}/runs/logs"
    checkpoints: "{box}/ckpt"
    durable_root: "{box}"
"""
    )
    return path


class Lines:
    """The watcher's stdout, read line by line in a thread (JSON objects)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.items: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            self.items.append(json.loads(line))

    def wait_for(self, predicate: Any, what: str, timeout: float = DEADLINE_S) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for item in list(self.items):
                if predicate(item):
                    return item
            if self.proc.poll() is not None and not self.thread.is_alive():
                break
            time.sleep(0.1)
        raise AssertionError(f"no {what} within {timeout}s; watcher said: {''.join(self.raw)[-3000:]}")


def start_watch(sweep: Path, db: Path, *extra: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "cockpit", "watch", str(sweep), "--db", str(db),
                             *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)



def stop(proc: subprocess.Popen[str]) -> int:
    """SIGTERM a watcher and return its exit status; one still running after 30 s is killed
    and the test fails with TimeoutExpired."""
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()

@pytest.mark.sshd
def test_watch_alone_notices_a_failed_cell_and_posts_it(sshd: Sshd, tmp_path: Path,
                                                         receiver: Receiver) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep = write_sweep(tmp_path, config, box, receiver.url)
    db = tmp_path / "store" / "watch-e2e.db"
    port = free_port()
    proc = start_watch(sweep, db, "--metrics", f"127.0.0.1:{port}")
    lines = Lines(proc)
    try:
        lines.wait_for(lambda i: i["event"] == "started", "start line")
        lines.wait_for(lambda i: i["event"] == "state" and i["reachability"] == "connected",
                       "connected state")
        # The endpoint serves the box: scraped over HTTP, read with prometheus_client's parser.
        assert lines.wait_for(lambda i: i["event"] == "metrics", "metrics line")["listen"].endswith(
            f":{port}/metrics")
        deadline = time.monotonic() + DEADLINE_S
        while True:
            body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
            families = {f.name: f for f in text_string_to_metric_families(body.decode())}
            cells = [s for f in families.values() for s in f.samples
                     if "cells" in s.name and s.labels.get("instance") == "b1"]
            if cells or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert cells, sorted(families)
        # The cell dies while nobody has a terminal open.
        with (box / "runs" / "logs" / "cellA.log").open("a") as log:
            log.write("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                      "KeyError: 'lr'\n")
        with (box / "master.log").open("a") as log:
            log.write("[2026-11-24 10:05:00] [1/2] FINISHED cellA (exit=1)\n")
        alert = lines.wait_for(lambda i: i["event"] == "alert" and i["kind"] == "cell-failed",
                               "cell-failed alert")
        assert alert["instance"] == "b1" and "cellA" in alert["text"]
        lines.wait_for(lambda i: i["event"] == "delivery" and i["ok"] is True, "delivery line")
        posted = [json.loads(body) for body in receiver.bodies]
        assert any(p.get("kind") == "cell-failed" and p.get("instance") == "b1" for p in posted), posted
        # One per episode: more ticks, no second post of the same failure.
        time.sleep(3)
        assert sum(json.loads(b).get("kind") == "cell-failed" for b in receiver.bodies) == 1
    finally:
        code = stop(proc)
    assert code == 0, proc.stderr.read() if proc.stderr else ""
    lines.thread.join(timeout=5)
    assert lines.items[-1]["event"] == "stopped"
    assert "Traceback" not in (proc.stderr.read() if proc.stderr else "")
    # The store kept it: the alert with its delivery, the classified failure, the cell change.
    from cockpit.services.store.db import StoreReader

    with StoreReader(db) as reader:
        alerts = reader.alerts(instance="b1")
        failed = [a for a in alerts if a.kind == "cell-failed"]
        assert len(failed) == 1 and failed[0].cell == "cellA"
        assert [d.ok for d in failed[0].deliveries] == [True]
        assert any(e.cell == "cellA" and "KeyError" in e.message for e in reader.events(instance="b1"))
        changes = [(c.cell, c.to_state) for c in reader.cell_changes(instance="b1")]
        assert ("cellA", "failed") in changes
        assert any(m.metric == "reachable" for m in reader.series("b1"))
    # The post-mortem from the store alone: the cell failed, with its cause, and the alert.
    report = subprocess.run([sys.executable, "-m", "cockpit", "report", str(sweep), "--db", str(db),
                             "--json"], capture_output=True, text=True, timeout=60)
    assert report.returncode == 0, report.stderr
    (b1,) = json.loads(report.stdout)["boxes"]
    cell = next(c for c in b1["cells"] if c["cell"] == "cellA")
    assert cell["state"] == "failed" and cell["exit_code"] == 1
    kinds = {(t["kind"], t["cell"]) for t in b1["timeline"]}
    assert ("failed", "cellA") in kinds and ("alert", "cellA") in kinds, kinds
    # A TUI opened afterwards (no watcher now, so it becomes the store's writer) lists the event.
    asyncio.run(_tui_lists_the_stored_failure(sweep, db, tmp_path))


async def _tui_lists_the_stored_failure(sweep: Path, db: Path, tmp_path: Path) -> None:
    from textual.widgets import DataTable

    from cockpit.services.config.acks import AckStore
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.watch.wiring import open_session
    from cockpit.ui.app import CockpitApp
    from cockpit.ui.events import EventsScreen

    loaded = load_sweep(sweep)
    session = open_session(loaded, db)
    try:
        assert session.recorder is not None and session.source is None
        app = CockpitApp(loaded, banners=False, acks=AckStore(tmp_path / "acks.json"),
                         session=session, source=_silent)
        async with app.run_test(size=(160, 45)) as pilot:
            await pilot.press("exclamation_mark")
            await pilot.pause(0.5)
            screen = app.screen
            assert isinstance(screen, EventsScreen)
            table = screen.query_one("#events-table", DataTable)
            cells = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
            stored = [r for r in cells if r[2] == "b1" and r[3] == "cellA" and "ok" in r[5]]
            assert stored, cells
            assert "From the store" in str(screen.query_one("#events-source").render())
            await pilot.press("escape", "q")
    finally:
        session.close()


async def _silent() -> AsyncIterator[Any]:
    """No fleet events: the TUI above must show what the store holds, not what it probes."""
    if False:
        yield None


@pytest.mark.sshd
async def test_a_tui_follows_the_watcher_without_probing(sshd: Sshd, tmp_path: Path,
                                                         receiver: Receiver) -> None:
    """The follower replays the watcher's feed: the box's queue and its failure reach the TUI's
    model, and the TUI opened no SSH connection of its own."""
    from cockpit.models.queue import CellState
    from cockpit.services.config.acks import AckStore
    from cockpit.services.config.sweepfile import load_sweep
    from cockpit.services.watch.feed import feed_path, follow
    from cockpit.ui.app import CockpitApp

    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep = write_sweep(tmp_path, config, box, receiver.url)
    db = tmp_path / "store" / "watch-e2e.db"
    proc = start_watch(sweep, db)
    lines = Lines(proc)
    try:
        lines.wait_for(lambda i: i["event"] == "state" and i["reachability"] == "connected",
                       "connected state")
        feed = feed_path(db)
        app = CockpitApp(load_sweep(sweep), banners=False, acks=AckStore(tmp_path / "acks.json"),
                         source=lambda: follow(feed, {"b1"}, poll_s=0.2))
        async with app.run_test() as pilot:
            tracker = app.trackers["b1"]

            async def until(check: Any, what: str) -> None:
                deadline = time.monotonic() + DEADLINE_S
                while not check():
                    assert time.monotonic() < deadline, f"no {what}: {''.join(lines.raw)[-2000:]}"
                    await asyncio.sleep(0.2)

            await until(lambda: tracker.snapshot is not None, "record replayed from the feed")
            cells = {c.name: c.state for c in tracker.queue_view().cells}
            # Started, not finished, and no queue runner on this test box: what a probe says.
            assert cells == {"cellA": CellState.INTERRUPTED, "cellB": CellState.PENDING}, cells
            with (box / "master.log").open("a") as log:
                log.write("[2026-11-24 10:05:00] [1/2] FINISHED cellA (exit=1)\n")
            await until(lambda: {c.name: c.state for c in tracker.queue_view().cells}["cellA"]
                        is CellState.FAILED, "the failure, followed")
            assert app.fleet is None, "a follower opens no probes of its own"
            await pilot.press("q")
        # A second watcher on the same store is refused and names the first one.
        second = await asyncio.to_thread(
            subprocess.run, [sys.executable, "-m", "cockpit", "watch", str(sweep), "--db", str(db)],
            capture_output=True, text=True, timeout=60)
        assert second.returncode == 2, second
        refused = [json.loads(line) for line in second.stdout.splitlines()]
        assert refused[-1]["event"] == "error" and f"pid {proc.pid}" in refused[-1]["reason"]
    finally:
        stop(proc)


@pytest.mark.sshd
def test_watch_once_under_cron_reports_each_episode_once(sshd: Sshd, tmp_path: Path,
                                                        receiver: Receiver) -> None:
    box = write_box(tmp_path)
    with (box / "master.log").open("a") as log:
        log.write("[2026-11-24 10:05:00] [1/2] FINISHED cellA (exit=1)\n")
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep = write_sweep(tmp_path, config, box, receiver.url)
    db = tmp_path / "store" / "watch-e2e.db"
    runs = []
    for _ in range(2):
        run = subprocess.run([sys.executable, "-m", "cockpit", "watch", str(sweep), "--db", str(db),
                              "--once"], capture_output=True, text=True, timeout=120)
        runs.append(run)
        assert run.returncode == 1, run  # an alert is open
        last = json.loads(run.stdout.splitlines()[-1])
        assert last["event"] == "round" and last["open_alerts"] >= 1
    first = [json.loads(line) for line in runs[0].stdout.splitlines()]
    second = [json.loads(line) for line in runs[1].stdout.splitlines()]
    assert any(i["event"] == "alert" and i["kind"] == "cell-failed" for i in first)
    assert not any(i["event"] == "alert" and i["kind"] == "cell-failed" for i in second)
    assert sum(json.loads(b).get("kind") == "cell-failed" for b in receiver.bodies) == 1


@pytest.mark.sshd
def test_sighup_rereads_the_sweep_and_a_broken_one_keeps_the_old(sshd: Sshd, tmp_path: Path,
                                                                 receiver: Receiver) -> None:
    box = write_box(tmp_path)
    config = sshd.write_client_files("gpu-box-1", tmp_path)
    sweep = write_sweep(tmp_path, config, box, receiver.url)
    proc = start_watch(sweep, tmp_path / "store" / "hup.db")
    lines = Lines(proc)
    try:
        lines.wait_for(lambda i: i["event"] == "state" and i["reachability"] == "connected",
                       "connected state")
        text = sweep.read_text()
        sweep.write_text(text + "  - name: b2\n    profile: generic-ssh\n    host: gpu-box-1\n")
        proc.send_signal(signal.SIGHUP)
        reloaded = lines.wait_for(lambda i: i["event"] == "reloaded", "reloaded line")
        assert reloaded["instances"] == ["b1", "b2"]
        lines.wait_for(lambda i: i["event"] == "state" and i["instance"] == "b2"
                       and i["reachability"] == "connected", "the new box connected")
        sweep.write_text(text + "  - name: [broken\n")
        proc.send_signal(signal.SIGHUP)
        error = lines.wait_for(lambda i: i["event"] == "error" and "re-read" in i["what"],
                               "the broken sweep reported")
        assert "sweep.yaml" in error["reason"]
        assert proc.poll() is None, "a broken sweep file must not stop the watcher"
    finally:
        code = stop(proc)
    assert code == 0


def test_print_systemd_unit_runs_this_sweep_with_its_options(tmp_path: Path) -> None:
    sweep = tmp_path / "my sweep.yaml"
    sweep.write_text("sweep: s\ninstances:\n  - {name: b1, profile: generic-ssh, host: h}\n")
    unit = subprocess.run([sys.executable, "-m", "cockpit", "watch", str(sweep),
                           "--print-systemd-unit", "--metrics", "9400"],
                          capture_output=True, text=True, timeout=60)
    assert unit.returncode == 0, unit.stderr
    exec_start = next(line for line in unit.stdout.splitlines() if line.startswith("ExecStart="))
    assert f"watch '{sweep.resolve()}' --metrics 127.0.0.1:9400" in exec_start
    assert "ExecReload=/bin/kill -HUP $MAINPID" in unit.stdout
    assert "WantedBy=default.target" in unit.stdout
