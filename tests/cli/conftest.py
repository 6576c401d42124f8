"""What the CLI tests share: the `submitted` fixture (the API client replaced by
`clikit.FakeClient`)."""

from __future__ import annotations

from typing import Any

import pytest
from clikit import FakeClient

from isthmus.cli.live import common as live_common


@pytest.fixture
def submitted(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The submissions the CLI makes in the test (the API client replaced by `FakeClient`)."""
    FakeClient.specs = []
    monkeypatch.setattr(live_common, "Client", FakeClient)
    return FakeClient.specs
