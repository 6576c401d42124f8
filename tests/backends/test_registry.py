"""The driver registry: built-in drivers, lazy factories, duplicate names, entry points, and the
configuration choosing a driver's options model by the driver a site names."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from isthmus.backends import registry
from isthmus.backends.gridengine import GridEngineBatch, GridEngineOptions
from isthmus.backends.libcloud_provider import Ec2Options, LibcloudProvider, OpenStackOptions
from isthmus.backends.registry import Driver
from isthmus.backends.slurm import SlurmBatch, SlurmOptions
from isthmus.config import ConfigError, environment_from_text
from isthmus.model.site import LrmSettings, Site


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The registry as a new process sees it (built-ins and entry points loaded on first read)."""
    monkeypatch.setattr(registry, "_drivers", {})
    monkeypatch.setattr(registry, "_state", {"loaded": False})
    yield


def test_the_built_in_drivers_are_registered() -> None:
    assert registry.names("batch") == ["gridengine", "slurm"]
    assert registry.names("cloud") == ["ec2", "gce", "openstack"]
    assert registry.get("batch", "slurm").options_model() is SlurmOptions
    assert registry.get("batch", "gridengine").options_model() is GridEngineOptions
    assert registry.get("cloud", "openstack").options_model() is OpenStackOptions
    assert registry.get("batch", "slurm").commands == ("sbatch", "scontrol", "scancel", "sinfo", "squeue")


def test_an_unknown_driver_names_the_registered_ones() -> None:
    with pytest.raises(KeyError, match="unknown batch system driver 'pbs'; registered: 'gridengine', 'slurm'"):
        registry.get("batch", "pbs")


def test_a_name_is_registered_once_per_family() -> None:
    with pytest.raises(ValueError, match="batch system driver 'slurm' is already registered"):
        registry.register(Driver("batch", "slurm", "x:y", "x:z"))


def test_each_built_in_factory_builds_its_backend_from_its_options() -> None:
    lrm = LrmSettings(driver="slurm", driver_options=SlurmOptions(partition="short", options=["--exclusive"]))
    slurm = registry.batch_system(Site("c", nodes=1, lrm=lrm))("m1")
    assert isinstance(slurm, SlurmBatch)
    assert (slurm.name, slurm.manager_id, slurm.partition, slurm.extra_options) == (
        "c",
        "m1",
        "short",
        ("--exclusive",),
    )
    ge = registry.batch_system(Site("g", nodes=1, lrm=LrmSettings(driver="gridengine")))("m1")
    assert isinstance(ge, GridEngineBatch) and ge.parallel_environment == "smp"  # the model's defaults


def test_a_cloud_factory_builds_the_libcloud_provider() -> None:
    env = environment_from_text(
        """
name = "e"
[[sites]]
name = "aws"
kind = "cloud"
max_vms = 1
[sites.provider]
driver = "ec2"
image = "ami-1"
instance_type = "t3.small"
region = "eu-west-1"
key_env = "K"
secret_env = "S"
""",
        "toml",
    )
    provider = registry.cloud_provider(env.site("aws"))("m1")
    assert isinstance(provider, LibcloudProvider)
    assert provider.settings.driver_options == Ec2Options(region="eu-west-1", key_env="K", secret_env="S")


CLOUD_SITE = """
name = "e"
[[sites]]
name = "c"
kind = "cloud"
max_vms = 1
[sites.provider]
image = "i"
instance_type = "t"
"""


@pytest.mark.parametrize(
    ("keys", "loaded_or_refused"),
    [
        (
            'driver = "openstack"\nauth_url = "https://k:5000"\nproject = "p"\nkey_env = "U"\nsecret_env = "P"',
            "OpenStackOptions",
        ),
        ('driver = "gce"\nproject = "p"\nzone = "z"\nkey_file = "/k.json"', "GceOptions"),
        (
            'driver = "openstack"\nproject = "p"\nkey_env = "U"\nsecret_env = "P"',
            "auth_url (site 'c'): required key is missing",
        ),
        (
            'driver = "gce"\nproject = "p"\nzone = "z"\nkey_file = "/k.json"\nregion = "r"',
            'region does not apply to driver = "gce"',
        ),
        ('driver = "opennebula"\nkey_env = "U"\nsecret_env = "P"', "unknown cloud provider driver 'opennebula'"),
    ],
)
def test_each_cloud_driver_loads_its_own_keys_and_refuses_others(keys: str, loaded_or_refused: str) -> None:
    if loaded_or_refused.endswith("Options"):
        env = environment_from_text(CLOUD_SITE + keys, "toml")
        provider = env.sites[0].provider
        assert provider is not None and type(provider.driver_options).__name__ == loaded_or_refused
        return
    with pytest.raises(ConfigError, match=re.escape(loaded_or_refused)):
        environment_from_text(CLOUD_SITE + keys, "toml")


THROWAWAY_MODULE = """
from pydantic import BaseModel, ConfigDict


class Options(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    flavour: str = "plain"


def open_batch(name, manager_id, options, lrm):
    return ("opened", name, manager_id, options.flavour)
"""


