"""Every validation rule of environment files, in TOML and YAML, with the file and key path."""

from __future__ import annotations

import copy
import math
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from pydantic import BaseModel, ConfigDict

from isthmus.config import ConfigError, load_file, validate_document
from isthmus.config.toml_writer import dumps_toml
from isthmus.model.environment import Environment
from isthmus.model.site import Site, SiteKind, SiteSet
from isthmus.policies import registry

BASE: dict[str, Any] = {
    "name": "test-env",
    "description": "for tests",
    "round_interval": 30,
    "sites": [
        {"name": "c1", "nodes": 4},
        {"name": "pub", "kind": "cloud", "max_vms": 8, "price_per_hour": 0.065},
    ],
    "sets": [
        {"name": "all", "sites": ["c1", "pub"], "runtime_limit": 600},
        {"name": "cloud", "sites": ["pub"]},
    ],
    "policies": {"allocation": "ff", "provisioning": {"name": "on-demand", "params": {}}},
}


def base() -> dict[str, Any]:
    return copy.deepcopy(BASE)


def write_doc(tmp_path: Path, doc: Any, fmt: str) -> Path:
    path = tmp_path / f"env.{fmt}"
    if fmt == "toml":
        path.write_text(dumps_toml(doc), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def load_error(tmp_path: Path, doc: Any, fmt: str) -> ConfigError:
    path = write_doc(tmp_path, doc, fmt)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    err = info.value
    assert err.file == str(path)
    assert str(path) in str(err)
    return err


def paths(err: ConfigError) -> list[str]:
    return [p.path for p in err.problems]


def problem(err: ConfigError, path: str) -> str:
    for p in err.problems:
        if p.path == path:
            return p.message
    raise AssertionError(f"no problem at {path!r}; problems: {[p.describe() for p in err.problems]}")


Mutation = Callable[[dict[str, Any]], None]


def setter(*loc: str | int, value: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in loc[:-1]:
            target = target[part]
        target[loc[-1]] = value

    return mutate


def deleter(*loc: str | int) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target: Any = doc
        for part in loc[:-1]:
            target = target[part]
        del target[loc[-1]]

    return mutate


# (id, mutation, expected path, fragment of the message)
CASES: list[tuple[str, Mutation, str, str]] = [
    ("unknown-site-key", setter("sites", 0, "nodez", value=3), "sites[0].nodez", "did you mean 'nodes'?"),
    (
        "unknown-top-key",
        setter("round_intervall", value=3),
        "round_intervall",
        "did you mean 'round_interval'?",
    ),
    (
        "unknown-set-key",
        setter("sets", 0, "runtime", value=3),
        "sets[0].runtime",
        "did you mean 'runtime_limit'?",
    ),
    (
        "unknown-policies-key",
        setter("policies", "alocation", value="ff"),
        "policies.alocation",
        "'allocation'",
    ),
    (
        "unknown-policy-table-key",
        setter("policies", "provisioning", "parms", value={}),
        "policies.provisioning.parms",
        "did you mean 'params'?",
    ),
    ("unknown-key-no-match", setter("sites", 1, "zzzz", value=1), "sites[1].zzzz", "valid keys: name, kind"),
    (
        "nodes-string",
        setter("sites", 0, "nodes", value="4"),
        "sites[0].nodes",
        'expected an integer, got "4"',
    ),
    ("nodes-float", setter("sites", 0, "nodes", value=4.5), "sites[0].nodes", "expected an integer, got 4.5"),
    ("cores-bool", setter("sites", 0, "cores_per_node", value=True), "sites[0].cores_per_node", "integer"),
    ("cores-zero", setter("sites", 0, "cores_per_node", value=0), "sites[0].cores_per_node", ">= 1, got 0"),
    (
        "boot-string",
        setter("sites", 1, "boot_time", value="fast"),
        "sites[1].boot_time",
        "expected a finite number",
    ),
    (
        "nodes-negative",
        setter("sites", 0, "nodes", value=-1),
        "sites[0].nodes",
        "expected an integer >= 0, got -1",
    ),
    ("max-vms-negative", setter("sites", 1, "max_vms", value=-2), "sites[1].max_vms", ">= 0, got -2"),
    ("min-vms-negative", setter("sites", 1, "min_vms", value=-1), "sites[1].min_vms", ">= 0, got -1"),
    (
        "boot-negative",
        setter("sites", 1, "boot_time", value=-1.5),
        "sites[1].boot_time",
        "a number >= 0, got -1.5",
    ),
    ("shutdown-negative", setter("sites", 1, "shutdown_time", value=-1), "sites[1].shutdown_time", ">= 0"),
    (
        "idle-negative",
        setter("sites", 1, "idle_release_time", value=-1),
        "sites[1].idle_release_time",
        ">= 0",
    ),
    ("cluster-zero-nodes", setter("sites", 0, "nodes", value=0), "sites[0].nodes", "at least 1 node"),
    ("cluster-no-nodes", deleter("sites", 0, "nodes"), "sites[0].nodes", "a cluster site needs nodes"),
    ("cloud-zero-max", setter("sites", 1, "max_vms", value=0), "sites[1].max_vms", "max_vms >= 1, got 0"),
    ("cloud-no-max", deleter("sites", 1, "max_vms"), "sites[1].max_vms", "a cloud site needs max_vms"),
    (
        "cloud-with-nodes",
        setter("sites", 1, "nodes", value=4),
        "sites[1].nodes",
        "a cloud site has no fixed nodes",
    ),
    (
        "cluster-with-cloud-key",
        setter("sites", 0, "max_vms", value=4),
        "sites[0].max_vms",
        "applies only to cloud sites",
    ),
    (
        "cluster-with-price",
        setter("sites", 0, "price_per_hour", value=1),
        "sites[0].price_per_hour",
        "cloud sites",
    ),
    (
        "min-over-max",
        setter("sites", 1, "min_vms", value=9),
        "sites[1].min_vms",
        "min_vms (9) must not exceed max_vms (8)",
    ),
    (
        "duplicate-site",
        setter("sites", 1, "name", value="c1"),
        "sites[1].name",
        "duplicate site name 'c1' (also sites[0])",
    ),
    (
        "set-unknown-site",
        setter("sets", 0, "sites", value=["c1", "pbu"]),
        "sets[0].sites[1]",
        "did you mean 'pub'?",
    ),
    ("set-repeated-site", setter("sets", 0, "sites", value=["c1", "c1"]), "sets[0].sites[1]", "listed twice"),
    ("set-empty", setter("sets", 0, "sites", value=[]), "sets[0].sites", "a set needs at least one site"),
    (
        "set-site-not-string",
        setter("sets", 0, "sites", value=[3]),
        "sets[0].sites[0]",
        "expected a valid string",
    ),
    (
        "duplicate-set",
        setter("sets", 1, "name", value="all"),
        "sets[1].name",
        "duplicate set name 'all' (also sets[0])",
    ),
    ("set-limit-zero", setter("sets", 0, "runtime_limit", value=0), "sets[0].runtime_limit", "> 0, got 0"),
    (
        "unknown-allocation",
        setter("policies", "allocation", value="fff"),
        "policies.allocation",
        "valid names:",
    ),
    (
        "unknown-provisioning-table",
        setter("policies", "provisioning", value={"name": "on-demnd"}),
        "policies.provisioning.name",
        "did you mean 'on-demand'?",
    ),
    (
        "bad-policy-params",
        setter("policies", "provisioning", value={"name": "on-demand", "params": {"bogus": 1}}),
        "policies.provisioning.params.bogus",
        "bogus",
    ),
    (
        "policy-wrong-type",
        setter("policies", "allocation", value=5),
        "policies.allocation",
        "expected a policy name",
    ),
    (
        "policy-empty-name",
        setter("policies", "allocation", value={"name": ""}),
        "policies.allocation.name",
        "non-empty",
    ),
    (
        "billing-zero",
        setter("sites", 1, "billing_increment", value=0),
        "sites[1].billing_increment",
        "> 0, got 0",
    ),
    (
        "billing-negative",
        setter("sites", 1, "billing_increment", value=-60),
        "sites[1].billing_increment",
        "> 0",
    ),
    (
        "billing-word",
        setter("sites", 1, "billing_increment", value="week"),
        "sites[1].billing_increment",
        '"hour"',
    ),
    (
        "price-negative",
        setter("sites", 1, "price_per_hour", value=-0.1),
        "sites[1].price_per_hour",
        ">= 0, got -0.1",
    ),
    ("kind-typo", setter("sites", 0, "kind", value="clustr"), "sites[0].kind", "did you mean 'cluster'?"),
    ("round-zero", setter("round_interval", value=0), "round_interval", "> 0, got 0"),
    ("round-word", setter("round_interval", value="sometimes"), "round_interval", '"event"'),
    ("round-bool", setter("round_interval", value=True), "round_interval", '"event"'),
    ("site-name-space", setter("sites", 0, "name", value="my site"), "sites[0].name", "letters, digits"),
    ("site-name-empty", setter("sites", 0, "name", value=""), "sites[0].name", "letters, digits"),
    ("no-sites", setter("sites", value=[]), "sites", "at least one site"),
    ("missing-sites", deleter("sites"), "sites", "required key is missing"),
    ("sites-not-list", setter("sites", value="c1"), "sites", "list"),
    ("site-not-table", setter("sites", 0, value="c1"), "sites[0]", "expected a table"),
    ("name-empty", setter("name", value=""), "name", "non-empty"),
    ("name-control", setter("name", value="a\nb"), "name", "without control characters"),
    ("description-number", setter("description", value=3), "description", "string"),
    (
        "window-reversed",
        lambda d: d["sites"][1].update(available_from=100, available_until=50),
        "sites[1].available_until",
        "must be later than available_from (100), got 50",
    ),
    ("window-negative", setter("sites", 0, "available_from", value=-5), "sites[0].available_from", ">= 0"),
    ("missing-site-name", deleter("sites", 0, "name"), "sites[0].name", "required key is missing"),
    ("lrm-driver", setter("sites", 0, "lrm", value={"driver": "pbs"}), "sites[0].lrm.driver", "'slurm'"),
    (
        "lrm-mode",
        setter("sites", 0, "lrm", value={"driver": "slurm", "mode": "pilots"}),
        "sites[0].lrm.mode",
        "'pilot'",
    ),
    (
        "lrm-pilot-key-in-direct-mode",
        setter("sites", 0, "lrm", value={"driver": "slurm", "mode": "direct", "pilot_walltime": 3600}),
        "sites[0].lrm",
        'pilot_walltime applies only to mode = "pilot"',
    ),
    (
        "lrm-renew-after-walltime",
        setter("sites", 0, "lrm", value={"driver": "slurm", "pilot_walltime": 600, "renew_before": 600}),
        "sites[0].lrm",
        "renew_before must be shorter than pilot_walltime",
    ),
    (
        "lrm-walltime-zero",
        setter("sites", 0, "lrm", value={"driver": "slurm", "pilot_walltime": 0}),
        "sites[0].lrm.pilot_walltime",
        "> 0",
    ),
    (
        "lrm-elastic-key-with-fixed-pilots",
        setter("sites", 0, "lrm", value={"driver": "slurm", "min_pilots": 2}),
        "sites[0].lrm",
        'min_pilots applies only to pilots = "elastic"',
    ),
    (
        "lrm-pilots-key-in-direct-mode",
        setter("sites", 0, "lrm", value={"driver": "slurm", "mode": "direct", "pilots": "elastic"}),
        "sites[0].lrm",
        'pilots applies only to mode = "pilot"',
    ),
    (
        "lrm-pilots-unknown",
        setter("sites", 0, "lrm", value={"driver": "slurm", "pilots": "bursty"}),
        "sites[0].lrm.pilots",
        "elastic",
    ),
    (
        "lrm-keep-free-negative",
        setter("sites", 0, "lrm", value={"driver": "slurm", "keep_free": -2}),
        "sites[0].lrm.keep_free",
        ">= 0",
    ),
    (
        "provider-without-credentials",
        setter("sites", 1, "provider", value={"driver": "ec2", "image": "ami-1", "instance_type": "t3.small"}),
        "sites[1].provider",
        "credentials are needed",
    ),
    (
        "provider-driver",
        setter("sites", 1, "provider", value={"driver": "aws", "image": "ami-1", "instance_type": "t3.small"}),
        "sites[1].provider.driver",
        "'ec2'",
    ),
    (
        "provider-on-cluster",
        setter(
            "sites",
            0,
            "provider",
            value={"driver": "ec2", "image": "a", "instance_type": "t", "key_env": "K", "secret_env": "S"},
        ),
        "sites[0].provider",
        "only to cloud sites",
    ),
    ("lrm-on-cloud", setter("sites", 1, "lrm", value={"driver": "slurm"}), "sites[1].lrm", "only to cluster sites"),
    (
        "lrm-slurm-key-on-gridengine",
        setter("sites", 0, "lrm", value={"driver": "gridengine", "partition": "batch"}),
        "sites[0].lrm",
        'partition does not apply to driver = "gridengine"',
    ),
    (
        "lrm-gridengine-keys-on-slurm",
        setter("sites", 0, "lrm", value={"driver": "slurm", "queue": "all.q", "parallel_environment": "smp"}),
        "sites[0].lrm",
        'parallel_environment, queue do not apply to driver = "slurm"',
    ),
]


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
@pytest.mark.parametrize("mode", [None, "direct"])
def test_a_slurm_site_defaults_to_pilot_mode_and_dumps_back_equal(tmp_path: Path, fmt: str, mode: str | None) -> None:
    doc = base()
    doc["sites"][0]["lrm"] = {"driver": "slurm", "partition": "batch"}
    if mode is None:
        doc["sites"][0]["lrm"]["pilot_walltime"] = 3600
    else:
        doc["sites"][0]["lrm"]["mode"] = mode
    path = tmp_path / f"env.{fmt}"
    path.write_text(dumps_toml(doc) if fmt == "toml" else yaml.safe_dump(doc))
    env = load_file(path)
    lrm = env.sites[0].lrm
    assert lrm is not None
    if mode is None:
        assert (lrm.mode, lrm.driver_options.partition, lrm.pilot_walltime, lrm.renew_before) == (
            "pilot",
            "batch",
            3600.0,
            300.0,
        )
    else:
        assert (lrm.mode, lrm.driver_options.partition, lrm.pilot_walltime) == ("direct", "batch", None)
    from isthmus.config import dump_environment

    again = tmp_path / f"again.{fmt}"
    again.write_text(dump_environment(env, fmt))  # type: ignore[arg-type]
    assert load_file(again) == env  # isthmus validate and the live tests run dumped environments


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
@pytest.mark.parametrize(("mutate", "path", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rule_names_file_path_and_expectation(
    tmp_path: Path, fmt: str, mutate: Mutation, path: str, fragment: str
) -> None:
    doc = base()
    mutate(doc)
    err = load_error(tmp_path, doc, fmt)
    assert path in paths(err)
    assert fragment in problem(err, path)
    # the rendered error names the file and the key path
    rendered = str(err)
    assert f"{path}" in rendered
    assert str(tmp_path) in rendered


def test_base_document_is_valid(tmp_path: Path) -> None:
    for fmt in ("toml", "yaml"):
        env = load_file(write_doc(tmp_path, base(), fmt))
        assert env == Environment(
            name="test-env",
            description="for tests",
            sites=(
                Site("c1", SiteKind.CLUSTER, nodes=4),
                Site("pub", SiteKind.CLOUD, max_vms=8, price_per_hour=0.065),
            ),
            sets=(SiteSet("all", ("c1", "pub"), 600.0), SiteSet("cloud", ("pub",))),
        )


def test_nan_is_rejected_in_toml(write_file: Callable[[str, str], Path]) -> None:
    path = write_file("nan.toml", 'name = "x"\n[[sites]]\nname = "c"\nkind = "cloud"\nmax_vms = 2\nboot_time = nan\n')
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.path == "sites[0].boot_time"
    assert "finite" in info.value.message


def test_all_problems_are_reported_at_once(tmp_path: Path) -> None:
    doc = base()
    doc["sites"][0]["nodes"] = 0
    doc["sites"][1]["min_vms"] = 20
    doc["sites"][1]["price_per_hour"] = -1
    doc["sets"][0]["sites"] = ["c1", "nope"]
    doc["policies"]["allocation"] = "nope"
    err = load_error(tmp_path, doc, "toml")
    assert paths(err) == [
        "sites[0].nodes",
        "sites[1].min_vms",
        "sites[1].price_per_hour",
        "sets[0].sites[1]",
        "policies.allocation",
    ]
    text = str(err)
    assert text.splitlines()[0] == f"{err.file}: 5 problems:"
    assert len(text.splitlines()) == 6
    assert err.path == "sites[0].nodes"  # first problem
    assert "(site 'c1')" in text and "(set 'all')" in text


def test_single_problem_is_one_line(tmp_path: Path) -> None:
    doc = base()
    doc["sites"][1]["max_vms"] = 0
    err = load_error(tmp_path, doc, "toml")
    assert "\n" not in str(err)
    text = Path(str(err.file)).read_text().splitlines()
    line = next(n for n, t in enumerate(text, 1) if t.startswith("max_vms = 0"))
    assert str(err) == f"{err.file}:{line}: sites[1].max_vms (site 'pub'): a cloud site needs max_vms >= 1, got 0"


def test_yaml_problems_carry_lines(write_file: Callable[[str, str], Path]) -> None:
    path = write_file(
        "lines.yaml",
        "name: x\nsites:\n  - name: c\n    nodes: 2\n  - name: p\n    kind: cloud\n    max_vms: 0\n",
    )
    with pytest.raises(ConfigError) as info:
        load_file(path)
    assert info.value.line == 7
    assert str(info.value).startswith(f"{path}:7: sites[1].max_vms")


def test_type_error_does_not_hide_other_rules_of_the_same_site(tmp_path: Path) -> None:
    doc = base()
    site = doc["sites"][1]
    site.update(nodes=3, min_vms=10, price_per_hour="cheap")
    err = load_error(tmp_path, doc, "yaml")
    assert {"sites[1].nodes", "sites[1].min_vms", "sites[1].price_per_hour"} <= set(paths(err))


def test_ill_typed_site_is_not_reported_as_unknown_in_sets(tmp_path: Path) -> None:
    doc = base()
    doc["sites"][1]["max_vms"] = "many"
    err = load_error(tmp_path, doc, "toml")
    assert paths(err) == ["sites[1].max_vms"]


def test_registered_policy_params_are_checked_through_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class FakeParams(BaseModel):
        model_config = ConfigDict(extra="forbid")
        depth: int = 1

    class Fake:
        """A fake allocation policy for tests."""

        name: ClassVar[str] = "fake"
        Params = FakeParams

        def __init__(self, params: FakeParams | None = None) -> None:
            self.params = params

        def stage_sites(self, env: Any) -> list[tuple[int, ...]]:
            return [tuple(range(len(env.sites)))]

    module = types.ModuleType("isthmus_test_fake_policy")
    module.Fake = Fake  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "isthmus_test_fake_policy", module)
    monkeypatch.setitem(registry._TABLE["allocation"], "fake", "isthmus_test_fake_policy:Fake")

    doc = base()
    doc["policies"]["allocation"] = {"name": "fake", "params": {"depth": 3}}
    env = load_file(write_doc(tmp_path, doc, "toml"))
    assert env.allocation.name == "fake"
    assert dict(env.allocation.params) == {"depth": 3}

    doc["policies"]["allocation"] = {"name": "fake", "params": {"depth": "deep"}}
    err = load_error(tmp_path, doc, "yaml")
    assert err.path == "policies.allocation.params.depth"
    assert err.message == "allocation policy 'fake': parameter 'depth': expected an integer, got \"deep\""


def test_custom_policy_checker_is_used() -> None:
    seen: list[tuple[str, str]] = []

    def checker(family: str, name: str, params: Any) -> None:
        seen.append((family, name))

    validate_document(base(), check_policy=checker)
    assert seen == [("allocation", "ff"), ("provisioning", "on-demand")]


def test_top_level_must_be_a_table() -> None:
    for data in ([1, 2], "text", 3):
        with pytest.raises(ConfigError) as info:
            validate_document(data, file="f.yaml")
        assert info.value.path == ""
        assert "top level" in info.value.message


def test_finite_number_check_for_inf() -> None:
    doc = base()
    doc["sites"][1]["boot_time"] = math.inf
    with pytest.raises(ConfigError) as info:
        validate_document(doc)
    assert info.value.path == "sites[1].boot_time"


def test_tags_structure_is_checked_when_the_file_is_read(tmp_path: Path) -> None:
    """For TAGS-sets each set must be a proper subset of the previous one (file named)."""
    doc = base()
    names = [s["name"] for s in doc["sites"]]
    doc["sets"] = [
        {"name": "short", "sites": names[:1], "runtime_limit": 600},
        {"name": "long", "sites": names},
    ]
    doc["policies"]["allocation"] = "tags-sets"
    err = load_error(tmp_path, doc, "toml")
    assert "env.toml" in str(err) and "sets" in str(err) and "every site" in str(err)
    doc["sets"] = [{"name": "short", "sites": names, "runtime_limit": 600}, {"name": "long", "sites": names}]
    assert "proper subset" in str(load_error(tmp_path, doc, "toml"))
    doc["sets"] = [{"name": "short", "sites": names, "runtime_limit": 600}, {"name": "long", "sites": names[1:]}]
    env = load_file(write_doc(tmp_path, doc, "toml"))
    assert env.allocation.name == "tags-sets"


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
def test_a_cloud_provider_loads_and_dumps_back_equal_without_secrets(tmp_path: Path, fmt: str) -> None:
    doc = base()
    doc["sites"][1]["provider"] = {
        "driver": "ec2",
        "image": "ami-0abc",
        "instance_type": "t3.small",
        "region": "eu-west-1",
        "key_env": "AWS_ACCESS_KEY_ID",
        "secret_env": "AWS_SECRET_ACCESS_KEY",
        "key_name": "ops",
    }
    path = tmp_path / f"env.{fmt}"
    path.write_text(dumps_toml(doc) if fmt == "toml" else yaml.safe_dump(doc))
    env = load_file(path)
    p = env.sites[1].provider
    assert p is not None and (p.driver, p.image, p.boot_timeout) == ("ec2", "ami-0abc", 300.0)
    assert (p.driver_options.region, p.driver_options.key_name) == ("eu-west-1", "ops")
    from isthmus.config import dump_environment

    text = dump_environment(env, fmt)  # type: ignore[arg-type]
    assert "AWS_SECRET_ACCESS_KEY" in text  # the variable's name, never a value
    again = tmp_path / f"again.{fmt}"
    again.write_text(text)
    assert load_file(again) == env
    assert not p.release_on_stop and "release_on_stop" not in text
    doc["sites"][1]["provider"] |= {"release_on_stop": True, "lease_patience": 90}
    path.write_text(dumps_toml(doc) if fmt == "toml" else yaml.safe_dump(doc))
    released = load_file(path)
    rp = released.sites[1].provider
    assert rp is not None and rp.release_on_stop and rp.lease_patience == 90.0
    again.write_text(dump_environment(released, fmt))  # type: ignore[arg-type]
    assert load_file(again) == released
