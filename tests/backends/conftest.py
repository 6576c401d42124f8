"""The `recorded` fixture: every Libcloud connection answered from recorded responses (cloudreplay)."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from typing import Any

import pytest
from cloudreplay import Recorded


@pytest.fixture
def recorded(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recorded]:
    """Every Libcloud connection answered from the recorded responses of the driver named by the
    test's `driver` parameter (indirect) or module attribute ``DRIVER``."""
    from libcloud.common.base import Connection
    from libcloud.http import LibcloudConnection

    driver = getattr(request, "param", None) or request.module.DRIVER
    table = Recorded(driver)

    class Replay(LibcloudConnection):  # type: ignore[misc]
        def request(
            self,
            method: str,
            url: str,
            body: Any = None,
            headers: Any = None,
            raw: bool = False,
            stream: bool = False,
            hooks: Any = None,
        ) -> None:
            self.response = table.answer(method, urllib.parse.urljoin(self.host, url), body)

        def prepared_request(
            self, method: str, url: str, body: Any = None, headers: Any = None, raw: bool = False, stream: bool = False
        ) -> None:
            self.response = table.answer(method, "".join([self.host, url]), body)

    monkeypatch.setattr(Connection, "conn_class", Replay)
    yield table
