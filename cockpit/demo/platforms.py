"""The demo fleet's stand-in for the RunPod and vast.ai APIs, so `cockpit demo` shows platform
truth: a balance runway under 24 h, a stopped pod still billing its volume, and one orphan per
account.

A stdlib `ThreadingHTTPServer` on 127.0.0.1 (ephemeral port) in a daemon thread, serving the
read-only endpoints the cockpit's clients call, in the recorded shapes of
`tests/data/platforms/` (copied with the demo's instance ids into `assets/platforms/`, since
tests/ is not shipped):

- `GET  /runpod/pods`                   -> `runpod_pods.json` (RunPod REST "List Pods")
- `POST /runpod/graphql`                -> `runpod_myself.json` (`myself { clientBalance ... }`)
- `GET  /vastai/api/v1/instances/`      -> `vastai_instances.json` (vast.ai "show instances v1")
- `GET  /vastai/api/v0/users/current/`  -> `vastai_user.json` (vast.ai "show user")

The time fields hold placeholders (`STARTED`, `STARTED_3D_AGO`, `ENDS_IN_3D`) filled in when
served, relative to when the stand-in started, so uptimes and the contract end look live.

Only `DEMO_KEY` is accepted (`Authorization: Bearer <DEMO_KEY>`); any other key is answered
401. Each request is recorded in the call log (the demo's `platform-api-calls.log`) as method,
path and `auth=demo|none|other`: the key's value is never written (a test sets a marker real
key and checks it never arrives).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cockpit.services.platforms import DEMO_KEY

ASSETS = Path(__file__).with_name("assets") / "platforms"

MAX_REQUEST_BODY = 64 * 1024
"""Bytes of a request body read: the GraphQL balance query is ~80 bytes; a larger body is not
one of the cockpit's requests and is refused unread (413)."""
MAX_LOG_PATH = 200
"""Characters of a request path written to the call log (the clients' paths are ~60)."""

STARTED_AGO_S = 2 * 3600.0
"""The demo's boxes were "rented" this long before the stand-in started (their uptime)."""
ORPHAN_AGO_S = 3 * 86400.0
"""The orphans were started three days before: forgotten, still billing."""
CONTRACT_LEFT_S = 3 * 86400.0
"""vast.ai's contract end for the demo box: three days out (a clock, not yet an alert)."""

ROUTES: dict[tuple[str, str], tuple[str, str]] = {
    ("GET", "/runpod/pods"): ("runpod_pods.json", "iso"),
    ("POST", "/runpod/graphql"): ("runpod_myself.json", "iso"),
    ("GET", "/vastai/api/v1/instances/"): ("vastai_instances.json", "epoch"),
    ("GET", "/vastai/api/v0/users/current/"): ("vastai_user.json", "epoch"),
}
"""(method, path) -> (asset, how its time placeholders are written)."""


def _fill(value: Any, moments: dict[str, float], style: str) -> Any:
    """The asset with its time placeholders replaced (ISO 8601 for RunPod, epoch s for vast)."""
    if isinstance(value, dict):
        return {k: _fill(v, moments, style) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, moments, style) for v in value]
    if isinstance(value, str) and value in moments:
        at = moments[value]
        if style == "epoch":
            return round(at, 1)
        return dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    return value


class PlatformStandIn:
    """The stand-in server: `start()` binds 127.0.0.1:0 and serves in a thread; `stop()`."""

    def __init__(self, calls_log: Path) -> None:
        self.calls_log = calls_log
        self.started = time.time()
        self.moments = {
            "STARTED": self.started - STARTED_AGO_S,
            "STARTED_3D_AGO": self.started - ORPHAN_AGO_S,
            "ENDS_IN_3D": self.started + CONTRACT_LEFT_S,
        }
        self.documents = {name: json.loads((ASSETS / name).read_text())
                          for name, _ in ROUTES.values()}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port it listens on (after `start`)."""
        assert self._server is not None
        return int(self._server.server_address[1])

    def bases(self) -> dict[str, str]:
        """The sweep's `platform_api`: platform -> base URL of its stand-in."""
        root = f"http://127.0.0.1:{self.port}"
        return {"runpod": f"{root}/runpod", "vastai": f"{root}/vastai"}

    def record(self, method: str, path: str, auth: str, status: int) -> None:
        """One line per request: never the key itself, only whether it was the demo's."""
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        line = f"{stamp} {method} {path[:MAX_LOG_PATH]!r} auth={auth} -> {status}\n"
        with self._lock, self.calls_log.open("a") as handle:
            handle.write(line)

    def answer(self, method: str, path: str, authorization: str | None) -> tuple[int, bytes, str]:
        """(status, body, auth class) for one request."""
        auth = ("none" if not authorization else
                "demo" if authorization == f"Bearer {DEMO_KEY}" else "other")
        route = ROUTES.get((method, path.split("?", 1)[0]))
        if route is None:
            return 404, b'{"error": "not found (cockpit demo stand-in)"}', auth
        if auth != "demo":
            return 401, b'{"error": "the demo stand-in accepts only the demo key"}', auth
        name, style = route
        body = json.dumps(_fill(self.documents[name], self.moments, style)).encode()
        return 200, body, auth

    def start(self) -> None:
        """Bind 127.0.0.1 on an ephemeral port and serve in a daemon thread."""
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "cockpit-demo-platforms"

            def _serve(self, method: str) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                except ValueError:
                    length = MAX_REQUEST_BODY + 1
                if not 0 <= length <= MAX_REQUEST_BODY:
                    self._send(413, b'{"error": "request body too large"}')
                    stand_in.record(method, self.path, "unread", 413)
                    return
                if length:
                    self.rfile.read(length)
                status, body, auth = stand_in.answer(method, self.path,
                                                     self.headers.get("Authorization"))
                self._send(status, body)
                stand_in.record(method, self.path, auth, status)

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def log_message(self, format: str, *args: Any) -> None:
                """Silent: requests go to the call log (stderr is the demo's own output)."""

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        name="demo-platform-api", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
