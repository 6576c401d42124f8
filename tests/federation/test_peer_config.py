"""[[peers]], [federation] and policies.selection in the environment file (docs/federation.md):
errors name the file, line and key; a valid file round-trips; the role negotiation of openConn
(Villegas dissertation Table 4.1) and the reading of peer secrets."""

from __future__ import annotations

from pathlib import Path

import pytest

from isthmus.config.errors import ConfigError
from isthmus.config.loader import environment_from_text, load_file
from isthmus.config.schema import environment_to_dict, validate_document
from isthmus.federation.links import MIRROR as _MIRROR
from isthmus.federation.links import PeerConfigError, grant, load_secret
from isthmus.model.peers import FederationSettings, PeerRole, PeerSettings

GOOD = """
name = "A"
[[sites]]
name = "c1"
nodes = 2
[policies]
selection = "lowest-qlen"
[federation]
heartbeat = 1.5
missed_heartbeats = 4
[[peers]]
name = "B"
address = "http://10.0.0.2:8750/"
role = "provider"
token_env = "PEER_B_SECRET"
[[peers]]
name = "C"
address = "https://c.example.org/isthmus"
token_file = "/etc/isthmus/c.secret"
heartbeat = 5
"""


def test_peers_federation_and_selection_are_read_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "a.toml"
    path.write_text(GOOD)
    env = load_file(path)
    assert env.peers == (
        PeerSettings("B", "http://10.0.0.2:8750", PeerRole.PROVIDER, token_env="PEER_B_SECRET"),
        PeerSettings(
            "C", "https://c.example.org/isthmus", PeerRole.BOTH, token_file="/etc/isthmus/c.secret", heartbeat=5.0
        ),
    )
    assert env.federation == FederationSettings(heartbeat=1.5, missed_heartbeats=4)
    assert env.selection is not None and env.selection.name == "lowest-qlen"
    assert validate_document(environment_to_dict(env)) == env


def test_an_environment_without_peers_writes_none() -> None:
    env = environment_from_text('name = "x"\n[[sites]]\nname = "c"\nnodes = 1\n', "toml")
    doc = environment_to_dict(env)
    assert "peers" not in doc and "federation" not in doc and "selection" not in doc["policies"]


BAD = """name = "A"
[[sites]]
name = "c1"
nodes = 1
[policies]
selection = "lowest-qlenn"
[federation]
max_hops = 0
[[peers]]
name = "A"
address = "ftp://x"
role = "providerr"
token_env = "X"
hearbeat = 3
[[peers]]
name = "B"
address = "http://b:1"
[[peers]]
name = "B"
address = "http://b:2"
token_env = "1BAD"
"""


def test_every_peer_problem_names_its_line_and_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(BAD)
    with pytest.raises(ConfigError) as info:
        load_file(path)
    text = str(info.value)
    assert text.startswith(f"{path}: ")
    expected = [
        "line 6: policies.selection: unknown selection policy 'lowest-qlenn'",
        "did you mean 'lowest-qlen'?",
        "line 8: federation.max_hops: expected an integer >= 1, got 0",
        "line 10: peers[0].name: 'A' is this manager's own name",
        "line 11: peers[0].address: expected an http:// or https:// URL",
        "line 12: peers[0].role: expected one of 'provider', 'consumer' or 'both'",
        "line 14: peers[0].hearbeat: unknown key 'hearbeat'; did you mean 'heartbeat'?",
        "line 15: peers[1]: a peer needs exactly one of token_env",
        "line 19: peers[2].name: duplicate peer name 'B' (also peers[1])",
        "line 21: peers[2].token_env: expected the name of an environment variable",
    ]
    for part in expected:
        assert part in text, (part, text)


@pytest.mark.parametrize(
    ("proposed", "allowed", "granted"),
    [
        (PeerRole.CONSUMER, PeerRole.BOTH, PeerRole.CONSUMER),
        (PeerRole.BOTH, PeerRole.CONSUMER, PeerRole.CONSUMER),
        (PeerRole.BOTH, PeerRole.BOTH, PeerRole.BOTH),
        (PeerRole.PROVIDER, PeerRole.PROVIDER, PeerRole.PROVIDER),
        (PeerRole.PROVIDER, PeerRole.CONSUMER, None),
        (PeerRole.CONSUMER, PeerRole.PROVIDER, None),
    ],
)
def test_open_conn_grants_the_proposed_role_narrowed_to_the_configured_one(
    proposed: PeerRole, allowed: PeerRole, granted: PeerRole | None
) -> None:
    assert grant(proposed, allowed) is granted


def test_peer_secrets_come_from_a_variable_or_a_file_and_missing_ones_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PEER_SECRET_T", "  s3cret \n")
    assert load_secret(PeerSettings("B", "http://b", token_env="PEER_SECRET_T")) == "s3cret"
    monkeypatch.delenv("PEER_SECRET_T")
    with pytest.raises(PeerConfigError, match="peer 'B': environment variable PEER_SECRET_T"):
        load_secret(PeerSettings("B", "http://b", token_env="PEER_SECRET_T"))
    f = tmp_path / "secret"
    f.write_text("abc\n")
    assert load_secret(PeerSettings("B", "http://b", token_file=str(f))) == "abc"
    f.write_text("\n")
    with pytest.raises(PeerConfigError, match="is empty"):
        load_secret(PeerSettings("B", "http://b", token_file=str(f)))
    with pytest.raises(PeerConfigError, match="cannot read its token_file"):
        load_secret(PeerSettings("B", "http://b", token_file=str(tmp_path / "none")))


@pytest.mark.parametrize("a_says_b", list(PeerRole))
@pytest.mark.parametrize("b_says_a", list(PeerRole))
def test_after_open_conn_a_forwards_to_b_exactly_when_both_files_allow_it(
    a_says_b: PeerRole, b_says_a: PeerRole
) -> None:
    # A proposes the mirror of what its file says B is; B narrows it to what its file says A is;
    # A then sees B as the mirror of the granted role
    proposal = _MIRROR[a_says_b]
    granted = grant(proposal, b_says_a)
    a_may_forward = granted is not None and _MIRROR[granted].provides
    assert a_may_forward == (a_says_b.provides and b_says_a.consumes)
    b_may_forward = granted is not None and granted.provides
    assert b_may_forward == (a_says_b.consumes and b_says_a.provides)
    if granted is None:  # refused only when neither direction is left
        assert not (a_says_b.provides and b_says_a.consumes) and not (a_says_b.consumes and b_says_a.provides)
