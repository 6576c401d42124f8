"""Bundled environments: each loads, validates and round-trips through TOML and YAML files."""

from __future__ import annotations

from pathlib import Path

import pytest

from isthmus.config import (
    DEFAULT_ENVIRONMENT,
    EC2_PRICE_PER_HOUR,
    ConfigError,
    bundled,
    bundled_names,
    dump_environment,
    environment_from_text,
    environment_to_dict,
    load_environment,
    load_file,
    parse_spec,
    single_cluster,
    validate_environment,
)
from isthmus.model.environment import Environment
from isthmus.model.site import SiteKind

EXPECTED_NAMES = {
    "koala-c-multicluster",
    "koala-c-multicloud",
    "koala-c-realworld",
    "ibm-enterprise-cloud",
    "villegas-das4",
    "villegas-fiu",
    "villegas-ec2",
    "villegas-parallel",
    "local",
    "single-cluster",
}

# every bundled name with some parameter combinations
SPECS = [bundled(name).example_spec for name in bundled_names()] + [
    "koala-c-multicluster:k=4",
    "koala-c-multicluster:k=3,tags=true,limit=3600",
    "koala-c-multicloud:tags=true",
    "koala-c-multicloud:private_boot_time=0,public_boot_time=600",
    "koala-c-realworld:tags=yes,limit=900",
    "ibm-enterprise-cloud:cloud=150",
    "ibm-enterprise-cloud:cloud=0,cluster=450",
    "ibm-enterprise-cloud:cloud=200,price=0.065",
    "villegas-fiu:boot_time=20",
    "villegas-parallel:vms=150,idle_time=0",
    "local:billing_increment=1",
    "single-cluster:processors=1",
]


def test_names() -> None:
    assert set(bundled_names()) == EXPECTED_NAMES
    assert DEFAULT_ENVIRONMENT == "koala-c-multicloud"
    for name in bundled_names():
        entry = bundled(name)
        assert entry.source and entry.summary
        assert entry.build.__doc__, f"{name}: builder must document its seed"


@pytest.mark.parametrize("spec", SPECS)
def test_bundled_loads_and_validates(spec: str) -> None:
    env = load_environment(spec)
    assert isinstance(env, Environment)
    assert env.sites
    assert validate_environment(env) == env
    assert env.description


@pytest.mark.parametrize("fmt", ["toml", "yaml"])
@pytest.mark.parametrize("spec", SPECS)
def test_bundled_round_trips_through_files(tmp_path: Path, spec: str, fmt: str) -> None:
    env = load_environment(spec)
    text = dump_environment(env, fmt)  # type: ignore[arg-type]
    path = tmp_path / f"env.{fmt}"
    path.write_text(text, encoding="utf-8")
    again = load_file(path)
    assert again == env
    assert environment_to_dict(again) == environment_to_dict(env)
    assert environment_from_text(text, fmt) == env  # type: ignore[arg-type]


def test_multicluster_k_parameter() -> None:
    env = load_environment("koala-c-multicluster:k=4")
    assert env.name == "koala-c-multicluster:k=4"
    assert len(env.sites) == 8
    assert all(s.kind is SiteKind.CLUSTER and s.nodes == 32 for s in env.sites)
    assert [s.name for s in env.sites] == ["c1a", "c1b", "c2a", "c2b", "c3a", "c3b", "c4a", "c4b"]
    assert env.round_interval == 30.0
    assert env.allocation.name == "ff"
    assert env.sets == ()
    assert load_environment("koala-c-multicluster").name == "koala-c-multicluster"
    assert len(load_environment("koala-c-multicluster").sites) == 2


def test_multicluster_tags_chain() -> None:
    env = load_environment("koala-c-multicluster:k=2,tags=true,limit=1800")
    assert env.allocation.name == "tags-chain"
    assert list(env.allocation.params["limits"]) == [1800.0]
    from isthmus.policies.allocation.tags import TagsChain, TagsChainParams

    policy = TagsChain(TagsChainParams.model_validate(dict(env.allocation.params)))
    assert policy.stage_sites(env) == [(0,), (1,), (2,), (3,)]


def test_multicloud_matches_the_paper() -> None:
    env = load_environment("koala-c-multicloud")
    clusters = [s for s in env.sites if s.kind is SiteKind.CLUSTER]
    assert [s.nodes for s in clusters] == [32, 32, 32]
    private, public = env.site("private"), env.site("public")
    assert (private.min_vms, private.max_vms, private.price_per_hour) == (8, 64, 0.0)
    assert (public.min_vms, public.max_vms) == (0, 128)
    assert public.price_per_hour == EC2_PRICE_PER_HOUR == 0.065
    assert public.billing_increment == 3600.0
    assert public.charged_cost(3601) == pytest.approx(0.13)
    assert private.boot_time == 60.0 and public.boot_time == 120.0
    assert env.round_interval == 30.0
    assert (env.allocation.name, env.provisioning.name) == ("ff", "on-demand")
    assert [(s.name, s.sites, s.runtime_limit) for s in env.sets] == [
        ("short", ("c1", "c2", "c3", "private", "public"), 2400.0),
        ("long", ("c3", "private", "public"), None),
    ]


def test_multicloud_sets_suit_tags_sets() -> None:
    env = load_environment("koala-c-multicloud:tags=true")
    assert env.allocation.name == "tags-sets"
    from isthmus.policies.allocation.tags import TagsSets

    assert TagsSets().stage_sites(env) == [(0, 1, 2, 3, 4), (2, 3, 4)]
    real = load_environment("koala-c-realworld:tags=true")
    assert TagsSets().stage_sites(real) == [(0, 1, 2, 3), (1, 2, 3)]