@pytest.fixture
def throwaway_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A driver module outside the package, importable, not imported yet."""
    name = f"throwaway_driver_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(THROWAWAY_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_a_driver_module_is_imported_only_when_a_site_uses_it(
    fresh_registry: None, throwaway_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry.register(Driver("batch", "lazy", f"{throwaway_module}:open_batch", f"{throwaway_module}:Options"))
    assert "lazy" in registry.names("batch")
    assert throwaway_module not in sys.modules  # registered by strings: nothing imported
    lrm = LrmSettings(driver="lazy", mode="direct")
    assert registry.batch_system(Site("c", nodes=1, lrm=lrm))("m9") == ("opened", "c", "m9", "plain")
    assert throwaway_module in sys.modules


def test_outside_packages_register_drivers_through_the_entry_point_group(
    fresh_registry: None, throwaway_module: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    plugin = tmp_path / f"{throwaway_module}_plugin.py"
    plugin.write_text(
        "from isthmus.backends.registry import Driver\n"
        f"DRIVERS = [Driver('batch', 'plugged', '{throwaway_module}:open_batch', '{throwaway_module}:Options')]\n"
        "BROKEN = 42\n"
    )
    points = [
        EntryPoint("plugged", f"{plugin.stem}:DRIVERS", registry.ENTRY_POINT_GROUP),
        EntryPoint("broken", f"{plugin.stem}:BROKEN", registry.ENTRY_POINT_GROUP),
    ]
    seen: list[str] = []

    def fake_entry_points(*, group: str) -> list[EntryPoint]:
        seen.append(group)
        return points

    monkeypatch.setattr(registry, "entry_points", fake_entry_points)
    assert registry.names("batch") == ["gridengine", "plugged", "slurm"]  # the broken one is skipped
    assert seen == ["isthmus.backends"]
    env = environment_from_text(
        """
name = "e"
[[sites]]
name = "c"
nodes = 1
[sites.lrm]
driver = "plugged"
mode = "direct"
flavour = "spicy"
""",
        "toml",
    )
    assert registry.batch_system(env.sites[0])("m1") == ("opened", "c", "m1", "spicy")


class TinyOptions(BaseModel):
    """Options of a driver registered by a test."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    spool: str = Field(min_length=1)
    depth: int = Field(1, ge=1)


@pytest.fixture
def tiny_driver() -> Iterator[str]:
    registry.register(Driver("batch", "tiny", lambda *a: None, TinyOptions))
    yield "tiny"
    registry.unregister("batch", "tiny")


def _lrm_error(lrm: str) -> ConfigError:
    text = f'name = "e"\n[[sites]]\nname = "c"\nnodes = 1\n[sites.lrm]\n{lrm}\n'
    with pytest.raises(ConfigError) as info:
        environment_from_text(text, "toml", file="e.toml")
    return info.value


def test_a_drivers_options_are_validated_by_its_model(tiny_driver: str) -> None:
    err = _lrm_error('driver = "tiny"\ndepth = 0')
    found = {p.path: (p.line, p.message) for p in err.problems}
    assert found == {
        "sites[0].lrm.depth": (7, "expected an integer >= 1, got 0"),
        "sites[0].lrm.spool": (5, "required key is missing"),  # the table's line
    }


def test_another_drivers_option_is_refused_naming_the_option_and_the_driver(tiny_driver: str) -> None:
    err = _lrm_error('driver = "tiny"\nspool = "/s"\npartition = "short"\nqueue = "all.q"')
    assert [p.path for p in err.problems] == ["sites[0].lrm"]
    assert 'partition, queue do not apply to driver = "tiny"' in err.message
    err = _lrm_error('driver = "slurm"\nspool = "/s"')
    assert 'spool does not apply to driver = "slurm"' in err.message


def test_an_unknown_key_suggests_among_the_shared_and_the_drivers_keys(tiny_driver: str) -> None:
    err = _lrm_error('driver = "tiny"\nspol = "/s"')
    assert ("sites[0].lrm.spol", "unknown key 'spol'; did you mean 'spool'?") in [
        (p.path, p.message) for p in err.problems
    ]


def test_an_unregistered_driver_is_refused_with_the_registered_names() -> None:
    err = _lrm_error('driver = "pbs"')
    assert err.path == "sites[0].lrm.driver"
    assert err.message == "unknown batch system driver 'pbs'; registered: 'gridengine', 'slurm'"


def test_a_drivers_options_dump_back_to_an_equal_environment(tiny_driver: str) -> None:
    from isthmus.config import dump_environment

    text = 'name = "e"\n[[sites]]\nname = "c"\nnodes = 1\n[sites.lrm]\ndriver = "tiny"\nspool = "/s"\ndepth = 3\n'
    env = environment_from_text(text, "toml")
    lrm: Any = env.sites[0].lrm
    assert lrm.driver_options == TinyOptions(spool="/s", depth=3)
    for fmt in ("toml", "yaml"):
        assert environment_from_text(dump_environment(env, fmt), fmt) == env  # type: ignore[arg-type]


def test_a_driver_whose_module_does_not_import_is_named_at_the_driver_key() -> None:
    registry.register(Driver("batch", "gone", "no_such_module_anywhere:open", "no_such_module_anywhere:Options"))
    try:
        err = _lrm_error('driver = "gone"')
    finally:
        registry.unregister("batch", "gone")
    assert err.path == "sites[0].lrm.driver"
    assert "driver 'gone' is registered but its options model cannot be loaded" in err.message
    assert "no_such_module_anywhere" in err.message
