"""Giving freed memory back to the system (glibc's malloc), for the simulator's large columns.

A simulation's NumPy columns (the trace while it is read, the event log, the metrics' tables)
are large and short-lived. glibc keeps what such blocks free unless told otherwise, so the
resident size of `isthmus simulate` stayed at each step's high-water mark. Both calls here do
nothing where the C library lacks them (musl, macOS).
"""

from __future__ import annotations

import ctypes
from functools import cache

#: glibc's M_MMAP_THRESHOLD (mallopt parameter -3), and the fixed value the command sets.
_M_MMAP_THRESHOLD, MMAP_THRESHOLD = -3, 4 << 20


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except OSError:
        return None


def fix_mmap_threshold() -> bool:
    """Keep glibc's malloc giving every block of 4 MB or more its own mapping, returned to the
    system when freed. By default glibc raises that threshold each time such a block is freed
    (up to 32 MB), after which the NumPy columns of metrics and reading come from the heap and
    stay with the process: 45 MB more at the peak of `isthmus simulate` for 300k jobs. Smaller
    blocks still come from the heap, reused without system calls. Returns whether it was set."""
    libc = _libc()
    try:
        return libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except AttributeError:
        return False


def release_free_memory() -> bool:
    """Return the heap's free pages to the system (glibc's malloc_trim): called between the
    steps of a simulation (after reading, after each run), it keeps the next step's peak from
    adding to the last one's leftovers (about 25 MB at 300k jobs). Returns whether it ran."""
    libc = _libc()
    if libc is None:
        return False
    try:
        libc.malloc_trim(0)
    except AttributeError:
        return False
    return True
