"""Money alerts leave the billing view: `cockpit watch --once` polls the platform's API (a real
local HTTP server serving recorded responses) and sends the balance-runway alert through the
sweep's channels, once per episode, with no TUI open."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_httpserver import HTTPServer

from tests.sshd import free_port
from tests.test_billing import KEY, serve_accounts
from tests.test_watch_e2e import Receiver


def test_watch_once_sends_the_runway_alert_from_the_platforms_api(
        tmp_path: Path, httpserver: HTTPServer) -> None:
    serve_accounts(httpserver)
    receiver = Receiver()
    try:
        base = httpserver.url_for("").rstrip("/")
        sweep = tmp_path / "sweep.yaml"
        # The box itself is unreachable (nothing listens): the money comes from the API alone.
        sweep.write_text(f"""sweep: money
ssh: {{connect_timeout: 2s}}
alerts:
  desktop: false
  webhook: {receiver.url}/hook
instances:
  - name: r1
    profile: runpod
    host: 127.0.0.1
    port: {free_port()}
    instance_id: xedezhzb9la3ye
    price_per_hour: 0.69
""")
        env = dict(os.environ, HOME=str(tmp_path), RUNPOD_API_KEY=KEY,
                   COCKPIT_RUNPOD_API=f"{base}/runpod",
                   COCKPIT_RUNPOD_GRAPHQL_API=f"{base}/runpod/graphql")
        runs = [subprocess.run([sys.executable, "-m", "cockpit", "watch", str(sweep), "--once",
                                "--db", str(tmp_path / "money.db")],
                               capture_output=True, text=True, timeout=120, env=env)
                for _ in range(2)]
        for run in runs:
            assert run.returncode == 1, run  # the runway alert is open
            assert KEY not in run.stdout + run.stderr
        first = [json.loads(line) for line in runs[0].stdout.splitlines()]
        alerts = [i for i in first if i["event"] == "alert" and i["kind"] == "balance-runway"]
        assert alerts and "balance $12.30" in alerts[0]["text"], first
        posted = [json.loads(body) for body in receiver.bodies]
        runway = [p for p in posted if p.get("kind") == "balance-runway"]
        assert len(runway) == 1, posted  # the second run remembers the episode
        assert KEY not in json.dumps(posted)
    finally:
        receiver.close()
