"""Which account a pilot runs a start command as (no manager needed): its own when none is named
or the named one is its own; another only when it is root; never when the manager has none."""

from __future__ import annotations

import pytest

from isthmus.agent import pilot as pilot_mod
from isthmus.agent.accounts import own_name
from isthmus.agent.pilot import LaunchError, Pilot, PilotConfig


@pytest.fixture
def pilot() -> Pilot:
    return Pilot(PilotConfig(url="http://127.0.0.1:9", node="0/n0", token="t"))


def test_no_account_named_or_its_own_runs_as_the_pilot(pilot: Pilot) -> None:
    assert pilot._account({}) is None
    assert pilot._account({"user": own_name()}) is None


def test_a_pilot_that_is_not_root_refuses_another_account(pilot: Pilot, monkeypatch: pytest.MonkeyPatch) -> None:
    me = own_name()
    monkeypatch.setattr(pilot_mod.os, "geteuid", lambda: 54321)
    with pytest.raises(LaunchError, match=f"this pilot runs as {me} and cannot switch to nobody") as caught:
        pilot._account({"user": "nobody"})
    assert caught.value.code == 126


def test_a_root_pilot_switches_to_existing_accounts_only(pilot: Pilot, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pilot_mod.os, "geteuid", lambda: 0)
    pilot._own = "someone-else"  # a root pilot (its own name is not the job's)
    account = pilot._account({"user": "nobody"})
    assert account is not None and account.name == "nobody" and account.uid != 0
    with pytest.raises(LaunchError, match=r"no Unix account 'no-such-account-x' on this machine \(node 0/n0\)"):
        pilot._account({"user": "no-such-account-x"})
    with pytest.raises(LaunchError, match="jobs never run as root"):
        pilot._account({"user": "root"})


def test_a_user_without_an_account_is_refused(pilot: Pilot) -> None:
    with pytest.raises(LaunchError, match=r"no Unix account in the environment's \[users\] table"):
        pilot._account({"user": None})
