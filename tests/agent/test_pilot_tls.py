"""The pilot over TLS: it verifies an https manager against the CA file it is given, and refuses
a plain-HTTP manager URL outside loopback unless told --insecure-http."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from isthmus.agent.pilot import Connection, HttpError, main
from isthmus.tls import client_context, make_self_signed


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        data = json.dumps({"auth": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def https_manager(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An HTTPS server on loopback with a self-signed pair: its URL and its certificate."""
    cert, key = make_self_signed(tmp_path / "tls", ["localhost"])
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"https://127.0.0.1:{srv.server_address[1]}", cert
    srv.shutdown()
    srv.server_close()


def test_the_pilot_verifies_an_https_manager_against_its_ca_file(https_manager: tuple[str, Path]) -> None:
    url, cert = https_manager
    c = Connection(url, "tok", 5.0, client_context(cert))
    assert c.request("GET", "/pilot/poll").json() == {"auth": "Bearer tok"}
    c.close()
    # without the CA file (the trusted CAs only) the self-signed manager is refused
    with pytest.raises(HttpError, match="CERTIFICATE_VERIFY_FAILED"):
        Connection(url, "tok", 5.0, client_context(None)).request("GET", "/pilot/poll")


def test_plain_http_outside_loopback_or_an_unreadable_ca_file_stops_the_pilot_at_once(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv("ISTHMUS_PILOT_TOKEN", "tok")
    assert main(["--url", "http://head.example.org:8750", "--node", "n"]) == 2
    assert "refusing plain HTTP to head.example.org" in capsys.readouterr().err
    ca = tmp_path / "none.pem"
    assert main(["--url", "https://head.example.org:8750", "--node", "n", "--ca-file", str(ca)]) == 2
    assert f"cannot read CA file {ca}" in capsys.readouterr().err
