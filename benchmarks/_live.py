"""Shared helper of the live benchmarks: start a manager on a throwaway state directory."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from isthmus.config import environment_from_text
from isthmus.live.launch import live_manager


@contextlib.contextmanager
def manager(env_toml: str, *, extra: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """Run `python -m isthmus.cli.live_entry server` on an environment text; yield (url, admin token)."""
    env = environment_from_text(env_toml, "toml", file="<benchmark environment>")
    with (
        tempfile.TemporaryDirectory(prefix="isthmus-bench-") as tmp,
        live_manager(env, Path(tmp), poll_wait=10.0, extra_args=extra or ()) as admin,
    ):
        yield admin.url, admin.token
