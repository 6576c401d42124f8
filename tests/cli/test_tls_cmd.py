"""`isthmus tls self-signed DIR`: a pair for a trial, never overwriting one; the client commands' --ca-file."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.tls import check_server_pair, is_self_signed


def test_self_signed_writes_a_matching_pair_once(tmp_path: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["tls", "self-signed", str(tmp_path / "tls"), "--name", "head.example.org"])
    assert out.exit_code == 0, out.output
    cert, key = tmp_path / "tls" / "cert.pem", tmp_path / "tls" / "key.pem"
    assert f"isthmus server --tls-cert {cert} --tls-key {key}" in out.stdout
    check_server_pair(cert, key)
    assert is_self_signed(cert) and key.stat().st_mode & 0o777 == 0o600
    again = runner.invoke(app, ["tls", "self-signed", str(tmp_path / "tls")])
    assert again.exit_code == 2 and "exists already" in again.stderr


def test_a_client_command_with_an_unreadable_ca_file_exits_2_naming_it(tmp_path: Path) -> None:
    ca = tmp_path / "none.pem"
    out = CliRunner().invoke(app, ["jobs", "--url", "https://127.0.0.1:1", "--ca-file", str(ca)])
    assert out.exit_code == 2 and out.stderr == f"error: cannot read CA file {ca}: No such file or directory\n"
