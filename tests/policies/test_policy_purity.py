"""Policies never read a clock, do no I/O and keep no global random state (DESIGN.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import isthmus.policies

FORBIDDEN_MODULES = {
    "time",
    "datetime",
    "os",
    "sys",
    "io",
    "socket",
    "subprocess",
    "pathlib",
    "threading",
    "asyncio",
    "shutil",
    "tempfile",
    "httpx",
    "requests",
    "sqlalchemy",
    "logging",
}
FORBIDDEN_CALLS = {"open", "print", "input", "eval", "exec"}
# module-level functions of `random` use hidden global state; only seeded Random instances are allowed
FORBIDDEN_RANDOM = {"random", "randint", "randrange", "choice", "shuffle", "uniform", "seed", "sample"}


def policy_files():
    root = Path(isthmus.policies.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) > 10
    return files


def problems_in(path: Path) -> list[str]:
    """Clock reads, I/O and global randomness found in one source file."""
    problems = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
            if names[0] == "random" and any(a.name in FORBIDDEN_RANDOM for a in node.names):
                problems.append(f"{path.name}:{node.lineno}: global random function imported")
        else:
            names = []
        problems += [f"{path.name}:{node.lineno}: imports {n}" for n in names if n in FORBIDDEN_MODULES]
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in FORBIDDEN_CALLS:
                problems.append(f"{path.name}:{node.lineno}: calls {f.id}()")
            if (
                isinstance(f, ast.Attribute)
                and isinstance(f.value, ast.Name)
                and f.value.id == "random"
                and f.attr in FORBIDDEN_RANDOM
            ):
                problems.append(f"{path.name}:{node.lineno}: calls random.{f.attr}()")
    return problems


def test_no_clock_io_or_global_randomness_in_policies():
    problems = [p for path in policy_files() for p in problems_in(path)]
    assert problems == []


BAD_POLICIES = {
    "import time\nx = time.time()\n": "imports time",
    "from datetime import datetime\n": "imports datetime",
    "import os.path\n": "imports os",
    "def f():\n    return open('x')\n": "calls open()",
    "import random\nrandom.choice([1])\n": "calls random.choice()",
    "from random import shuffle\n": "global random function imported",
    "def f():\n    print(1)\n": "calls print()",
}


def test_the_check_catches_each_kind_of_impurity(tmp_path):
    for source, expected in BAD_POLICIES.items():
        bad = tmp_path / "bad.py"
        bad.write_text(source)
        found = problems_in(bad)
        assert any(expected in p for p in found), (source, found)
    good = tmp_path / "good.py"
    good.write_text("import random\nrng = random.Random(3)\nx = rng.choice([1, 2])\n")
    assert problems_in(good) == []


def test_engine_detects_a_policy_that_mutates_state():
    import pytest

    from helpers import clusters, job
    from isthmus.policies.allocation.first_fit import FirstFit
    from isthmus.policies.registry import _TABLE
    from isthmus.sim.runner import simulate

    class Meddler(FirstFit):
        name = "meddler"

        def decide(self, view):
            for e in view.queue(0):
                e.stage = 0
                e.restarts += 1  # mutation!
            return super().decide(view)

    import sys

    sys.modules[__name__].Meddler = Meddler
    _TABLE["allocation"]["meddler"] = f"{__name__}:Meddler"
    try:
        with pytest.raises(AssertionError, match="changed the engine state"):
            simulate(clusters(1), [job(1, 0, 1, 1)], "meddler", "none", check_purity=True)
    finally:
        del _TABLE["allocation"]["meddler"]
