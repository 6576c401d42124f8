"""Property tests: random valid documents round-trip; random single-key corruptions are named."""

from __future__ import annotations

import copy
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isthmus.config import ConfigError, dump_environment, environment_from_text, environment_to_dict
from isthmus.config import validate_document as validate

NAME_CHARS = string.ascii_letters + string.digits + "._-"

names = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(string.ascii_letters + string.digits),
    st.text(alphabet=NAME_CHARS, max_size=10),
)
seconds = st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False, exclude_min=True)


@st.composite
def windows(draw: st.DrawFn) -> dict[str, float]:
    out: dict[str, float] = {}
    start = draw(st.none() | seconds)
    if start is not None:
        out["available_from"] = start
    if draw(st.booleans()):
        out["available_until"] = (start or 0.0) + draw(st.floats(min_value=1, max_value=1e7))
    return out


@st.composite
def cluster(draw: st.DrawFn, name: str) -> dict[str, Any]:
    site: dict[str, Any] = {"name": name, "nodes": draw(st.integers(1, 100_000))}
    if draw(st.booleans()):
        site["kind"] = "cluster"
    if draw(st.booleans()):
        site["cores_per_node"] = draw(st.integers(1, 256))
    site.update(draw(windows()))
    return site


@st.composite
def cloud(draw: st.DrawFn, name: str) -> dict[str, Any]:
    max_vms = draw(st.integers(1, 10_000))
    site: dict[str, Any] = {"name": name, "kind": "cloud", "max_vms": max_vms}
    optional = {
        "min_vms": st.integers(0, max_vms),
        "cores_per_node": st.integers(1, 64),
        "boot_time": seconds,
        "shutdown_time": seconds,
        "price_per_hour": st.floats(0, 100, allow_nan=False),
        "billing_increment": positive | st.sampled_from(["hour", "minute", "second"]),
        "idle_release_time": seconds,
    }
    for key, strategy in optional.items():
        if draw(st.booleans()):
            site[key] = draw(strategy)
    site.update(draw(windows()))
    return site


def policy(choices: list[str]) -> st.SearchStrategy[Any]:
    return st.sampled_from(choices) | st.builds(lambda n: {"name": n, "params": {}}, st.sampled_from(choices))


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    site_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    sites = [draw(cluster(n) if draw(st.booleans()) else cloud(n)) for n in site_names]
    env_name = st.text(st.characters(exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=30)
    doc: dict[str, Any] = {"name": draw(env_name), "sites": sites}
    if draw(st.booleans()):
        doc["description"] = draw(st.text(max_size=40))
    if draw(st.booleans()):
        doc["round_interval"] = draw(positive | st.just("event"))
    set_names = draw(st.lists(names, max_size=3, unique=True))
    if set_names:
        doc["sets"] = []
        for set_name in set_names:
            members = draw(st.lists(st.sampled_from(site_names), min_size=1, unique=True))
            entry: dict[str, Any] = {"name": set_name, "sites": members}
            if draw(st.booleans()):
                entry["runtime_limit"] = draw(positive)
            doc["sets"].append(entry)
    if draw(st.booleans()):
        doc["policies"] = {
            "allocation": draw(policy(["ff", "fcfs"])),
            "provisioning": draw(policy(["on-demand", "startup"])),
        }
    return doc


PROPERTY_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY_SETTINGS
@given(documents())
def test_valid_documents_load_dump_and_reload_equal(doc: dict[str, Any]) -> None:
    env = validate(doc)
    normalized = environment_to_dict(env)
    assert validate(normalized) == env
    for fmt in ("toml", "yaml"):
        text = dump_environment(env, fmt)  # type: ignore[arg-type]
        assert environment_from_text(text, fmt, file=f"<{fmt}>") == env  # type: ignore[arg-type]


# --- corruptions ------------------------------------------------------------------------------

INT_KEYS = {"cluster": ["nodes", "cores_per_node"], "cloud": ["max_vms", "min_vms", "cores_per_node"]}
FLOAT_KEYS = ["boot_time", "shutdown_time", "price_per_hour", "idle_release_time", "billing_increment"]


@st.composite
def corrupted(draw: st.DrawFn) -> tuple[dict[str, Any], str]:
    """A valid document with one key made invalid, and the key path that must be reported."""
    doc = copy.deepcopy(draw(documents()))
    sites = doc["sites"]
    i = draw(st.integers(0, len(sites) - 1))
    site = sites[i]
    kind = site.get("kind", "cluster")
    choices = [
        "unknown-site-key",
        "bad-int",
        "bad-kind",
        "bad-name",
        "unknown-top-key",
        "bad-round",
        "bad-policy",
    ]
    if kind == "cloud":
        choices += ["bad-float", "cloud-nodes"]
    else:
        choices += ["cluster-cloud-key"]
    if doc.get("sets"):
        choices += ["bad-limit", "unknown-member"]
    choice = draw(st.sampled_from(choices))
    if choice == "unknown-site-key":
        key = draw(st.sampled_from(["nodez", "bogus", "max_vm", "price"]))
        site[key] = 1
        return doc, f"sites[{i}].{key}"
    if choice == "bad-int":
        key = draw(st.sampled_from(INT_KEYS[kind]))
        site[key] = draw(st.sampled_from([-1, "3", 1.5, True, [1]]))
        return doc, f"sites[{i}].{key}"
    if choice == "bad-float":
        key = draw(st.sampled_from(FLOAT_KEYS))
        site[key] = draw(st.sampled_from([-1, "soon", True, {"a": 1}]))
        return doc, f"sites[{i}].{key}"
    if choice == "cloud-nodes":
        site["nodes"] = draw(st.integers(1, 10))
        return doc, f"sites[{i}].nodes"
    if choice == "cluster-cloud-key":
        key = draw(st.sampled_from(["max_vms", "min_vms", "boot_time", "price_per_hour"]))
        site[key] = 1
        return doc, f"sites[{i}].{key}"
    if choice == "bad-kind":
        site["kind"] = draw(st.sampled_from(["clouds", "Cluster", "", 3]))
        return doc, f"sites[{i}].kind"
    if choice == "bad-name":
        site["name"] = draw(st.sampled_from(["", "two words", "-dash", 7]))
        return doc, f"sites[{i}].name"
    if choice == "unknown-top-key":
        doc["site"] = []
        return doc, "site"
    if choice == "bad-round":
        doc["round_interval"] = draw(st.sampled_from([0, -30, "often", False]))
        return doc, "round_interval"
    if choice == "bad-policy":
        family = draw(st.sampled_from(["allocation", "provisioning"]))
        doc.setdefault("policies", {})[family] = "no-such-policy"
        return doc, f"policies.{family}"
    j = draw(st.integers(0, len(doc["sets"]) - 1))
    if choice == "bad-limit":
        doc["sets"][j]["runtime_limit"] = draw(st.sampled_from([0, -1, "long"]))
        return doc, f"sets[{j}].runtime_limit"
    members = doc["sets"][j]["sites"]
    k = draw(st.integers(0, len(members) - 1))
    members[k] = "not a site!"
    return doc, f"sets[{j}].sites[{k}]"


@PROPERTY_SETTINGS
@given(corrupted())
def test_single_key_corruption_is_rejected_naming_the_key(case: tuple[dict[str, Any], str]) -> None:
    doc, path = case
    with pytest.raises(ConfigError) as info:
        validate(doc, file="corrupt.toml")
    err = info.value
    assert path in [p.path for p in err.problems], str(err)
    assert err.file == "corrupt.toml"
    assert path in str(err)
