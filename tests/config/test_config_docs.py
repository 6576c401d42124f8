"""The examples of docs/environments.md are valid, and its TOML and YAML examples agree."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from isthmus.config import bundled_names, environment_from_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "environments.md"


def blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


@pytest.fixture(scope="module", autouse=True)
def _doc_exists() -> None:
    if not DOC.exists():
        pytest.skip(f"{DOC} not found")


def test_toml_examples_are_valid() -> None:
    # a policy package's pyproject.toml (the entry-point example) is TOML but not an environment
    found = [text for text in blocks("toml") if "[build-system]" not in text]
    assert len(found) >= 2
    for text in found:
        environment_from_text(text, "toml", file="docs/environments.md", default_name="example")


def test_full_examples_agree() -> None:
    toml_env = environment_from_text(blocks("toml")[0], "toml")
    (yaml_text,) = blocks("yaml")
    assert environment_from_text(yaml_text, "yaml") == toml_env
    assert len(toml_env.sites) == 4 and len(toml_env.sets) == 2
    assert toml_env.site("ec2").billing_increment == 3600.0


def test_every_bundled_environment_is_documented() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in bundled_names():
        assert f"`{name}`" in text, name


def test_the_example_of_docs_sites_is_valid() -> None:
    """docs/sites.md's environment example loads, as an operator would copy it."""
    text = (DOC.parent / "sites.md").read_text(encoding="utf-8")
    example, behind_ssh = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    env = environment_from_text(example, "toml", file="docs/sites.md")
    lrm = env.sites[0].lrm
    assert lrm is not None and (lrm.mode, lrm.pilot_walltime, lrm.renew_before) == ("pilot", 14400.0, 1800.0)
    # the site behind SSH: its [sites.lrm] in place of the example's
    site = example.split("[sites.lrm]")[0] + behind_ssh + '\n[policies]\nallocation = "ff"\n'
    lrm = environment_from_text(site, "toml", file="docs/sites.md").sites[0].lrm
    assert lrm is not None and lrm.mode == "direct"
    assert getattr(lrm.driver_options, "ssh", None) == "isthmus@login.cluster.example.org"


def test_the_example_of_docs_clouds_is_valid() -> None:
    """docs/clouds.md's environment example loads, as an operator would copy it."""
    text = (DOC.parent / "clouds.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, flags=re.S)
    example, budget = blocks[0], next(b for b in blocks if "[[budgets]]" in b)
    with_budget = environment_from_text(example + budget, "toml", file="docs/clouds.md")
    assert with_budget.budgets[0].name == "aws-daily" and with_budget.budgets[0].period == "day"
    env = environment_from_text(example, "toml", file="docs/clouds.md")
    p = env.site("aws").provider
    assert p is not None and (p.driver, p.instance_type) == ("ec2", "t3.small")
    assert p.driver_options.key_name == "ops"
