"""docs/environments.md lists exactly the registered policies (no name that does not exist)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from isthmus.policies import registry

DOC = Path(__file__).resolve().parents[2] / "docs" / "environments.md"


@pytest.mark.parametrize("family", ["allocation", "provisioning"])
def test_policy_table_matches_the_registry(family: str) -> None:
    if not DOC.exists():
        pytest.skip(f"{DOC} not found")
    row = re.search(rf"^\| `{family}` \| [^|]*:(.*?)\|", DOC.read_text(encoding="utf-8"), flags=re.M)
    assert row, f"no `{family}` row in the [policies] table of {DOC.name}"
    assert sorted(re.findall(r"`([^`]+)`", row.group(1))) == registry.names(family)
