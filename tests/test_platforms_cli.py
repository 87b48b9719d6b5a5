"""`cockpit billing SWEEP [--json]`: the billing view headless, against a real local HTTP server
serving the recorded platform responses (a subprocess, as a user or cron runs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from pytest_httpserver import HTTPServer

from tests.test_billing import serve_accounts

KEY = "cli-test-key-do-not-print-91c2"

SWEEP = """\
sweep: mixed
instances:
  - name: a1
    profile: autodl
    host: autodl-a1
    price_per_hour: 1.98
  - name: r1
    profile: runpod
    host: runpod-r1
    instance_id: xedezhzb9la3ye
    price_per_hour: 0.69
  - name: v1
    profile: vastai
    host: vast-v1
    instance_id: "312"
    price_per_hour: 0.40
  - name: reseller
    profile: generic-ssh
    host: box.example
    price_per_hour: 3.5
    currency: CNY
"""


def cockpit(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and not k.startswith("COCKPIT_")}
    return subprocess.run([sys.executable, "-m", "cockpit", "billing", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**base, "HOME": str(tmp_path), **env})


def test_billing_json_per_currency_runway_and_orphans(tmp_path: Path, httpserver: HTTPServer) -> None:
    serve_accounts(httpserver)
    url = httpserver.url_for("").rstrip("/")
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    env = {"VAST_API_KEY": KEY, "RUNPOD_API_KEY": KEY, "COCKPIT_VASTAI_API": f"{url}/vast",
           "COCKPIT_RUNPOD_API": f"{url}/runpod", "COCKPIT_RUNPOD_GRAPHQL_API": f"{url}/runpod/graphql"}
    done = cockpit(tmp_path, env, str(tmp_path / "sweep.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    bill = json.loads(done.stdout)
    # AutoDL and the reseller (sweep override) in CNY, RunPod and vast.ai in USD: never summed.
    assert bill["per_hour"]["CNY"] == round(1.98 + 3.5, 4)
    assert bill["per_hour"]["USD"] == round(0.69 + 0.4028 + 0.0411 + 1.1022 + 100 * 0.2 / 730, 4)
    rows = {r["instance"]: r for r in bill["rows"]}
    assert rows["a1"]["unit"] == "CNY/h" and rows["reseller"]["currency"] == "CNY"
    assert rows["v1"]["platform_says"].startswith("running (running) 0.40 USD/h")
    assert sorted(bill["orphans"]) == ["runpod:k3l9q2mz7wq0aa", "vastai:313", "vastai:314"]
    runways = [c for c in bill["clocks"] if c["kind"] == "runway"]
    assert {c["platform"] for c in runways} == {"runpod", "vastai"}
    assert all(c["threshold_h"] == 24 for c in runways)
    assert {"platform": "vastai", "balance": 12.3, "currency": "USD"} in bill["balances"]
    assert bill["unknown"] == []
    assert KEY not in done.stdout + done.stderr

    text = cockpit(tmp_path, env, str(tmp_path / "sweep.yaml"))
    assert text.returncode == 0, text.stderr
    assert "CNY/h" in text.stdout and "USD/h" in text.stdout and "$/h" not in text.stdout
    assert "billing, not watched: " in text.stdout and "until RunPod stops pods" in text.stdout
    assert KEY not in text.stdout


def test_billing_without_keys_says_unknown_and_exit_2_on_bad_input(tmp_path: Path) -> None:
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    done = cockpit(tmp_path, {}, str(tmp_path / "sweep.yaml"), "--json")
    assert done.returncode == 0, done.stderr
    bill = json.loads(done.stdout)
    assert any("runpod: platform state unknown since" in u and "no API key" in u
               for u in bill["unknown"])
    assert bill["orphans"] == [] and bill["per_hour"]["USD"] == round(0.69 + 0.40, 4)
    offline = cockpit(tmp_path, {}, str(tmp_path / "sweep.yaml"), "--json", "--offline")
    assert json.loads(offline.stdout)["unknown"] == []
    missing = cockpit(tmp_path, {}, str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no sweep file at" in missing.stderr
