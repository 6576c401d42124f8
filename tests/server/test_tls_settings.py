"""The server's TLS settings: HTTPS with a pair or a self-signed one, the CA file pilots get, and
the refusal of plain HTTP outside loopback (one line, exit 2, nothing created)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.config import load_environment
from isthmus.live.manager import ManagerConfig, free_port
from isthmus.server.main import check_tls
from isthmus.tls import make_self_signed


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_self_signed(tmp_path_factory.mktemp("tls"), ["head.example.org"])


def test_plain_http_is_served_on_loopback_only_unless_allowed() -> None:
    assert check_tls("127.0.0.1", 8750, None, None, None, None, False) is None
    with pytest.raises(ValueError, match=r"refusing to serve plain HTTP on 0\.0\.0\.0:8750 \(outside loopback\)"):
        check_tls("0.0.0.0", 8750, None, None, None, None, False)
    assert check_tls("0.0.0.0", 8750, None, None, None, None, True) is None
    # pilots told a plain-HTTP address outside loopback would send their tokens in clear
    with pytest.raises(ValueError, match=r"refusing plain HTTP to head .*--advertise-url"):
        check_tls("127.0.0.1", 8750, "http://head:8750", None, None, None, False)


def test_pilots_get_the_self_signed_certificate_or_the_ca_given(pair: tuple[Path, Path], tmp_path: Path) -> None:
    cert, key = pair
    assert check_tls("0.0.0.0", 8750, None, cert, key, None, False) == cert
    assert check_tls("0.0.0.0", 8750, None, cert, key, cert, False) == cert
    # a CA file that does not verify the certificate: every pilot would be refused
    ca, _ = make_self_signed(tmp_path / "ca", ["ca"])
    with pytest.raises(ValueError, match=f"CA file {ca} does not verify certificate {cert}: self-signed certificate"):
        check_tls("0.0.0.0", 8750, None, cert, key, ca, False)
    with pytest.raises(ValueError, match="--tls-cert and --tls-key go together"):
        check_tls("0.0.0.0", 8750, None, cert, None, None, False)
    with pytest.raises(ValueError, match="--tls-ca names the CA of --tls-cert"):
        check_tls("127.0.0.1", 8750, None, None, None, ca, False)
    with pytest.raises(ValueError, match="cannot read CA file"):
        check_tls("0.0.0.0", 8750, None, cert, key, tmp_path / "none.pem", False)


def test_an_https_manager_tells_pilots_its_https_url_and_ca_file(pair: tuple[Path, Path]) -> None:
    cert, key = pair
    base = {"env": load_environment("local"), "db_url": "sqlite://", "state_dir": Path("."), "port": 8750}
    cfg = ManagerConfig(**base, tls_cert=cert, tls_key=key, pilot_ca_file=cert)  # type: ignore[arg-type]
    assert cfg.url == "https://127.0.0.1:8750"
    assert cfg.pilot_tls_args() == ["--ca-file", str(cert)]
    plain = ManagerConfig(**base, host="0.0.0.0", insecure_http=True)  # type: ignore[arg-type]
    assert plain.url.startswith("http://") and plain.pilot_tls_args() == ["--insecure-http"]
    assert ManagerConfig(**base).pilot_tls_args() == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "0.0.0.0:{port}"], "error: refusing to serve plain HTTP on 0.0.0.0:{port} (outside loopback)"),
        (["--self-signed", "--tls-cert", "c.pem", "--tls-key", "k.pem"], "error: --self-signed makes its own pair"),
    ],
)
def test_the_server_refuses_with_one_line_and_exit_2_before_creating_anything(
    tmp_path: Path, args: list[str], message: str
) -> None:
    port = free_port()
    state = tmp_path / "state"
    cmd = ["server", "--state-dir", str(state), "--listen", f"127.0.0.1:{port}"]
    out = CliRunner().invoke(app, [*cmd, *(a.format(port=port) for a in args)])
    assert out.exit_code == 2, out.output
    assert out.stderr.startswith(message.format(port=port)) and out.stderr.count("\n") == 1, out.stderr
    assert not state.exists()
