"""The whole live path over TLS (docs/security.md): two managers serving HTTPS, one with the
self-signed pair it makes at its start, the other with a pair given; their peer link, their
pilots, the CLI's submission and output all go over https verified against CA files, and a
client without the CA file is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from livekit import wait_state
from peerkit import federation
from typer.testing import CliRunner

from isthmus.cli.main import app

TERMINAL = ("completed", "failed", "cancelled", "rejected", "lost", "timeout")


def test_pilots_peers_and_the_cli_talk_https_verified_against_the_ca(
    tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ISTHMUS_CA_FILE", raising=False)
    # start() waits until each manager sees the other up with its resource data: openConn and
    # the pushes went over https both ways, each verified against the peer entry's ca_file
    with federation(tmp_path, tag, names=("A", "B"), nodes=(1, 2), tls=True) as fed:
        a = fed["A"]
        assert a.url.startswith("https://") and a.ca_file == a.state_dir / "tls" / "cert.pem"
        assert (a.state_dir / "tls" / "key.pem").stat().st_mode & 0o777 == 0o600
        token = a.admin_token
        runner = CliRunner()
        common = ["--url", a.url, "--token", token]
        # the CLI with --ca-file submits; A's local pilot (told A's certificate as its CA file
        # when it was started) registers and runs it over https
        out = runner.invoke(app, ["submit", *common, "--ca-file", str(a.ca_file), "--json", "--", "echo", "over-tls"])
        assert out.exit_code == 0, out.output
        jid = json.loads(out.stdout)["id"]
        # a 2-processor job no site of A can run is forwarded to B over the https peer link
        # and runs there on B's pilot
        with a.client() as c:
            assert wait_state(c, jid, TERMINAL, 30)["state"] == "completed"
            far = c.submit(command="true", size=2)
            done = wait_state(c, far, TERMINAL, 30)
        assert done["state"] == "completed" and done["forwarded"]["where"] == "B/c1"
        # the output through the CLI with ISTHMUS_CA_FILE
        out = runner.invoke(app, ["logs", str(jid), *common], env={"ISTHMUS_CA_FILE": str(a.ca_file)})
        assert out.exit_code == 0 and out.stdout.strip() == "over-tls", out.output
        # without the CA file the manager's certificate cannot be verified: refused like any
        # manager that cannot be reached (exit 1), saying why and what to give
        out = runner.invoke(app, ["jobs", *common])
        assert out.exit_code == 1
        assert "certificate verify failed" in out.stderr and "--ca-file or ISTHMUS_CA_FILE" in out.stderr
        assert out.stderr.startswith(f"error: cannot reach the manager at {a.url}: ")
        # B's certificate is not A's: the CLI given A's CA file refuses B
        out = runner.invoke(app, ["jobs", "--url", fed["B"].url, "--token", token, "--ca-file", str(a.ca_file)])
        assert out.exit_code == 1 and "certificate verify failed" in out.stderr
