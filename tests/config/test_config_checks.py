"""The rules across keys run on validated models: `lenient` keeps what validates of a table that
does not, so one bad value hides no other rule."""

from __future__ import annotations

from isthmus.config.checks import Parts, check, lenient
from isthmus.config.models import PeerSpec, SiteSpec


def _no_policy_check(family: str, name: str, params: object) -> None:
    return None


def test_lenient_keeps_the_valid_keys_and_names_the_invalid_ones() -> None:
    site = lenient(SiteSpec, {"name": "pub", "kind": "cloud", "max_vms": "many", "min_vms": 2, "bogus": 1})
    assert site is not None
    assert (site.name, site.kind, site.min_vms, site.max_vms) == ("pub", "cloud", 2, None)
    assert site.invalid_keys == {"max_vms"}
    assert site.model_fields_set == {"name", "kind", "min_vms", "max_vms"}


def test_lenient_keeps_the_valid_items_of_a_list_of_tables() -> None:
    site = lenient(SiteSpec, {"name": "c", "kind": "cloud", "instance_types": [{"name": "a", "cores": 0}]})
    assert site is not None and site.instance_types is not None
    (item,) = site.instance_types
    assert item.name == "a" and item.invalid_keys == {"cores"}


def test_lenient_keeps_a_valid_value_a_table_rule_refuses_for_now() -> None:
    """PeerSpec's rule (exactly one secret) runs on every assignment: the name stays valid."""
    peer = lenient(PeerSpec, {"name": "b", "address": "ftp://x"})
    assert peer is not None and peer.name == "b" and peer.invalid_keys == {"address"}


def test_lenient_gives_up_without_a_required_key_or_a_table() -> None:
    assert lenient(SiteSpec, {"kind": "cloud"}) is None
    assert lenient(SiteSpec, ["not", "a", "table"]) is None


def test_an_invalid_kind_applies_neither_kinds_rules() -> None:
    parts = Parts.of_document({"name": "e", "sites": [{"name": "x", "kind": "clod", "max_vms": 2}]})
    assert check(parts, _no_policy_check) == []  # no "needs nodes", no "applies only to cloud sites"


def test_set_members_wait_until_every_site_is_valid() -> None:
    doc = {
        "name": "e",
        "sites": [{"name": 7, "nodes": 1}, {"name": "b", "nodes": 1}],
        "sets": [{"name": "s", "sites": ["a", "b", "b"]}],
    }
    found = check(Parts.of_document(doc), _no_policy_check)
    assert found == [(("sets", 0, "sites", 2), "site 'b' is listed twice in this set (also sites[1])")]
    doc["sites"][0]["name"] = "a"
    assert check(Parts.of_document(doc), _no_policy_check) == found
    doc["sets"][0]["sites"] = ["z"]
    assert check(Parts.of_document(doc), _no_policy_check) == [
        (("sets", 0, "sites", 0), "unknown site 'z'; sites: a, b")
    ]
