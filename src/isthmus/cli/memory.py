"""Process-wide memory settings of the `isthmus` program: freed memory given back to the system
(glibc's malloc), and no cyclic garbage collection over what start-up made.

A simulation's NumPy columns (the trace while it is read, the event log, the metrics' tables)
are large and short-lived. glibc keeps what such blocks free unless told otherwise, so the
resident size of `isthmus simulate` stayed at each step's high-water mark. Both calls for that
do nothing where the C library lacks them (musl, macOS).

Start-up imports make some 70,000 objects (modules, classes, functions) that live as long as
the process. Python's cyclic collector runs during the imports and scans them again in every
full collection of the run: 0.1-0.2 s of CPU in `isthmus simulate` for 100k jobs.
The program runs its imports without collections and then freezes what they made
(`gc.freeze`): later collections scan only what the command itself makes.
Only the program does this (`start_program_gc` is called when the command line is its own, not
from a test runner or a library call, whose garbage would be frozen too).
"""

from __future__ import annotations

import gc
from functools import cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ctypes

#: glibc's M_MMAP_THRESHOLD (mallopt parameter -3), and the fixed value the command sets.
_M_MMAP_THRESHOLD, MMAP_THRESHOLD = -3, 4 << 20


@cache
def _libc() -> ctypes.CDLL | None:
    import ctypes  # (loaded by NumPy anyway; not needed to start the program)

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


#: whether `start_program_gc` ran in this process
_PROGRAM = {"gc": False}


def start_program_gc() -> None:
    """Turn the cyclic collector off until `end_startup_gc`, for the `isthmus` program only:
    its start-up makes long-lived objects and no garbage worth a collection."""
    _PROGRAM["gc"] = True
    gc.disable()


def end_startup_gc() -> bool:
    """In the `isthmus` program (after `start_program_gc`): freeze every object made so far
    (later collections skip them) and turn the collector back on; may be called again after
    more imports. Elsewhere nothing. Returns whether it froze."""
    if not _PROGRAM["gc"]:
        return False
    gc.freeze()
    gc.enable()
    return True
