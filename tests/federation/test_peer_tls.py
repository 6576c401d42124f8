"""A peer's transport: its CA file, and plain HTTP outside loopback only when its entry allows it."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from isthmus.config.loader import environment_from_text
from isthmus.config.schema import environment_to_dict, validate_document
from isthmus.federation.links import PeerConfigError, peer_verify
from isthmus.model.peers import PeerSettings
from isthmus.tls import make_self_signed


def test_a_peer_is_verified_against_its_ca_file_and_plain_http_outside_loopback_is_refused(tmp_path: Path) -> None:
    cert, _ = make_self_signed(tmp_path / "tls", ["b"])
    assert isinstance(peer_verify(PeerSettings("B", "https://b:8750", ca_file=str(cert))), ssl.SSLContext)
    assert peer_verify(PeerSettings("B", "https://b:8750")) is True
    assert peer_verify(PeerSettings("B", "http://127.0.0.1:8750")) is True
    assert peer_verify(PeerSettings("B", "http://10.0.0.2:8750", insecure_http=True)) is True
    with pytest.raises(PeerConfigError, match=r"peer 'B': refusing plain HTTP to 10\.0\.0\.2 .*insecure_http = true"):
        peer_verify(PeerSettings("B", "http://10.0.0.2:8750"))
    with pytest.raises(PeerConfigError, match="peer 'B': cannot read CA file"):
        peer_verify(PeerSettings("B", "https://b:8750", ca_file=str(tmp_path / "none.pem")))


def test_ca_file_and_insecure_http_are_read_and_round_trip() -> None:
    text = (
        'name = "A"\n[[sites]]\nname = "c1"\nnodes = 1\n'
        '[[peers]]\nname = "B"\naddress = "https://b:8750"\ntoken_env = "S"\nca_file = "/etc/isthmus/b.pem"\n'
        '[[peers]]\nname = "C"\naddress = "http://c:8750"\ntoken_env = "S"\ninsecure_http = true\n'
    )
    env = environment_from_text(text, "toml")
    assert [(p.ca_file, p.insecure_http) for p in env.peers] == [("/etc/isthmus/b.pem", False), ("", True)]
    assert validate_document(environment_to_dict(env)) == env
