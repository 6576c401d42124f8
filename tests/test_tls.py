"""isthmus.tls: the self-signed pair, the CA contexts that verify it, and the plain-HTTP rule."""

from __future__ import annotations

import socket
import ssl
import stat
import threading
from pathlib import Path

import pytest

from isthmus import tls


def _handshake(cert: Path, key: Path, ca: Path | None, server_name: str) -> None:
    """One TLS handshake to a server with (cert, key) on loopback, verified against `ca`."""
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    with socket.create_server(("127.0.0.1", 0)) as listener:

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_ctx.wrap_socket(conn, server_side=True) as s:
                    s.recv(1)
            except (ssl.SSLError, OSError):
                conn.close()

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        raw = socket.create_connection(listener.getsockname(), timeout=5)
        try:
            with tls.client_context(ca).wrap_socket(raw, server_hostname=server_name) as s:
                s.sendall(b"x")
        finally:
            raw.close()
            t.join(5)


def test_a_self_signed_pair_is_its_own_ca_for_the_machine_names_and_loopback(tmp_path: Path) -> None:
    cert, key = tls.make_self_signed(tmp_path / "tls", ["head.example.org", "10.1.2.3"])
    assert (cert.name, key.name) == ("cert.pem", "key.pem")
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert tls.is_self_signed(cert)
    tls.check_server_pair(cert, key)
    for name in ("head.example.org", "127.0.0.1"):
        _handshake(cert, key, cert, name)
    # a name the certificate does not carry, or no CA file (the trusted CAs): refused
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        _handshake(cert, key, cert, "other.example.org")
    with pytest.raises(ssl.SSLCertVerificationError, match="self-signed"):
        _handshake(cert, key, None, "127.0.0.1")
    # a pair in use is never overwritten
    with pytest.raises(FileExistsError, match="exists already"):
        tls.make_self_signed(tmp_path / "tls")


def test_the_default_names_are_this_machines() -> None:
    names = tls.machine_names()
    assert socket.gethostname() in names and "localhost" in names and len(names) == len(set(names))


def test_a_key_of_another_certificate_or_a_missing_file_is_refused_naming_them(tmp_path: Path) -> None:
    cert, _ = tls.make_self_signed(tmp_path / "a", ["a"])
    _, other_key = tls.make_self_signed(tmp_path / "b", ["b"])
    with pytest.raises(ValueError, match="cannot be used together"):
        tls.check_server_pair(cert, other_key)
    with pytest.raises(ValueError, match="cannot read TLS certificate"):
        tls.check_server_pair(tmp_path / "none.pem", other_key)
    with pytest.raises(ValueError, match=f"cannot read CA file {tmp_path / 'none.pem'}"):
        tls.client_context(tmp_path / "none.pem")


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "localhost", "[::1]", "::1"])
def test_loopback_hosts(host: str) -> None:
    assert tls.is_loopback(host)


@pytest.mark.parametrize("host", ["0.0.0.0", "10.0.0.2", "head.example.org", "::", ""])
def test_hosts_outside_loopback(host: str) -> None:
    assert not tls.is_loopback(host)


def test_plain_http_outside_loopback_is_refused_unless_allowed() -> None:
    tls.check_plain_http("http://127.0.0.1:8750", False, "the manager URL", "--insecure-http")
    tls.check_plain_http("https://head:8750", False, "the manager URL", "--insecure-http")
    tls.check_plain_http("http://head:8750", True, "the manager URL", "--insecure-http")
    with pytest.raises(tls.InsecureTransportError) as err:
        tls.check_plain_http("http://head:8750/x", False, "the manager URL", "--insecure-http")
    assert str(err.value) == (
        "refusing plain HTTP to head (the manager URL http://head:8750/x): tokens would cross the network "
        "in clear; use https:// or allow it with --insecure-http"
    )
