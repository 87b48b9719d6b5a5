"""The read-only platform clients against a real local HTTP server (pytest-httpserver).

The happy path of each client serves the recorded responses in tests/data/platforms (see its
SOURCES.md); every error class ends in "platform state unknown (reason)", never a guess, and
the key never leaves the Authorization header.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from cockpit.models.billing import PlatformTruth, carry_since
from cockpit.services.platforms import (
    POLL_INTERVAL_S,
    base,
    clients_for,
    clients_for_sweep,
    next_poll_s,
    poll_all,
)
from cockpit.services.platforms.base import ApiKey
from cockpit.services.platforms.lambda_cloud import LambdaClient
from cockpit.services.platforms.runpod import RunPodClient
from cockpit.services.platforms.vastai import VastClient

DATA = Path(__file__).parent / "data" / "platforms"
KEY = "sk-test-0123456789abcdef-SECRET"
NOW = 1_795_000_000.0  # 2026-11-18 11:06:40 UTC (tests.replay's NOW): after every recorded start


def recorded(name: str) -> object:
    return json.loads((DATA / name).read_text())


def key() -> ApiKey:
    return ApiKey(KEY, "TEST_KEY")


def url(server: HTTPServer) -> str:
    return server.url_for("").rstrip("/")


def serve_vast(server: HTTPServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    server.expect_request("/api/v1/instances/", headers=auth).respond_with_json(
        recorded("vastai_instances.json"))
    server.expect_request("/api/v0/users/current/", headers=auth).respond_with_json(
        recorded("vastai_user.json"))


def serve_runpod(server: HTTPServer) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    server.expect_request("/v1/pods", method="GET", headers=auth).respond_with_json(
        recorded("runpod_pods.json"))
    server.expect_request("/graphql", method="POST", headers=auth).respond_with_json(
        recorded("runpod_myself.json"))


def runpod(server: HTTPServer) -> RunPodClient:
    return RunPodClient(key(), base=url(server) + "/v1", graphql=url(server) + "/graphql")


async def test_vast_instances_states_prices_and_credit(httpserver: HTTPServer) -> None:
    serve_vast(httpserver)
    truth = await VastClient(key(), base=url(httpserver)).poll(NOW)
    assert truth.known and truth.account is not None
    account = truth.account
    assert account.balance == pytest.approx(12.3) and account.currency == "USD"
    by_id = {i.instance_id: i for i in account.instances}
    run, stopped, loading = by_id["312"], by_id["313"], by_id["314"]
    assert (run.state, run.raw_state, run.price_per_hour) == ("running", "running", pytest.approx(0.4028))
    assert run.contract_end == 1795018000.0 and run.disk_gb == 100.0
    assert run.uptime_s == pytest.approx(NOW - 1794990000.0)
    assert (run.ssh_host, run.ssh_port) == ("ssh4.vast.ai", 40022)
    assert stopped.state == "stopped" and stopped.raw_state == "exited"
    assert stopped.bills_now == pytest.approx(0.0411)  # storage only
    assert loading.state == "starting" and loading.contract_end is None
    # The burn rate is what bills now: two GPUs' dph_total and one stopped disk.
    assert account.burn_per_hour == pytest.approx(0.4028 + 0.0411 + 1.1022)


async def test_vast_follows_next_token(httpserver: HTTPServer) -> None:
    page = recorded("vastai_instances.json")
    assert isinstance(page, dict)
    first = dict(page, instances=page["instances"][:1], next_token="tok-2")
    second = dict(page, instances=page["instances"][1:], next_token=None)
    httpserver.expect_ordered_request("/api/v1/instances/").respond_with_json(first)
    httpserver.expect_ordered_request("/api/v1/instances/",
                                      query_string={"limit": "100", "select_filters": "{}",
                                                    "order_by": '[{"col": "id", "dir": "asc"}]',
                                                    "after_token": "tok-2"}
                                      ).respond_with_json(second)
    httpserver.expect_ordered_request("/api/v0/users/current/").respond_with_json(
        recorded("vastai_user.json"))
    truth = await VastClient(key(), base=url(httpserver)).poll(NOW)
    assert truth.account is not None
    assert [i.instance_id for i in truth.account.instances] == ["312", "313", "314"]


async def test_runpod_pods_balance_and_volumes(httpserver: HTTPServer) -> None:
    serve_runpod(httpserver)
    truth = await runpod(httpserver).poll(NOW)
    assert truth.account is not None
    account = truth.account
    assert account.balance == pytest.approx(12.3)
    assert account.burn_per_hour == pytest.approx(0.7229)  # the platform's own figure
    pod, leftover = account.instances
    assert pod.state == "running" and pod.price_per_hour == pytest.approx(0.69)  # "0.69" string
    assert pod.network_volume is False and pod.disk_gb == 70
    assert pod.uptime_s == pytest.approx(NOW - 1794992400.0)
    assert leftover.state == "stopped" and leftover.network_volume is True
    assert leftover.storage_per_hour == pytest.approx(100 * 0.20 / 730)
    body = json.loads(httpserver.log[-1][0].get_data())
    assert "myself" in body["query"] and "mutation" not in body["query"]


async def test_lambda_instances_in_dollars(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/api/v1/instances",
                              headers={"Authorization": f"Bearer {KEY}"}).respond_with_json(
        recorded("lambda_instances.json"))
    truth = await LambdaClient(key(), base=url(httpserver)).poll(NOW)
    assert truth.account is not None and truth.account.balance is None
    active, alert = truth.account.instances
    assert active.state == "running" and active.price_per_hour == pytest.approx(1.29)
    assert active.disk_gb == 512 and active.ssh_host == "198.51.100.2"
    assert alert.state == "unhealthy" and alert.bills_now == pytest.approx(2.49)  # Alert bills


@pytest.mark.parametrize(("status", "headers", "reason"), [
    (401, {}, "401 unauthorized: check the API key (TEST_KEY)"),
    (403, {}, "403 unauthorized"),
    (429, {"Retry-After": "30"}, "429 rate limited, retry after 30 s"),
    (429, {}, "429 rate limited"),
    (500, {}, "500 server error"),
    (503, {}, "503 server error"),
])
async def test_http_errors_are_named(httpserver: HTTPServer, status: int, headers: dict[str, str],
                                     reason: str) -> None:
    httpserver.expect_request("/api/v1/instances/").respond_with_data(
        "nope", status=status, headers=headers)
    truth = await VastClient(key(), base=url(httpserver)).poll(NOW)
    assert not truth.known and reason in truth.error
    assert truth.retry_after == (30.0 if headers else None)
    assert next_poll_s({"vastai": truth}) == POLL_INTERVAL_S  # 30 s is sooner than the interval
    assert next_poll_s({"vastai": dataclasses.replace(truth, retry_after=900.0)}) == 900.0
    assert truth.since == NOW
    assert "platform state unknown since" in truth.unknown_text()


async def test_malformed_json_and_renamed_fields(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/api/v1/instances").respond_with_data("{not json", status=200)
    truth = await LambdaClient(key(), base=url(httpserver)).poll(NOW)
    assert truth.error == "malformed JSON in the response"

    httpserver.clear()
    rows = recorded("vastai_instances.json")
    assert isinstance(rows, dict)
    renamed = [dict(r) for r in rows["instances"]]
    renamed[0]["dph"] = renamed[0].pop("dph_total")  # a renamed field
    httpserver.expect_request("/api/v1/instances/").respond_with_json(dict(rows, instances=renamed))
    httpserver.expect_request("/api/v0/users/current/").respond_with_json(recorded("vastai_user.json"))
    truth = await VastClient(key(), base=url(httpserver)).poll(NOW)
    assert not truth.known
    assert truth.error == "field 'dph_total' missing in instance 312 (the API changed?)"

    httpserver.clear()
    httpserver.expect_request("/v1/pods").respond_with_json(recorded("runpod_pods.json"))
    httpserver.expect_request("/graphql").respond_with_json({"data": {"myself": None}})
    truth = await runpod(httpserver).poll(NOW)
    assert "data.myself" in truth.error

    httpserver.clear()
    httpserver.expect_request("/v1/pods").respond_with_json([{"id": "p1", "desiredStatus": "RUNNING",
                                                              "costPerHr": "cheap"}])
    truth = await runpod(httpserver).poll(NOW)
    assert truth.error == "field 'costPerHr' is not a number in pod p1"


async def test_graphql_error_is_reported(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/v1/pods").respond_with_json([])
    httpserver.expect_request("/graphql").respond_with_json(
        {"errors": [{"message": "Cannot query field \"clientBalance\" on type \"User\"."}]})
    truth = await runpod(httpserver).poll(NOW)
    assert truth.error.startswith("GraphQL error: Cannot query field")


async def test_oversized_response_is_cut(httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "MAX_RESPONSE_BYTES", 1000)
    httpserver.expect_request("/api/v1/instances").respond_with_data(
        json.dumps({"data": [], "pad": "x" * 5000}), content_type="application/json")
    truth = await LambdaClient(key(), base=url(httpserver)).poll(NOW)
    assert truth.error == "response over 1000 bytes: cut"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A real TCP server that accepts and never answers (a hung API)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    sock.close()


async def test_timeout_is_named_not_waited_out(silent_server: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base, "TIMEOUT", httpx.Timeout(0.3))
    truth = await LambdaClient(key(), base=silent_server).poll(NOW)
    assert not truth.known and truth.error.startswith("timeout after")


async def test_refused_connection_is_named() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    truth = await LambdaClient(key(), base=f"http://127.0.0.1:{port}").poll(NOW)
    assert truth.error == "connection failed: ConnectError"


async def test_no_key_says_where_to_put_one(tmp_path: Path) -> None:
    found = RunPodClient.find_key({}, tmp_path)
    assert found is None
    truth = await RunPodClient(None).poll(NOW)
    assert "no API key: set RUNPOD_API_KEY" in truth.error and ".runpod/config.toml" in truth.error


def test_keys_from_env_and_cli_files(tmp_path: Path) -> None:
    assert VastClient.find_key({"VAST_API_KEY": " abc "}, tmp_path).reveal() == "abc"  # type: ignore[union-attr]
    (tmp_path / ".config" / "vastai").mkdir(parents=True)
    (tmp_path / ".config" / "vastai" / "vast_api_key").write_text("vastkey\n")
    vast = VastClient.find_key({}, tmp_path)
    assert vast is not None and vast.reveal() == "vastkey" and vast.source == "~/.config/vastai/vast_api_key"
    (tmp_path / ".runpod").mkdir()
    (tmp_path / ".runpod" / "config.toml").write_text('apiKey = "rpkey"\napiUrl = "x"\n')
    assert RunPodClient.find_key({}, tmp_path).reveal() == "rpkey"  # type: ignore[union-attr]
    (tmp_path / ".lambda_cloud").mkdir()
    (tmp_path / ".lambda_cloud" / "lambda_keys").write_text("api_key = lamkey\n")
    assert LambdaClient.find_key({}, tmp_path).reveal() == "lamkey"  # type: ignore[union-attr]
    (tmp_path / ".runpod" / "config.toml").write_text("not = [toml")
    assert RunPodClient.find_key({}, tmp_path) is None


async def test_the_key_never_appears(httpserver: HTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    """Not in repr, error texts, logs, nor anything the truth holds, whatever the server says."""
    caplog.set_level(logging.DEBUG)

    def echo(request: Request) -> Response:  # a hostile server quoting the header back
        return Response(f"bad key {request.headers.get('Authorization')}", status=401)

    httpserver.expect_request("/api/v1/instances/").respond_with_handler(echo)
    client = VastClient(key(), base=url(httpserver))
    assert KEY not in repr(client.key) and KEY not in str(client.key)
    truth = await client.poll(NOW)
    httpserver.clear()
    httpserver.expect_request("/api/v1/instances").respond_with_data("{", status=200)
    truth2 = await LambdaClient(key(), base=url(httpserver)).poll(NOW)
    for t in (truth, truth2):
        assert KEY not in repr(t) and KEY not in t.unknown_text()
    assert KEY not in caplog.text
    # A raw error quoting the key is scrubbed before it is kept.
    assert client._scrub(f"echo {KEY}") == "echo ***"


async def test_poll_all_carries_since_and_builds_clients(httpserver: HTTPServer) -> None:
    serve_vast(httpserver)
    good = await poll_all([VastClient(key(), base=url(httpserver))], {}, NOW)
    assert good["vastai"].known
    httpserver.clear()
    httpserver.expect_request("/api/v1/instances/").respond_with_data("", status=502)
    later = await poll_all([VastClient(key(), base=url(httpserver))], good, NOW + 300)
    assert later["vastai"].since == NOW and later["vastai"].at == NOW + 300  # last known
    again = carry_since(later["vastai"], PlatformTruth("vastai", NOW + 600, None, "x", NOW + 600))
    assert again.since == NOW
    kinds = [type(c).__name__ for c in clients_for(["autodl", "runpod", "vastai", "lambda"])]
    assert kinds == ["LambdaClient", "RunPodClient", "VastClient"]
    demo = [("vastai", "demo-v1-0001"), ("runpod", "demo-r1-0001"), ("runpod", "real-pod")]
    assert [c.platform for c in clients_for_sweep(demo, {})] == ["runpod"]
    stand_in = clients_for_sweep(demo, {"COCKPIT_VASTAI_API": "http://127.0.0.1:9"})
    assert [c.platform for c in stand_in] == ["runpod", "vastai"]


def test_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COCKPIT_VASTAI_API", "http://127.0.0.1:9/")
    monkeypatch.setenv("COCKPIT_RUNPOD_GRAPHQL_API", "http://127.0.0.1:9/gql")
    assert VastClient(None).base == "http://127.0.0.1:9"
    assert RunPodClient(None).graphql == "http://127.0.0.1:9/gql"
    monkeypatch.delenv("COCKPIT_VASTAI_API")
    assert VastClient(None).base == "https://console.vast.ai"
