"""Where pilots are told to reach the manager: --listen, --advertise-url and their validation."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from isthmus.config import load_environment
from isthmus.live.manager import ManagerConfig, free_port
from isthmus.server.main import check_advertise_url


def _config(**kw: object) -> ManagerConfig:
    return ManagerConfig(env=load_environment("local"), db_url="sqlite://", state_dir=Path("."), **kw)  # type: ignore[arg-type]


def test_pilots_get_the_listen_address_or_the_advertised_url() -> None:
    assert _config(host="127.0.0.1", port=8750).url == "http://127.0.0.1:8750"
    # a wildcard address cannot be reached: pilots on other nodes get this machine's name
    assert _config(host="0.0.0.0", port=8750).url == f"http://{socket.getfqdn()}:8750"
    assert _config(host="::1", port=8750).url == "http://[::1]:8750"
    advertised = _config(host="0.0.0.0", port=8750, advertise_url="https://head.example.org/isthmus/")
    assert advertised.url == "https://head.example.org/isthmus"


@pytest.mark.parametrize("bad", ["head:8750", "ftp://head", "http://", "http://head/?x=1", "http://head/#f"])
def test_a_bad_advertised_url_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="--advertise-url expects"):
        check_advertise_url(bad)


def test_the_server_refuses_a_bad_advertised_url_before_creating_anything(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "isthmus.cli.live_entry", "server", "--state-dir", str(tmp_path / "s"),
         "--listen", f"127.0.0.1:{free_port()}", "--advertise-url", "head:8750"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert out.returncode == 2 and "--advertise-url expects" in out.stderr, out.stderr
    assert not (tmp_path / "s").exists()
