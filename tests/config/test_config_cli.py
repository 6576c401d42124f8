"""``isthmus env list|show|check`` through Typer's CliRunner."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.config import bundled, bundled_names, environment_to_dict, load_environment

Writer = Callable[[str, str], Path]

GOOD = 'name = "good"\n[[sites]]\nname = "c"\nnodes = 2\n'
BAD = (
    'name = "bad"\n[[sites]]\nname = "c"\nnodes = 0\n[[sites]]\nname = "p"\nkind = "cloud"\nmax_vms = 1\nmin_vms = 3\n'
)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_list_table(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "list"])
    assert result.exit_code == 0, result.output
    for name in bundled_names():
        assert name in result.stdout
    assert "k=1" in result.stdout
    assert "processors=<int, required>" in result.stdout


def test_list_json(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "list", "--json"])
    assert result.exit_code == 0
    rows = json.loads(result.stdout)
    assert [r["name"] for r in rows] == bundled_names()
    multicluster = rows[0]
    assert multicluster["sites"] == "2 clusters (64 nodes)"
    assert {"name": "k", "type": "int", "default": 1}.items() <= multicluster["parameters"][0].items()
    assert all(r["source"] and r["description"] for r in rows)


def test_show_table(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "show", "koala-c-multicloud"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    for text in ("koala-c-multicloud", "private", "public", "every 30 s", "on-demand", "short", "2400 s"):
        assert text in out


def test_show_json_is_the_normalized_dict(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "show", "koala-c-multicluster:k=4", "--json"])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc == environment_to_dict(load_environment("koala-c-multicluster:k=4"))
    assert len(doc["sites"]) == 8


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
@pytest.mark.parametrize("name", bundled_names())
def test_show_format_output_is_accepted_by_check(runner: CliRunner, tmp_path: Path, name: str, fmt: str) -> None:
    spec = bundled(name).example_spec
    shown = runner.invoke(app, ["env", "show", spec, "--format", fmt])
    assert shown.exit_code == 0, shown.output
    path = tmp_path / f"{name}.{fmt}"
    path.write_text(shown.stdout, encoding="utf-8")
    checked = runner.invoke(app, ["env", "check", str(path)])
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.startswith("OK")
    # and it loads to an equal environment, shown again identically
    again = runner.invoke(app, ["env", "show", str(path), "-f", fmt])
    assert again.stdout == shown.stdout
    assert load_environment(str(path)) == load_environment(spec)


def test_show_file(runner: CliRunner, write_file: Writer) -> None:
    path = write_file("good.toml", GOOD)
    result = runner.invoke(app, ["env", "show", str(path)])
    assert result.exit_code == 0
    assert "good" in result.stdout


def test_show_unknown_name_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "show", "nowhere"])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith("error: nowhere: unknown environment 'nowhere'")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_show_bad_parameter_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "show", "koala-c-multicluster:k=zero"])
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: koala-c-multicluster:k=zero: k: expected an integer, got 'zero'"


def test_show_missing_file_is_a_usage_error(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(app, ["env", "show", str(tmp_path / "none.toml")])
    assert result.exit_code == 2
    assert "no such file" in result.stderr


def test_show_invalid_file_exits_2(runner: CliRunner, write_file: Writer) -> None:
    path = write_file("bad.toml", BAD)
    result = runner.invoke(app, ["env", "show", str(path)])
    assert result.exit_code == 2
    assert "sites[0].nodes" in result.stderr and "sites[1].min_vms" in result.stderr
    assert "Traceback" not in result.output


def test_show_json_and_format_conflict(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "show", "local", "--json", "--format", "toml"])
    assert result.exit_code == 2
    assert "cannot be used together" in result.stderr


def test_show_unknown_format(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "show", "local", "--format", "xml"])
    assert result.exit_code == 2


def test_check_ok_and_invalid(runner: CliRunner, write_file: Writer) -> None:
    good = write_file("good.yaml", "name: good\nsites:\n  - {name: c, nodes: 2}\n")
    bad = write_file("bad.toml", BAD)
    result = runner.invoke(app, ["env", "check", str(good), str(bad)])
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert lines[0] == f"OK       {good} (good: 1 sites, 0 sets)"
    assert f"INVALID  {bad}:4: sites[0].nodes (site 'c'): a cluster site needs at least 1 node, got 0" in lines
    assert any("sites[1].min_vms" in line for line in lines)
    assert lines[-1] == "2 checked, 1 invalid"


def test_check_all_ok(runner: CliRunner, write_file: Writer) -> None:
    result = runner.invoke(app, ["env", "check", str(write_file("a.toml", GOOD))])
    assert result.exit_code == 0
    assert result.stdout.startswith("OK")


def test_check_yaml_line_numbers(runner: CliRunner, write_file: Writer) -> None:
    path = write_file("l.yaml", "name: l\nsites:\n  - name: c\n    nodes: -4\n")
    result = runner.invoke(app, ["env", "check", str(path)])
    assert result.exit_code == 2
    assert result.stdout.startswith(f"INVALID  {path}:4: sites[0].nodes")


def test_check_json(runner: CliRunner, write_file: Writer, tmp_path: Path) -> None:
    good = write_file("good.toml", GOOD)
    bad = write_file("bad.toml", BAD)
    missing = tmp_path / "missing.yaml"
    result = runner.invoke(app, ["env", "check", "--json", str(good), str(bad), str(missing)])
    assert result.exit_code == 2
    rows = json.loads(result.stdout)
    assert rows[0] == {"file": str(good), "ok": True, "name": "good", "sites": 1, "sets": 0}
    assert rows[1]["ok"] is False
    assert [p["path"] for p in rows[1]["problems"]] == ["sites[0].nodes", "sites[1].min_vms"]
    assert rows[2]["problems"][0]["message"] == "no such file"


def test_check_syntax_error(runner: CliRunner, write_file: Writer) -> None:
    path = write_file("s.toml", 'name = "s"\n[[sites]\n')
    result = runner.invoke(app, ["env", "check", str(path)])
    assert result.exit_code == 2
    assert f"{path}:2: TOML syntax error" in result.stdout


def test_check_needs_a_file(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env", "check"])
    assert result.exit_code == 2


def test_env_without_command_shows_help(runner: CliRunner) -> None:
    result = runner.invoke(app, ["env"])
    assert "list" in result.output and "show" in result.output and "check" in result.output
