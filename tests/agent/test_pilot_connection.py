"""The pilot's HTTP connection: keep-alive, token, JSON, a closed connection replaced once, errors."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from isthmus.agent.pilot import Connection, HttpError
from isthmus.live.manager import free_port


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, str, str | None, object]]] = []
    connections: ClassVar[set[tuple[str, int]]] = set()
    drop_after_answer: ClassVar[bool] = False

    def _answer(self, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()
        if type(self).drop_after_answer:  # the server forgets the connection without saying so
            self.close_connection = True

    def do_GET(self) -> None:
        type(self).seen.append(("GET", self.path, self.headers.get("Authorization"), None))
        type(self).connections.add(self.client_address)
        self._answer({"commands": []})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append(("POST", self.path, self.headers.get("Authorization"), body))
        type(self).connections.add(self.client_address)
        self._answer({"ok": True, "echo": body})

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    _Handler.seen = []
    _Handler.connections = set()
    _Handler.drop_after_answer = False
    srv = ThreadingHTTPServer(("127.0.0.1", free_port()), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_requests_share_one_connection_and_carry_the_token(server: str) -> None:
    c = Connection(server, "tok", 5.0)
    r = c.request("GET", "/pilot/poll", params={"pilot_id": "a b", "ack": 3, "wait": 0.5})
    assert r.status_code == 200 and r.json() == {"commands": []}
    r = c.request("POST", "/pilot/report", body={"pilot_id": "a", "reports": [{"job": 1}]})
    assert r.json()["echo"] == {"pilot_id": "a", "reports": [{"job": 1}]}
    c.close()
    assert [s[:3] for s in _Handler.seen] == [
        ("GET", "/pilot/poll?pilot_id=a+b&ack=3&wait=0.5", "Bearer tok"),
        ("POST", "/pilot/report", "Bearer tok"),
    ]
    assert len(_Handler.connections) == 1


def test_a_connection_closed_by_the_server_is_replaced_once(server: str) -> None:
    _Handler.drop_after_answer = True
    c = Connection(server, "tok", 5.0)
    for i in range(3):
        assert c.request("POST", "/pilot/report", body={"n": i}).status_code == 200
    assert [s[3] for s in _Handler.seen] == [{"n": 0}, {"n": 1}, {"n": 2}]  # each sent once
    assert len(_Handler.connections) == 3


def test_unreachable_manager_and_bad_url() -> None:
    c = Connection(f"http://127.0.0.1:{free_port()}", "tok", 1.0)
    with pytest.raises(HttpError, match="GET /pilot/poll"):
        c.request("GET", "/pilot/poll")
    with pytest.raises(ValueError, match="expected http://HOST:PORT"):
        Connection("ftp://host", "tok", 1.0)
