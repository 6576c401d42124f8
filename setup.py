"""Build hook: compile the simulator's hot modules with mypyc when ISTHMUS_MYPYC=1 (pure Python otherwise).

Everything else about the package lives in pyproject.toml. See docs/simulation.md, "Compiled with mypyc".
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup

SRC = Path(__file__).resolve().parent / "src"

# The engine's per-job path (docs/simulation.md, "Compiled with mypyc"). A compiled class's
# bases must be compiled with it, so each class hierarchy is listed whole. Not here: classes
# extending an ABC (model/jobtable.py's Sequence and Mapping): compiled, they share the ABC's
# isinstance cache (a list passed isinstance(x, JobTable) once a list passed isinstance(x, Sequence)).
COMPILED = [
    "src/isthmus/engine/backend.py",
    "src/isthmus/engine/clock.py",
    "src/isthmus/engine/engine.py",
    "src/isthmus/engine/state.py",
    "src/isthmus/engine/view.py",
    "src/isthmus/decisions/start.py",
    "src/isthmus/model/events.py",
    "src/isthmus/model/job.py",
    "src/isthmus/backends/simulated.py",
    "src/isthmus/policies/api.py",
    "src/isthmus/policies/allocation/common.py",
    "src/isthmus/policies/allocation/fcfs.py",
    "src/isthmus/policies/allocation/easy.py",
    "src/isthmus/policies/allocation/tags.py",
    "src/isthmus/policies/prediction/wait.py",
]


def remove_compiled() -> list[Path]:
    """Delete the extension modules an earlier compiled install left next to the sources (an
    editable install builds them in place): a stale one would shadow its edited .py, and a pure
    install must run the .py files. isthmus has no other compiled module. Returns the deleted files."""
    stale = [*SRC.glob("*__mypyc*.so"), *SRC.glob("isthmus/**/*.so"), *SRC.glob("isthmus/**/*.pyd")]
    for path in stale:
        path.unlink()
    return stale


# Every install starts from the sources alone: a pure one runs them, a compiled one builds
# today's list (a module taken off it must not keep its old build).
remove_compiled()

if os.environ.get("ISTHMUS_MYPYC") == "1":
    # Built without build isolation (docs/simulation.md, "Compiled with mypyc"): mypyc type-checks the modules as mypy
    # does, with the project's [tool.mypy] (the pydantic plugin) and the installed packages'
    # types (numpy, sortedcontainers, pydantic); an isolated build environment has neither.
    from mypyc.build import mypycify

    setup(ext_modules=mypycify(COMPILED, opt_level="3", debug_level="0"))
else:
    setup()
