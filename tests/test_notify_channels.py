"""Notification channels through apprise, against a real local HTTP server (pytest-httpserver).

apprise's Slack, DingTalk and Feishu plugins post to fixed cloud hosts (`hooks.slack.com`,
`oapi.dingtalk.com`, `open.feishu.cn`) that no URL form redirects (read in apprise 2.2's
plugins/slack.py `webhook_url`, dingtalk.py and feishu.py `notify_url`). These tests therefore
MONKEYPATCH those class constants to the local server: everything else (URL parsing, the
payload each plugin builds, the HTTP POST, apprise's result and logs) is the real code.
`json://` needs no patch: its host is the local server.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from cockpit.models.alerts import MESSAGE_LIMIT, Alert
from cockpit.models.sweep import AlertSettings
from cockpit.services.alerts.notify import ChannelResult, Notifier, redact, secrets_of
from cockpit.services.config.sweepfile import load_sweep
from cockpit.services.config.yamlfile import ConfigError

SLACK_TOKENS = ("T1JJ3T3L2", "A1BRTD4JD", "TIiajkdnlazkcOXrIdevi7")
DING_TOKEN = "b1e5f0c2d4a6SECRET9f8e7d6c5b4a3"
FEISHU_TOKEN = "0f1e2d3c-SECRET-4b5a-6978-8796a5b4c3d2"
JSON_PASSWORD = "hunter2hunter2"


def failed_alert(cell: str = "det_baseline", cause: str = "CUDA out of memory") -> Alert:
    """A cell-failed alert as `material` builds it, with box text in it."""
    return Alert(("failed", "a1", cell, "1795000000"), "a1", "cell-failed",
                 f"a1: {cell} failed: {cause}",
                 "exit=1, oom (T1): lower the batch size or enable gradient checkpointing "
                 "(a retry with the same config is allowed)")


def notifier(*urls: str, **kwargs: object) -> Notifier:
    return Notifier(AlertSettings(desktop=False, notify=urls), "ablation-nov",
                    backoff=0.0, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def cloud(httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[HTTPServer]:
    """The local server standing in for Slack, DingTalk and Feishu (see the module doc)."""
    from apprise.plugins.dingtalk import NotifyDingTalk
    from apprise.plugins.feishu import NotifyFeishu
    from apprise.plugins.slack import NotifySlack

    base = httpserver.url_for("").rstrip("/")
    monkeypatch.setattr(NotifySlack, "webhook_url", f"{base}/services")
    monkeypatch.setattr(NotifyDingTalk, "notify_url", f"{base}/robot/send?access_token={{token}}")
    monkeypatch.setattr(NotifyFeishu, "notify_url", f"{base}/open-apis/bot/v2/hook/{{token}}/")
    yield httpserver


def bodies(server: HTTPServer, path: str) -> list[dict[str, object]]:
    return [json.loads(req.get_data(as_text=True)) for req, _ in server.log if req.path == path]


def assert_no_secret(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, f"secret {secret[:3]}... leaked"


# -- the message -------------------------------------------------------------------------------
def test_message_names_box_cell_cause_and_action_and_shows_controls() -> None:
    alert = failed_alert("det\x1b]52;c;AAAA\x07", "CUDA OOM [bold red]x[/bold red]\u202e")
    message = alert.message("ablation-nov")
    lines = message.split("\n")
    assert lines[0].startswith("cockpit ablation-nov: a1, cell det")
    assert "failed: CUDA OOM [bold red]x[/bold red]" in lines[1]  # text, not markup
    assert lines[2].startswith("Next: exit=1, oom (T1): lower the batch size")
    assert "\x1b" not in message and "\x07" not in message and "\u202e" not in message
    assert "␛]52;c;AAAA␇" in message  # shown, not obeyed


def test_message_is_bounded() -> None:
    alert = Alert(("failed", "a1", "c" * 5000, ""), "a1", "cell-failed", "a1: " + "x" * 50_000,
                  "y\n" * 50_000)
    message = alert.message("s")
    assert len(message) <= MESSAGE_LIMIT + 60
    assert message.count("\n") == 2  # the detail's newlines are shown, not sent


# -- real deliveries --------------------------------------------------------------------------
async def test_json_channel_posts_the_plain_text_message(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    url = f"json://cockpit:{JSON_PASSWORD}@127.0.0.1:{httpserver.port}/hook"
    results = await notifier(url).deliver(failed_alert())
    assert results == [ChannelResult(f"json://127.0.0.1:{httpserver.port}/…", True, 1, "")]
    [body] = bodies(httpserver, "/hook")
    assert body["message"] == failed_alert().message("ablation-nov")
    assert body["type"] == "info"
    [(request, _)] = httpserver.log
    assert request.authorization is not None and request.authorization.password == JSON_PASSWORD


async def test_slack_dingtalk_and_feishu_payloads(cloud: HTTPServer) -> None:
    cloud.expect_request(f"/services/{'/'.join(SLACK_TOKENS)}").respond_with_data("ok")
    cloud.expect_request("/robot/send").respond_with_json({"errcode": 0, "errmsg": "ok"})
    cloud.expect_request(f"/open-apis/bot/v2/hook/{FEISHU_TOKEN}/").respond_with_json(
        {"code": 0, "msg": "success"})
    alert = failed_alert(cause="CUDA <out> of memory & more")
    hub = notifier(f"slack://{'/'.join(SLACK_TOKENS)}/", f"dingtalk://{DING_TOKEN}/",
                   f"feishu://{FEISHU_TOKEN}/")
    results = await hub.deliver(alert)
    assert [(r.channel, r.ok, r.attempts) for r in results] == [
        ("slack://…", True, 1), ("dingtalk://…", True, 1), ("feishu://…", True, 1)]
    message = alert.message("ablation-nov")

    [slack] = bodies(cloud, f"/services/{'/'.join(SLACK_TOKENS)}")
    attachments = slack["attachments"]
    assert isinstance(attachments, list)
    # Slack's own escaping of <, > and & in text; nothing else changed, no markup added.
    escaped = message.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    assert attachments[0]["text"] == escaped
    assert slack["mrkdwn"] is False

    [ding] = bodies(cloud, "/robot/send")
    assert ding["msgtype"] == "text"
    assert ding["text"] == {"content": message}
    [(ding_request, _)] = [(q, r) for q, r in cloud.log if q.path == "/robot/send"]
    assert ding_request.args["access_token"] == DING_TOKEN

    [feishu] = bodies(cloud, f"/open-apis/bot/v2/hook/{FEISHU_TOKEN}/")
    assert feishu["msg_type"] == "text"
    content = feishu["content"]
    assert isinstance(content, dict) and content["text"] == message


async def test_failing_channel_reports_error_without_secrets(
        cloud: HTTPServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    cloud.expect_request("/robot/send").respond_with_data("boom", status=500)
    cloud.expect_request("/hook").respond_with_data("nope", status=500)
    hub = notifier(f"dingtalk://{DING_TOKEN}/",
                   f"json://cockpit:{JSON_PASSWORD}@127.0.0.1:{cloud.port}/hook?token={DING_TOKEN}x")
    results = await hub.deliver(failed_alert())
    assert [(r.channel, r.ok, r.attempts) for r in results] == [
        ("dingtalk://…", False, 2), (f"json://127.0.0.1:{cloud.port}/…", False, 2)]
    assert all("500" in r.error for r in results), results
    assert len([q for q, _ in cloud.log if q.path == "/robot/send"]) == 2  # retried once
    assert_no_secret(repr(results), DING_TOKEN, JSON_PASSWORD)
    # apprise logs the DingTalk URL (token in its query) and urllib3 the request line at
    # DEBUG: both were captured here, scrubbed.
    # (werkzeug's lines are the stand-in cloud's own request log, not ours.)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name != "werkzeug")
    assert "DingTalk URL" in ours and "POST /robot/send" in ours
    assert_no_secret(ours, DING_TOKEN, JSON_PASSWORD)


async def test_a_channel_that_never_answers_times_out(httpserver: HTTPServer) -> None:
    release = threading.Event()

    def hang(request: Request) -> Response:
        release.wait(30)  # answers only when the test is over
        return Response("late")

    httpserver.expect_request("/hang").respond_with_handler(hang)
    hub = notifier(f"json://127.0.0.1:{httpserver.port}/hang", timeout=0.5, attempts=1)
    try:
        [result] = await hub.deliver(failed_alert())
    finally:
        release.set()
    assert result.ok is False and result.attempts == 1
    assert "did not finish" in result.error, result.error


async def test_rate_limit_holds_back_and_counts(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/hook").respond_with_data("ok")
    now = [1000.0]
    hub = notifier(f"json://127.0.0.1:{httpserver.port}/hook", clock=lambda: now[0],
                   rate_limit=2, rate_window=60.0)
    oks = []
    for i in range(5):
        [result] = await hub.deliver(failed_alert(cell=f"cell{i}"))
        oks.append(result.ok)
    assert oks == [True, True, None, None, None]
    assert len(bodies(httpserver, "/hook")) == 2
    now[0] += 61.0
    [result] = await hub.deliver(failed_alert(cell="later"))
    assert result.ok is True
    last = bodies(httpserver, "/hook")[-1]["message"]
    assert isinstance(last, str)
    assert "cell later" in last and "+3 more alerts held back by the rate limit" in last
    [result] = await hub.deliver(failed_alert(cell="next"))
    assert result.ok is True
    assert "held back" not in str(bodies(httpserver, "/hook")[-1]["message"])


async def test_webhook_and_apprise_channels_together(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/plain").respond_with_data("ok")
    httpserver.expect_request("/apprise").respond_with_data("ok")
    settings = AlertSettings(desktop=False, webhook=httpserver.url_for("/plain?key=abcdefgh1234"),
                             notify=(f"json://127.0.0.1:{httpserver.port}/apprise",))
    results = await Notifier(settings, "sw").deliver(failed_alert())
    assert [(r.channel, r.ok) for r in results] == [
        (f"webhook http://localhost:{httpserver.port}/…", True),
        (f"json://127.0.0.1:{httpserver.port}/…", True)]
    [plain] = bodies(httpserver, "/plain")
    assert plain == failed_alert().payload("sw")  # the webhook's own format is unchanged


# -- redaction ---------------------------------------------------------------------------------
@pytest.mark.parametrize(("url", "label"), [
    ("slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7/#general", "slack://…"),
    (f"dingtalk://{DING_TOKEN}/", "dingtalk://…"),
    ("tgram://123456:ABCdefGHIjkl/-1001234/", "tgram://…"),
    ("mailto://me:app-password-99@gmail.com", "mailto://…"),
    ("json://user:pass1234word@10.0.0.5:8080/hook?token=abcdef123456", "json://10.0.0.5:8080/…"),
    ("jsons://ntfy.example.org/topic", "jsons://ntfy.example.org/…"),
    ("https://hooks.slack.com/services/T1JJ3T3L2/A1BRTD4JD/TIiajk", "https://hooks.slack.com/…"),
    ("json://user:pa/ss@word@host/x", "json://…"),  # a confused parse shows no host
    ("not a url", "(not a URL)"),
])
def test_redact_examples(url: str, label: str) -> None:
    assert redact(url) == label


TOKEN = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_", min_size=8,
                max_size=40)
SCHEME = st.sampled_from(["slack", "dingtalk", "feishu", "tgram", "discord", "ntfy", "json",
                          "jsons", "form", "https", "mailto", "wecombot", "lark"])


@settings(max_examples=300, deadline=None)
@given(scheme=SCHEME, user=TOKEN, password=TOKEN, path=st.lists(TOKEN, min_size=1, max_size=4),
       query=TOKEN, with_auth=st.booleans(), host_is_token=st.booleans())
def test_redact_never_leaks_a_token(scheme: str, user: str, password: str, path: list[str],
                                    query: str, with_auth: bool, host_is_token: bool) -> None:
    host = path[0] if host_is_token else "box.lan"
    auth = f"{user}:{password}@" if with_auth else ""
    url = f"{scheme}://{auth}{host}/{'/'.join(path[1:])}?token={query}"
    label = redact(url)
    secrets = [query, *path[1:], *([user, password] if with_auth else [])]
    if host_is_token:
        secrets.append(host)
    for secret in secrets:
        assert secret not in label
    found = set(secrets_of(url))
    assert {s for s in secrets if len(s) >= 6} <= found | {"box.lan"}


# -- the sweep file ----------------------------------------------------------------------------
SWEEP = """\
sweep: t
alerts:
  notify:
    - json://127.0.0.1:9/x
    - slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7
    - nosuchscheme://{token}/x
    - dingtalk://
instances:
  - name: a1
    profile: autodl
    host: x
"""


def test_sweep_rejects_unknown_scheme_with_file_line_and_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.format(token=DING_TOKEN))
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    text = str(info.value)
    assert re.search(r"sweep\.yaml:6: alerts\.notify\[2\]: nosuchscheme:// is not a scheme "
                     r"apprise knows", text), text
    assert re.search(r"sweep\.yaml:7: alerts\.notify\[3\]: apprise cannot use this dingtalk:// "
                     r"URL", text), text
    assert len(info.value.problems) == 2
    assert_no_secret(text, DING_TOKEN)


def test_sweep_accepts_known_schemes(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(SWEEP.replace("    - nosuchscheme://{token}/x\n    - dingtalk://\n", ""))
    loaded = load_sweep(path)
    assert loaded.sweep.alerts.notify == ("json://127.0.0.1:9/x",
                                          "slack://T1JJ3T3L2/A1BRTD4JD/TIiajkdnlazkcOXrIdevi7")