def test_realworld_matches_the_paper() -> None:
    env = load_environment("koala-c-realworld")
    assert [s.name for s in env.sites] == ["fs1", "fs2", "one", "ec2"]
    assert env.site("fs1").nodes == env.site("fs2").nodes == 32
    assert env.site("one").max_vms == 32 and not env.site("one").is_paid
    assert env.site("ec2").max_vms == 64 and env.site("ec2").price_per_hour == 0.065
    assert env.sets[0].runtime_limit == 600.0
    assert "fs1" not in env.sets[1].sites


def test_ibm_enterprise_cloud() -> None:
    env = load_environment("ibm-enterprise-cloud")
    enterprise, cloud = env.sites
    assert enterprise.nodes == 300 and enterprise.kind is SiteKind.CLUSTER
    assert cloud.is_cloud and cloud.min_vms == cloud.max_vms == 75
    assert (cloud.available_from, cloud.available_until) == (3000.0, 10000.0)
    assert cloud.boot_time == 0.0 and not cloud.is_paid
    assert env.allocation.name == "easy"
    assert load_environment("ibm-enterprise-cloud:cloud=150").sites[1].max_vms == 150
    baseline = load_environment("ibm-enterprise-cloud:cloud=0,cluster=450")
    assert len(baseline.sites) == 1 and baseline.sites[0].nodes == 450
    assert baseline.name == "ibm-enterprise-cloud:cloud=0,cluster=450"


def test_ibm_window_must_be_ordered() -> None:
    with pytest.raises(ConfigError) as info:
        load_environment("ibm-enterprise-cloud:start=5000,end=100")
    assert info.value.path == "sites[1].available_until"
    assert info.value.file == "ibm-enterprise-cloud:start=5000,end=100"


@pytest.mark.parametrize(("row", "max_vms"), [("das4", 64), ("fiu", 7), ("ec2", 20)])
def test_villegas_testbeds(row: str, max_vms: int) -> None:
    env = load_environment(f"villegas-{row}")
    (site,) = env.sites
    assert site.is_cloud and site.max_vms == max_vms and site.min_vms == 0
    assert site.cores_per_node == 1
    assert (site.boot_time, site.shutdown_time, site.billing_increment) == (600.0, 60.0, 3600.0)
    assert env.allocation.name == "fcfs"
    fast = load_environment(f"villegas-{row}:boot_time=1")
    assert fast.sites[0].boot_time == 1.0 and fast.name == f"villegas-{row}:boot_time=1"


def test_local_is_small() -> None:
    env = load_environment("local")
    assert [s.name for s in env.sites] == ["local-a", "local-b", "local-private", "local-public"]
    assert env.site("local-a").nodes == 4 and env.site("local-b").nodes == 2
    private, public = env.site("local-private"), env.site("local-public")
    assert private.max_vms == 4 and private.boot_time == 2 and private.idle_release_time == 10
    assert not private.is_paid
    assert public.max_vms == 4 and public.boot_time == 3 and public.is_paid
    assert public.billing_increment == 60.0
    assert public.charged_cost(30) == pytest.approx(0.065 / 60)


def test_single_cluster() -> None:
    env = single_cluster(430)
    assert env.name == "single-cluster:processors=430"
    assert len(env.sites) == 1 and env.sites[0].nodes == 430 and env.sites[0].cores_per_node == 1
    assert env.max_processors == 430
    assert env.round_interval is None
    assert (env.allocation.name, env.provisioning.name) == ("fcfs", "none")
    assert env == load_environment("single-cluster:processors=430")
    # made without the file schema: equal, field by field, to the validated bundled name
    for n in (1, 16, 128, 10**6):
        direct = single_cluster(n)
        assert repr(direct) == repr(load_environment(f"single-cluster:processors={n}"))
        assert validate_environment(direct) == direct
    for bad in (0, -3):
        with pytest.raises(ConfigError, match="processors"):
            single_cluster(bad)
    with pytest.raises(ConfigError):
        single_cluster(2.5)  # type: ignore[arg-type]


def test_required_parameter() -> None:
    with pytest.raises(ConfigError) as info:
        load_environment("single-cluster")
    assert info.value.path == "processors"
    assert "single-cluster:processors=128" in info.value.message


@pytest.mark.parametrize(
    ("spec", "path", "fragment"),
    [
        ("koala-c-multicluster:k=x", "k", "expected an integer, got 'x'"),
        ("koala-c-multicluster:k=0", "k", ">= 1"),
        ("koala-c-multicluster:limt=2", "limt", "did you mean 'limit'?"),
        ("koala-c-multicluster:k=2,k=3", "k", "given twice"),
        ("koala-c-multicluster:k", "", "expected key=value"),
        ("koala-c-multicloud:tags=maybe", "tags", "true or false"),
        ("villegas-das4:boot_time=inf", "boot_time", "finite"),
        ("villegas-das4:price=-1", "price", ">= 0"),
        ("local:k=1", "k", "parameters: billing_increment"),
    ],
)
def test_bad_parameters(spec: str, path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_environment(spec)
    err = info.value
    assert err.file == spec
    assert err.path == path
    assert fragment in err.message


def test_parse_spec_canonical_name() -> None:
    _, values, canonical = parse_spec(" koala-c-multicluster : limit=1500 , k=2 ")
    assert canonical == "koala-c-multicluster:k=2"  # defaults left out, declaration order
    assert values == {"k": 2, "tags": False, "limit": 1500.0}
    assert parse_spec("koala-c-multicluster:")[2] == "koala-c-multicluster"
    assert parse_spec("koala-c-multicloud:tags=1")[2] == "koala-c-multicloud:tags=true"


def test_default_environment_loads() -> None:
    assert load_environment(DEFAULT_ENVIRONMENT).name == DEFAULT_ENVIRONMENT
