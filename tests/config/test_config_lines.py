"""Schema errors in environment files carry the line of the key, in TOML and in YAML."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app
from isthmus.config import ConfigError, load_file

TOML = """\
name = "lines"
round_interval = "often"

[[sites]]
name = "c"
nodes = 2
cores_per_node = 4

[[sites]]
name = "pub"
kind = "cloud"
max_vms = "many"
colour = "red"

[[sets]]
sites = ["c"]

[policies]
allocation = { name = "ff", params = { depth = 2 } }
"""

YAML = """\
name: lines
round_interval: often
sites:
  - name: c
    nodes: 2
    cores_per_node: 4
  - name: pub
    kind: cloud
    max_vms: many
    colour: red
sets:
  - sites: [c]
policies:
  allocation:
    name: ff
    params:
      depth: 2
"""

# (key path, TOML line, YAML line, fragment of the message), counted by hand from the texts above
EXPECTED = [
    ("round_interval", 2, 2, 'got "often"'),  # wrong value
    ("sites[1].max_vms", 12, 9, 'expected an integer, got "many"'),  # wrong type, [[sites]] item 2
    ("sites[1].colour", 13, 10, "unknown key 'colour'"),  # unknown key
    ("sets[0].name", 15, 12, "required key is missing"),  # missing key: the item's line
    ("policies.allocation.params.depth", 19, 17, "unknown parameter 'depth'"),  # nested key
]


@pytest.mark.parametrize(("suffix", "text", "column"), [(".toml", TOML, 1), (".yaml", YAML, 2)])
def test_every_problem_has_its_line(tmp_path: Path, suffix: str, text: str, column: int) -> None:
    path = tmp_path / f"env{suffix}"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    found = {p.path: p for p in info.value.problems}
    assert sorted(found) == sorted(e[0] for e in EXPECTED)
    for expected in EXPECTED:
        problem = found[expected[0]]
        assert problem.line == expected[column], (expected[0], problem)
        assert expected[3] in problem.message


def test_check_prints_file_and_line_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "env.toml"
    path.write_text(TOML)
    result = CliRunner().invoke(app, ["env", "check", str(path)])
    assert result.exit_code == 2
    assert f"INVALID  {path}:12: sites[1].max_vms (site 'pub'): expected an integer, got \"many\"" in result.stdout


def test_show_of_a_bad_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "one.toml"
    path.write_text('name = "one"\n\n[[sites]]\nname = "c"\nnodes = "two"\n')
    result = CliRunner().invoke(app, ["env", "show", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"error: {path}:5: sites[0].nodes (site 'c'): expected an integer, got \"two\""


def test_array_of_inline_tables_and_dotted_keys(tmp_path: Path) -> None:
    path = tmp_path / "inline.toml"
    path.write_text(
        'name = "inline"\n'
        "sites = [\n"
        '  { name = "a", nodes = 1 },\n'
        '  { name = "b", nodes = 0 },\n'
        "]\n"
        'policies.allocation = "fff"\n'
    )
    with pytest.raises(ConfigError) as info:
        load_file(path)
    lines = {p.path: p.line for p in info.value.problems}
    assert lines == {"sites[1].nodes": 4, "policies.allocation": 6}
