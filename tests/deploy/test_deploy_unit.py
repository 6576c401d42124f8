"""The systemd unit shipped in the package: found as package data, printed by `isthmus deploy
systemd-unit`, its `isthmus server` command accepted by the command's parser, and its stop
settings consistent with what SIGTERM does to the server."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from typer._click.exceptions import BadParameter, NoSuchOption
from typer.testing import CliRunner

from isthmus.cli import main
from isthmus.deploy import SYSTEMD_UNIT, systemd_unit

ROOT = Path(__file__).resolve().parents[2]


def settings(text: str) -> dict[str, list[str]]:
    """The unit's `Key=value` lines (continuations joined, comments left out), each key's values in order."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found: dict[str, list[str]] = {}
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")):
            continue
        key, _, value = line.partition("=")
        found.setdefault(key.strip(), []).append(value.strip())
    return found


def exec_start() -> list[str]:
    (command,) = settings(systemd_unit())["ExecStart"]
    return shlex.split(command)


def test_the_unit_is_package_data() -> None:
    """The unit is read through importlib.resources, and pyproject.toml ships it in the wheel."""
    text = systemd_unit()
    assert text == (ROOT / "src" / "isthmus" / "deploy" / SYSTEMD_UNIT).read_text(encoding="utf-8")
    assert "[Service]" in text and "[Install]" in text
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    patterns = package_data["package-data"]["isthmus"]
    assert any(Path("deploy", SYSTEMD_UNIT).match(p) for p in patterns), patterns


def test_the_cli_prints_the_unit() -> None:
    result = CliRunner().invoke(main.app, ["deploy", "systemd-unit"])
    assert result.exit_code == 0, result.output
    assert result.output == systemd_unit()


def test_exec_start_is_accepted_by_isthmus_server() -> None:
    """Every option of ExecStart parses as `isthmus server` reads it (the server is not started)."""
    argv = exec_start()
    assert Path(argv[0]).name == "isthmus" and argv[1] == "server"
    server = main.load_commands("live.server")["server"]
    ctx = server.make_context("server", argv[2:])
    params: dict[str, Any] = ctx.params
    assert params["env"] == "/etc/isthmus/pool.toml"
    assert params["state_dir"] == Path("/var/lib/isthmus")
    assert params["listen"] == "0.0.0.0:8750"
    assert (params["tls_cert"], params["tls_key"]) == (
        Path("/etc/isthmus/tls/cert.pem"),
        Path("/etc/isthmus/tls/key.pem"),
    )
    assert params["on_stop"] == "detach" and params["log_level"] == "info"
    assert not params["insecure_http"] and not params["self_signed"]


def test_an_option_the_server_lacks_is_refused_by_the_same_check() -> None:
    """The check above fails on an option `isthmus server` does not have."""
    server = main.load_commands("live.server")["server"]
    with pytest.raises(NoSuchOption, match="no-such-option"):
        server.make_context("server", [*exec_start()[2:], "--no-such-option"])
    with pytest.raises(BadParameter, match="integer"):  # a value of the wrong type fails too
        server.make_context("server", [*exec_start()[2:], "--max-body-bytes", "many"])


def test_stop_settings_match_what_sigterm_does() -> None:
    """SIGTERM to the server alone (pilots of detached runs outlive it), exit 143 counted as a
    stop, room for a releasing stop's wait, a refused start (exit 2) not retried, and the admin
    token (standard output) kept out of the journal."""
    unit = settings(systemd_unit())
    assert unit["KillMode"] == ["process"] and unit["KillSignal"] == ["SIGTERM"]
    assert "143" in unit["SuccessExitStatus"][0].split()
    assert int(unit["TimeoutStopSec"][0]) > 120
    assert unit["Restart"] == ["on-failure"] and "2" in unit["RestartPreventExitStatus"][0].split()
    assert unit["StandardOutput"] == ["null"] and unit["StandardError"] == ["journal"]
    assert unit["User"] == ["root"]
    assert unit["EnvironmentFile"] == ["/etc/isthmus/credentials.env"]
    # root's capabilities stay: switching to the jobs' accounts needs them
    assert "CapabilityBoundingSet" not in unit and "PrivateTmp" not in unit


def test_docs_show_the_units_command() -> None:
    """docs/deploy.md shows the command the unit runs, option for option."""
    doc = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8")
    shown = re.search(r"^```\n(\S+/isthmus server .*?)^```", doc, flags=re.S | re.M)
    assert shown is not None and shlex.split(shown.group(1)) == exec_start()


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze (systemd)")
def test_systemd_reads_every_setting(tmp_path: Path) -> None:
    """`systemd-analyze verify` accepts every setting (it names any it would ignore); the
    program's path is replaced by one that exists here."""
    unit = tmp_path / SYSTEMD_UNIT
    argv0 = exec_start()[0]
    unit.write_text(systemd_unit().replace(argv0, shutil.which("true") or "/bin/true"), encoding="utf-8")
    verify = ["systemd-analyze", "verify", str(unit)]
    proc = subprocess.run(verify, check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and not proc.stderr.strip(), proc.stderr
