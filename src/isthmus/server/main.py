"""Run the manager daemon: load the environment, open the database, serve the API with uvicorn."""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvicorn

from isthmus.live.manager import Manager, ManagerConfig
from isthmus.model.environment import Environment
from isthmus.server.app import create_app
from isthmus.server.store import sqlite_url


class _Server(uvicorn.Server):
    """uvicorn server that tells the manager at once when a stop signal arrives (wakes long polls)."""

    def __init__(self, config: uvicorn.Config, manager: Manager) -> None:
        super().__init__(config)
        self.manager = manager

    def handle_exit(self, sig: int, frame: object) -> None:
        self.manager.begin_shutdown()
        super().handle_exit(sig, frame)  # type: ignore[arg-type]


def parse_listen(listen: str) -> tuple[str, int]:
    """'HOST:PORT' (or ':PORT', or 'PORT') into (host, port); host defaults to 127.0.0.1."""
    host, sep, port = listen.rpartition(":")
    if not sep:
        host, port = "", listen
    try:
        p = int(port)
    except ValueError:
        raise ValueError(f"--listen expects HOST:PORT, got {listen!r}") from None
    if not 0 < p < 65536:
        raise ValueError(f"port {p} out of range")
    return host or "127.0.0.1", p


def load_env(spec: str) -> Environment:
    """An environment from a bundled name or a file (through isthmus.config)."""
    from isthmus.config.loader import load_environment

    return load_environment(spec)


def serve(
    env: Environment,
    *,
    state_dir: Path,
    db_url: str | None = None,
    listen: str = "127.0.0.1:8750",
    round_interval: float | str | None = "env",
    pilot_timeout: float = 30.0,
    heartbeat_timeout: float = 20.0,
    reattach_timeout: float = 15.0,
    poll_wait: float = 10.0,
    tag: str | None = None,
    log_level: str = "warning",
    max_body_bytes: int = ManagerConfig.max_body_bytes,
    max_batch_jobs: int = ManagerConfig.max_batch_jobs,
) -> None:
    """Run the manager until SIGINT/SIGTERM (graceful: pilots are told to exit).

    Requests with a body over `max_body_bytes` or a batch of more than `max_batch_jobs` jobs get 413.
    """
    host, port = parse_listen(listen)
    if max_body_bytes < 1024:
        raise ValueError(f"--max-body-bytes must be at least 1024, got {max_body_bytes}")
    if max_batch_jobs < 1:
        raise ValueError(f"--max-batch-jobs must be at least 1, got {max_batch_jobs}")
    state_dir = Path(state_dir)
    state_dir.mkdir(parents=True, exist_ok=True)
    url = db_url or sqlite_url(state_dir / "isthmus.db")
    cfg = ManagerConfig(
        env=env,
        db_url=url,
        state_dir=state_dir,
        host=host,
        port=port,
        round_interval=round_interval,
        pilot_timeout=pilot_timeout,
        heartbeat_timeout=heartbeat_timeout,
        reattach_timeout=reattach_timeout,
        poll_wait=poll_wait,
        tag=tag,
        max_body_bytes=max_body_bytes,
        max_batch_jobs=max_batch_jobs,
    )
    manager = Manager(cfg)
    app = create_app(manager)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=3,
        backlog=2048,
    )
    server = _Server(config, manager)
    asyncio.run(server.serve())
