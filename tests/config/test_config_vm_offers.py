"""Instance types, images, networks and the fair-share policy in environment files: loaded into
the model, written back unchanged, and every mistake named with its file, line and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from isthmus.config import ConfigError, load_file
from isthmus.config.schema import environment_to_dict, validate_document
from isthmus.model.vmtypes import InstanceType, VmImage

GOOD = """\
name = "typed"

[policies]
allocation = "ff"
provisioning = "none"
fairshare = { name = "vm-share", params = { mode = "kill" } }

[[sites]]
name = "ec2"
kind = "cloud"
max_vms = 4
billing_increment = "hour"
networks = ["public", "private"]

[[sites.instance_types]]
name = "small"
cores = 1
memory_mb = 2048
disk_gb = 20
arch = "x86_64"
price_per_hour = 0.02
provider_size = "t3.small"

[[sites.instance_types]]
name = "big"
cores = 4
memory_mb = 16384
price_per_hour = 0.2

[[sites.images]]
name = "worker"
provider_id = "ami-12345678"
"""


def test_types_images_networks_and_fairshare_load_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "typed.toml"
    path.write_text(GOOD)
    env = load_file(path)
    site = env.sites[0]
    assert site.instance_types == (
        InstanceType("small", 1, 0.02, 2048, 20.0, "x86_64", "t3.small"),
        InstanceType("big", 4, 0.2, 16384, None, None, ""),
    )
    assert site.images == (VmImage("worker", "ami-12345678", None),)
    assert site.networks == ("public", "private")
    # the default type is the first: the site's cores and price are its
    assert (site.cores_per_node, site.price_per_hour, site.max_processors) == (1, 0.02, 16)
    assert env.fairshare is not None and (env.fairshare.name, dict(env.fairshare.params)) == (
        "vm-share",
        {"mode": "kill"},
    )
    assert validate_document(environment_to_dict(env)) == env


BAD = """\
name = "bad"

[policies]
fairshare = "vm-share"
provisioning = "startup"

[[sites]]
name = "ec2"
kind = "cloud"
max_vms = 2
cores_per_node = 2
instance_types = [
  { name = "a", cores = 1 },
  { name = "a", cores = 0 },
]
images = []

[sites.provider]
driver = "ec2"
key_env = "K"
secret_env = "S"

[[sites]]
name = "c"
nodes = 2
networks = ["private"]
"""

# (key path, line, fragment of the message), counted by hand from BAD
EXPECTED = [
    ("policies.provisioning", 5, 'fair-share policy "vm-share" leases and releases'),
    ("sites[0].cores_per_node", 11, "with instance_types give cores and price_per_hour per type"),
    ("sites[0].instance_types[1].name", 14, "duplicate instance type 'a' (also instance_types[0])"),
    ("sites[0].instance_types[1].cores", 14, "expected an integer >= 1, got 0"),
    ("sites[0].images", 16, "an empty list; give at least one image or leave images out"),
    ("sites[0].provider.image", 18, "needed unless the site lists images"),
    ("sites[1].networks", 26, "networks applies only to cloud sites"),
]


def test_mistakes_are_named_with_file_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    found = {p.path: p for p in info.value.problems}
    assert sorted(found) == sorted(e[0] for e in EXPECTED), info.value
    for key, line, fragment in EXPECTED:
        assert fragment in found[key].message, (key, found[key])
        assert found[key].line == line, (key, found[key])
    assert str(path) in str(info.value)


def test_the_examples_of_docs_clouds_load() -> None:
    """docs/clouds.md's typed cloud and its vm-share policies load as an operator would copy them."""
    import re

    from isthmus.config import environment_from_text

    text = (Path(__file__).resolve().parents[2] / "docs" / "clouds.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    typed = next(b for b in blocks if "instance_types" in b)
    env = environment_from_text(typed, "toml", file="docs/clouds.md")
    assert [t.name for t in env.site("aws").types] == ["small", "big"]
    policies = next(b for b in blocks if "vm-share" in b)
    # share.toml of the docs: the typed cloud with the [policies] table of the vm-share section
    shared = environment_from_text(
        re.sub(r"\[policies\]\n.*?\n\n", lambda _m: policies + "\n", typed, flags=re.S), "toml"
    )
    assert shared.fairshare is not None and shared.fairshare.name == "vm-share"


def test_an_environment_takes_a_bags_fair_share_policy(tmp_path: Path) -> None:
    # live bags of tasks grow and shrink by it (docs/bags.md)
    path = tmp_path / "env.toml"
    path.write_text(
        'name = "x"\n[[sites]]\nname = "c1"\nnodes = 2\n'
        '[policies]\nallocation = "fcfs"\nprovisioning = "none"\nfairshare = "sep"\n'
    )
    env = load_file(path)
    assert env.fairshare is not None and env.fairshare.name == "sep"


def test_the_bags_fair_share_names_are_the_registry_policies_that_share_bags() -> None:
    from isthmus.policies import registry

    bags = {n for n in registry.names("fairshare") if registry.create("fairshare", n).shares == "bags"}
    assert set(registry.with_capability("fairshare", "shares", "bags")) == bags == {"gep", "sep"}
