"""NumPy's BLAS in the `isthmus` program's computing commands and sweep workers: one thread.

isthmus does no linear algebra, but the OpenBLAS that NumPy's wheels carry starts a pool of
one thread per core when NumPy is imported, and those threads spin before they sleep: on a
two-core machine 0.09 s of CPU, half of NumPy's import, taken from the simulation itself or, in
a sweep, from the other worker processes (Dask's workers set the same limit for this reason).
The commands that compute (simulate, experiment, workload, ...) and the sweep's worker
processes import NumPy with OpenBLAS limited to one thread. The variable is set only around
that import: the processes a command starts (jobs, pilots, sweep workers) get the environment
as it was, and a thread count the user set wins.
"""

from __future__ import annotations

import importlib
import os
import sys

#: the variable set for the import (OpenBLAS reads it once, when it is loaded)
BLAS_THREADS = "OPENBLAS_NUM_THREADS"
#: the variables OpenBLAS takes its thread count from, in its order: any of them set is the user's choice
BLAS_THREAD_VARIABLES = (BLAS_THREADS, "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def import_numpy_single_threaded() -> bool:
    """Import NumPy with OpenBLAS on one thread unless the environment already says how many
    (`BLAS_THREAD_VARIABLES`); nothing when NumPy is already imported. Returns whether this
    call imported it."""
    if "numpy" in sys.modules:
        return False
    added = not any(name in os.environ for name in BLAS_THREAD_VARIABLES)
    if added:
        os.environ[BLAS_THREADS] = "1"
    try:
        importlib.import_module("numpy")
    finally:
        if added:
            os.environ.pop(BLAS_THREADS, None)
    return True
