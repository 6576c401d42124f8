"""Reading environment files: syntax errors with lines, file problems, defaults, accepted forms."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from isthmus.config import (
    ConfigError,
    environment_from_text,
    is_file_spec,
    load_environment,
    load_file,
    parse_text,
)
from isthmus.config.toml_writer import dumps_toml
from isthmus.model.site import Site, SiteKind

Writer = Callable[[str, str], Path]

MINIMAL_TOML = """\
name = "mini"

[[sites]]
name = "c"
nodes = 2
"""

MINIMAL_YAML = """\
name: mini
sites:
  - name: c
    nodes: 2
"""


def test_minimal_files_take_the_defaults(write_file: Writer) -> None:
    for path in (write_file("a.toml", MINIMAL_TOML), write_file("a.yaml", MINIMAL_YAML)):
        env = load_file(path)
        assert env.name == "mini"
        assert env.sites == (Site("c", SiteKind.CLUSTER, nodes=2),)
        assert env.sets == ()
        assert env.round_interval == 30.0
        assert env.allocation.name == "ff"
        assert env.provisioning.name == "on-demand"
        assert env.description == ""


def test_name_defaults_to_the_file_stem(write_file: Writer) -> None:
    path = write_file("my-cluster.yml", "sites:\n  - {name: c, nodes: 8}\n")
    assert load_file(path).name == "my-cluster"


def test_cloud_defaults_are_those_of_site(write_file: Writer) -> None:
    path = write_file("c.toml", 'name = "c"\n[[sites]]\nname = "vm"\nkind = "cloud"\nmax_vms = 3\n')
    assert load_file(path).sites[0] == Site("vm", SiteKind.CLOUD, max_vms=3)


@pytest.mark.parametrize(("word", "seconds"), [("hour", 3600.0), ("minute", 60.0), ("second", 1.0), ("HOUR", 3600.0)])
def test_billing_increment_words(write_file: Writer, word: str, seconds: float) -> None:
    text = f'name = "b"\n[[sites]]\nname = "p"\nkind = "cloud"\nmax_vms = 1\nbilling_increment = "{word}"\n'
    assert load_file(write_file("b.toml", text)).sites[0].billing_increment == seconds


def test_round_interval_forms(write_file: Writer) -> None:
    assert load_file(write_file("e.toml", 'round_interval = "event"\n' + MINIMAL_TOML)).round_interval is None
    assert load_file(write_file("n.yaml", "round_interval: null\n" + MINIMAL_YAML)).round_interval is None
    assert load_file(write_file("f.yaml", "round_interval: 2.5\n" + MINIMAL_YAML)).round_interval == 2.5
    assert load_file(write_file("i.toml", "round_interval = 10\n" + MINIMAL_TOML)).round_interval == 10.0


def test_policy_table_form_with_params(write_file: Writer) -> None:
    text = MINIMAL_TOML.replace(
        "[[sites]]",
        '[policies]\nallocation = { name = "fcfs" }\nprovisioning = { name = "on-demand", '
        "params = { idle_time = 60.0 } }\n\n[[sites]]",
    )
    env = load_file(write_file("p.toml", text))
    assert env.allocation.name == "fcfs"
    assert env.provisioning.name == "on-demand"
    assert dict(env.provisioning.params) == {"idle_time": 60.0}


def test_description_is_stripped(write_file: Writer) -> None:
    text = "description: |\n  two lines\n  of text\n" + MINIMAL_YAML
    assert load_file(write_file("d.yaml", text)).description == "two lines\nof text"
    assert load_file(write_file("n.yaml", "description: null\n" + MINIMAL_YAML)).description == ""


def test_toml_syntax_error_has_file_and_line(write_file: Writer) -> None:
    path = write_file("bad.toml", 'name = "x"\n\n[[sites]]\nnodes = = 3\n')
    with pytest.raises(ConfigError) as info:
        load_file(path)
    err = info.value
    assert err.file == str(path)
    assert err.line == 4
    assert str(err).startswith(f"{path}:4: TOML syntax error:")
    assert "\n" not in str(err)


def test_toml_error_at_end_of_file_has_a_line(write_file: Writer) -> None:
    path = write_file("end.toml", 'name = "x"\nsites = [\n')
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.line == 2
    assert "end of file" in info.value.message


def test_toml_duplicate_key_is_a_syntax_error(write_file: Writer) -> None:
    path = write_file("dup.toml", 'name = "x"\nname = "y"\n')
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.line == 2


def test_yaml_syntax_error_has_file_and_line(write_file: Writer) -> None:
    path = write_file("bad.yaml", "name: x\nsites:\n  - name: a\n   nodes: 3\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    err = info.value
    assert err.line == 4
    assert str(err).startswith(f"{path}:4: YAML syntax error:")


def test_yaml_duplicate_key_is_refused_with_both_lines(write_file: Writer) -> None:
    path = write_file("dup.yaml", "name: x\nsites:\n  - name: a\n    nodes: 1\n    nodes: 2\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.line == 5
    assert "duplicate key 'nodes' (first on line 4)" in info.value.message


def test_yaml_tabs_are_syntax_errors(write_file: Writer) -> None:
    path = write_file("tab.yaml", "name: x\nsites:\n\t- name: a\n")
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.line == 3


def test_empty_file(write_file: Writer) -> None:
    for name in ("empty.yaml", "empty.toml"):
        with pytest.raises(ConfigError) as info:
            load_file(write_file(name, ""))
        assert info.value.file is not None and info.value.file.endswith(name)


def test_missing_file_and_bad_suffix_and_directory(tmp_path: Path, write_file: Writer) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_file(tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match=r"unsupported file type '\.json'"):
        load_file(write_file("env.json", "{}"))
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    with pytest.raises(ConfigError, match="directory"):
        load_file(folder)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "latin.toml"
    path.write_bytes(b'name = "caf\xe9"\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_file(path)


def test_yaml_top_level_list(write_file: Writer) -> None:
    with pytest.raises(ConfigError) as info:
        load_file(write_file("list.yaml", "- a\n- b\n"))
    assert "top level" in info.value.message


def test_load_environment_dispatches_files_and_names(write_file: Writer, tmp_path: Path) -> None:
    path = write_file("x.toml", MINIMAL_TOML)
    assert load_environment(str(path)).name == "mini"
    assert load_environment(path).name == "mini"
    assert load_environment("local").name == "local"
    assert is_file_spec("envs/a.yaml") and is_file_spec("a.yml") and is_file_spec(path)
    assert not is_file_spec("local") and not is_file_spec("koala-c-multicluster:k=2")


def test_unknown_name_lists_bundled_names() -> None:
    with pytest.raises(ConfigError) as info:
        load_environment("koala-c-multicloudd")
    message = str(info.value)
    assert "unknown environment 'koala-c-multicloudd'" in message
    assert "koala-c-multicluster" in message and "local" in message and "villegas-das4" in message
    assert "did you mean 'koala-c-multicloud'?" in message
    assert "\n" not in message


def test_missing_file_spec(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        load_environment(str(tmp_path / "nope.yaml"))


def test_environment_from_text_names_the_source() -> None:
    with pytest.raises(ConfigError) as info:
        environment_from_text("name: x\nsites: []\n", "yaml", file="<stdin>")
    assert str(info.value) == "<stdin>:2: sites: an environment needs at least one site"


def test_parse_text_returns_document() -> None:
    data, line_of = parse_text(MINIMAL_YAML, "yaml")
    assert data["sites"][0]["nodes"] == 2
    assert line_of is not None and line_of(("sites", 0, "nodes")) == 4
    assert line_of(("sites", 0, "absent")) == 3  # nearest existing parent
    data, line_of = parse_text(MINIMAL_TOML, "toml")
    assert data["name"] == "mini"
    assert line_of is not None and line_of(("sites", 0, "nodes")) == 5
    assert line_of(("sites", 0, "absent")) == 3  # the [[sites]] header


def test_toml_writer_escapes_and_round_trips() -> None:
    doc = {
        "name": 'quote " back \\ tab \t nl \n ctl \x01 é',
        "n": 3,
        "f": 0.1,
        "b": True,
        "empty": [],
        "odd key": 1,
        "table": {"x": 1, "inline": {"a": [1, 2], "b": {"c": "d"}}, "skip": None},
        "items": [{"a": 1}, {"a": 2, "l": [{"z": 1}]}],
    }
    parsed = tomllib.loads(dumps_toml(doc))
    assert parsed == {
        "name": doc["name"],
        "n": 3,
        "f": 0.1,
        "b": True,
        "empty": [],
        "odd key": 1,
        "table": {"x": 1, "inline": {"a": [1, 2], "b": {"c": "d"}}},
        "items": [{"a": 1}, {"a": 2, "l": [{"z": 1}]}],
    }


def test_toml_writer_refuses_unknown_types() -> None:
    with pytest.raises(TypeError):
        dumps_toml({"x": object()})
    with pytest.raises(ValueError, match="null"):
        dumps_toml({"x": [1, None]})
