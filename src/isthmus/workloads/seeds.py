"""The default seed of generated workloads (a module of its own: the command line reads it
without loading the models)."""

from __future__ import annotations

#: The seed of generated workloads wherever none is given: `isthmus workload generate`,
#: `simulate`, `validate` and the library functions alike, so that one model spec gives the
#: same jobs everywhere.
DEFAULT_SEED = 0
