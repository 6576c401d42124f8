"""`isthmus policies` and how bad policy parameters are explained (CLI and environment files)."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.policies import registry

runner = CliRunner()


def test_json_lists_every_registered_policy_with_seed_and_parameters() -> None:
    result = runner.invoke(app, ["policies", "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    listed = {(r["family"], r["name"]) for r in rows}
    expected = {(f, n) for f in registry.families() for n in registry.names(f)}
    assert listed == expected
    assert all(r["seed"] for r in rows), [r["name"] for r in rows if not r["seed"]]
    by_name = {(r["family"], r["name"]): r for r in rows}
    chain = by_name[("allocation", "tags-chain")]
    assert chain["seed"].startswith("KOALA-C §IV-B")
    assert chain["parameters"][0] == {
        "name": "limits",
        "type": "list of numbers",
        "default": [1500.0],
        "required": False,
        "constraint": "at least 1 item",
        "help": "runtime limit (s) of each site of a chain but the last",
    }
    assert chain["parameters"][1]["type"] == "one of 'rr', 'rnd'"
    od = {p["name"]: p for p in by_name[("provisioning", "on-demand")]["parameters"]}
    assert od["idle_time"]["type"] == "number, or none" and od["idle_time"]["constraint"] == ">= 0"
    assert od["paid_release_window"]["default"] == 120.0 and od["paid_release_window"]["constraint"] == "> 0"
    assert by_name[("allocation", "ff")]["parameters"] == []


def test_family_filter_and_table() -> None:
    result = runner.invoke(app, ["policies", "--family", "prediction", "--json"])
    assert result.exit_code == 0
    assert sorted(r["name"] for r in json.loads(result.stdout)) == ["exact", "knn", "requested", "user-last-two"]
    table = runner.invoke(app, ["policies"], env={"COLUMNS": "200"})
    assert table.exit_code == 0
    assert "tags-sets" in table.stdout and "KOALA-C §IV-C" in table.stdout
    bad = runner.invoke(app, ["policies", "--family", "scheduling"])
    assert bad.exit_code == 2
    assert "unknown policy family 'scheduling'" in bad.stderr


def test_bad_parameter_on_the_command_line_is_explained_in_words() -> None:
    result = runner.invoke(app, ["simulate", "--jobs", "10", "-p", "tags-sets:limits=abc"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "error: allocation policy 'tags-sets': parameter 'limits': expected a list of numbers, or none, got \"abc\""
    )
    assert "Input should be" not in result.output


def test_unknown_and_out_of_range_parameters() -> None:
    result = runner.invoke(app, ["simulate", "--jobs", "10", "-p", "tags-chain:limit=5"])
    assert result.exit_code == 2
    expected = "unknown parameter 'limit'; valid parameters: limits, dispatch, seed; did you mean 'limits'?"
    assert expected in result.stderr
    result = runner.invoke(app, ["simulate", "--jobs", "10", "--provisioning", "on-demand:idle_time=-1"])
    assert result.exit_code == 2
    assert "parameter 'idle_time': expected a number >= 0, got -1" in result.stderr


def test_bad_parameter_in_an_environment_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "e.toml"
    path.write_text(
        'name = "e"\n'
        "[[sites]]\n"
        'name = "a"\n'
        "nodes = 2\n"
        "[policies.allocation]\n"
        'name = "tags-chain"\n'
        "[policies.allocation.params]\n"
        'limits = ["x"]\n'
        'dispatch = "random"\n'
    )
    result = runner.invoke(app, ["env", "check", str(path)])
    assert result.exit_code == 2
    assert sorted(result.stdout.splitlines()) == [
        f"INVALID  {path}:8: policies.allocation.params.limits[0]: allocation policy 'tags-chain': "
        "parameter 'limits' item 1: expected a number, got \"x\"",
        f"INVALID  {path}:9: policies.allocation.params.dispatch: allocation policy 'tags-chain': "
        "parameter 'dispatch': expected 'rr' or 'rnd', got \"random\"",
    ]
