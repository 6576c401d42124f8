"""isthmus.cli.memory: glibc's malloc told to give large freed blocks back (isthmus simulate)."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

from isthmus.cli import memory

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not GLIBC, reason="mallopt and malloc_trim are glibc's")
def test_glibc_takes_both_settings() -> None:
    """On glibc both calls reach the C library (mallopt says 1 when it accepts the value)."""
    code = "from isthmus.cli import memory\nprint(memory.fix_mmap_threshold(), memory.release_free_memory())\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["True", "True"]


def test_without_the_c_library_nothing_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_libc", lambda: None)
    assert memory.fix_mmap_threshold() is False
    assert memory.release_free_memory() is False
