"""The demo fleet's platform API stand-in: `cockpit demo --serve DIR` then `cockpit billing
DIR/sweep.yaml --json` (both real subprocesses) shows per-currency totals, a balance runway, a
stopped-but-billing instance and an orphan per account, and the user's real key never leaves
this machine (the stand-in only ever sees the demo key)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from cockpit.demo.platforms import MAX_REQUEST_BODY, PlatformStandIn
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.config.yamlfile import ConfigError
from cockpit.services.platforms import DEMO_KEY, clients_for_sweep
from cockpit.services.platforms.runpod import RunPodClient
from tests.demo import demo_fleet

MARKER = "real-key-marker-7f3a9c"
"""Stands for the user's real RunPod / vast.ai key: it must never reach the stand-in."""


@pytest.fixture(scope="module")
def demo_with_keys(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A demo fleet started with the user's (marker) keys in its environment."""
    with ExitStack() as stack:
        with pytest.MonkeyPatch.context() as patch:  # the keys reach the fleet, not the tests
            patch.setenv("RUNPOD_API_KEY", MARKER)
            patch.setenv("VAST_API_KEY", MARKER)
            root = stack.enter_context(demo_fleet(tmp_path_factory.mktemp("demo-platforms")))
        yield root


def billing_json(sweep: Path) -> dict[str, object]:
    env = dict(os.environ, RUNPOD_API_KEY=MARKER, VAST_API_KEY=MARKER)
    env.pop("COCKPIT_RUNPOD_API", None)
    env.pop("COCKPIT_VASTAI_API", None)
    done = subprocess.run([sys.executable, "-m", "cockpit", "billing", str(sweep), "--json"],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert MARKER not in done.stdout + done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_demo_billing_shows_platform_truth(demo_with_keys: Path) -> None:
    bill: dict[str, object] = billing_json(demo_with_keys / "sweep.yaml")
    per_hour = bill["per_hour"]
    assert isinstance(per_hour, dict) and set(per_hour) == {"CNY", "USD"}
    assert per_hour["CNY"] == pytest.approx(1.98)
    # r1 0.69 + v1 2.40 (running), the vast.ai orphan 0.2411, the stopped pod's volume
    # 150 GB x $0.20/GB/month / 730 h.
    assert per_hour["USD"] == pytest.approx(0.69 + 2.40 + 0.2411 + 150 * 0.20 / 730, abs=1e-3)
    assert bill["unknown"] == []
    assert sorted(bill["orphans"]) == ["runpod:demo-rx-0099", "vastai:demo-vx-0099"]  # type: ignore[arg-type]
    clocks = bill["clocks"]
    assert isinstance(clocks, list)
    runways = {c["platform"]: c for c in clocks if c["kind"] == "runway"}
    assert set(runways) == {"runpod", "vastai"}
    for clock in runways.values():
        assert 0 < clock["seconds_left"] < 24 * 3600 and clock["threshold_h"] == 24.0
    assert "balance $9.80" in runways["runpod"]["text"]
    stopped = [c for c in clocks if c["kind"] == "stopped-billing"]
    assert [c["instance"] for c in stopped] == ["runpod:demo-rx-0099"]
    assert "$0.99/day" in stopped[0]["text"]
    assert any(c["kind"] == "contract-end" and c["instance"] == "v1" for c in clocks)
    rows = {r["instance"]: r for r in bill["rows"]}  # type: ignore[union-attr]
    assert rows["r1"]["platform_says"].startswith("running (RUNNING)")
    assert rows["a1"]["unit"] == "CNY/h" and rows["v1"]["unit"] == "USD/h"


def test_the_real_key_never_reaches_the_stand_in(demo_with_keys: Path) -> None:
    billing_json(demo_with_keys / "sweep.yaml")
    calls = (demo_with_keys / "platform-api-calls.log").read_text().splitlines()
    paths = {line.split()[2] for line in calls}
    assert {"'/runpod/pods'", "'/runpod/graphql'", "'/vastai/api/v0/users/current/'"} <= paths
    assert calls and all(" auth=demo " in line for line in calls), calls
    for path in demo_with_keys.rglob("*"):  # nor anywhere in the demo's files
        if path.is_file() and path.stat().st_size < 10_000_000:
            assert MARKER.encode() not in path.read_bytes(), path


def test_stand_in_refuses_other_keys_and_bounds_requests(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    stand_in = PlatformStandIn(log)
    stand_in.start()
    try:
        base = stand_in.bases()["runpod"]

        def status(path: str, key: str | None, body: bytes | None = None) -> int:
            request = urllib.request.Request(base + path, data=body)
            if key:
                request.add_header("Authorization", f"Bearer {key}")
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    return int(answer.status)
            except urllib.error.HTTPError as exc:
                return exc.code

        assert status("/pods", DEMO_KEY) == 200
        assert status("/pods", MARKER) == 401
        assert status("/pods", None) == 401
        assert status("/nothing", DEMO_KEY) == 404
        assert status("/graphql", DEMO_KEY, b"x" * (MAX_REQUEST_BODY + 1)) == 413
    finally:
        stand_in.stop()
    text = log.read_text()
    assert "auth=other -> 401" in text and "auth=none -> 401" in text
    assert MARKER not in text and DEMO_KEY not in text


def test_clients_send_the_demo_key_only_for_demo_instances(tmp_path: Path) -> None:
    env = {"RUNPOD_API_KEY": MARKER, "VAST_API_KEY": MARKER}
    api = {"runpod": "http://127.0.0.1:9/runpod", "vastai": "http://127.0.0.1:9/vastai"}
    demo = [("runpod", "demo-r1-0001"), ("vastai", "demo-v1-0001"), ("autodl", "demo-a1-0001")]
    clients = clients_for_sweep(demo, env, api=api)
    assert [c.platform for c in clients] == ["runpod", "vastai"]
    assert all(c.key is not None and c.key.reveal() == DEMO_KEY for c in clients)
    runpod = clients[0]
    assert isinstance(runpod, RunPodClient)
    assert (runpod.base, runpod.graphql) == (api["runpod"], api["runpod"] + "/graphql")
    assert clients_for_sweep(demo, env) == []  # no stand-in: not asked at all
    mixed = clients_for_sweep([("runpod", "demo-r1-0001"), ("runpod", "real-pod")], env,
                              api=api)
    assert mixed[0].key is not None and mixed[0].key.reveal() == MARKER  # a local proxy


SWEEP = """sweep: s
platform_api:
  runpod: {url}
instances:
  - name: r1
    profile: runpod
    host: example.invalid
"""


@pytest.mark.parametrize("url", ["https://api.example.com/runpod", "http://10.0.0.5:8080/x",
                                 "http://user:pw@127.0.0.1:8/x", "ftp://127.0.0.1/x",
                                 "http://127.0.0.1.example.com/x"])
def test_platform_api_accepts_only_loopback(tmp_path: Path, url: str) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(url=url))
    with pytest.raises(ConfigError) as caught:
        load_sweep(path)
    assert f"{path}:3" in str(caught.value) and "platform_api" in str(caught.value)


@pytest.mark.parametrize("url", ["http://127.0.0.1:8080/runpod", "http://[::1]:9/r",
                                 "https://localhost/r"])
def test_platform_api_loopback_loads(tmp_path: Path, url: str) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(url=url))
    assert load_sweep(path).sweep.platform_api == {"runpod": url}
