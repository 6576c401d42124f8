"""Fixtures of the router tests (helpers in serverkit.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).parent))

from serverkit import ENV, MAX_BATCH, PEER_SECRET, Api, manager_for

from isthmus.server.app import create_app


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Api]:
    """The API of a running manager (see serverkit.py); at most MAX_BATCH jobs a batch."""
    monkeypatch.setenv("ISTHMUS_ROUTER_TEST_PEER", PEER_SECRET)
    manager = manager_for(ENV, tmp_path, max_batch_jobs=MAX_BATCH)
    with TestClient(create_app(manager), raise_server_exceptions=True) as client:
        assert manager.admin_token is not None
        yield Api(client, manager, manager.admin_token)
