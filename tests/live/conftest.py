"""Fixtures of the live tests: real manager processes, real pilots, a real SQLite file or PostgreSQL.

Every process a test starts carries ISTHMUS_TAG=<unique tag> in its environment (the manager
copies it into pilots and jobs); the `tag` fixture kills whatever still carries it at the end,
so no test leaves processes behind. Shared helpers are in livekit.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from cloudkit import CREDENTIALS, ec2_server
from livekit import PG_DSN, LiveServer, tagged_pids, write_env


@pytest.fixture
def endpoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A local EC2-compatible server of this test (moto), with the credentials its cloud sites name."""
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with ec2_server() as url:
        yield url


@pytest.fixture
def tag() -> Iterator[str]:
    """A unique tag; everything carrying it is killed at teardown."""
    t = uuid.uuid4().hex
    yield t
    for _ in range(3):
        pids = tagged_pids(t)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh database: an SQLite file, or a new PostgreSQL database (needs ISTHMUS_TEST_PG)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'isthmus.db'}"
        return
    if not PG_DSN:
        pytest.skip("PostgreSQL not configured: run scripts/start_pg.sh and export ISTHMUS_TEST_PG=<DSN>")
    import psycopg

    name = "isthmus_t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, _ = PG_DSN.rpartition("/")
    yield f"{base}/{name}"
    with psycopg.connect(PG_DSN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def live(tmp_path: Path, db_url: str, tag: str) -> Iterator[LiveServer]:
    """A running manager on the small test environment."""
    env_file = write_env(tmp_path / "env.toml")
    server = LiveServer(env_file, tmp_path / "state", db_url, tag).start()
    yield server
    server.stop()
