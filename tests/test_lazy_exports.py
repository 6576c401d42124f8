"""Packages whose names load their submodules on first use (isthmus.lazy): every exported name
resolves to the object its submodule defines, and nothing else passes for a name."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

LAZY_PACKAGES = ("isthmus.config", "isthmus.workloads")


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_exported_name_resolves_from_its_submodule(package: str) -> None:
    module = importlib.import_module(package)
    lazy = module._LAZY
    assert set(lazy) <= set(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)
        if name in lazy:
            assert value is getattr(importlib.import_module(f"{package}.{lazy[name]}"), name)
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_star_import_and_a_fresh_interpreter_see_every_name(package: str) -> None:
    code = f"from {package} import *\nimport {package} as p\nprint(all(n in globals() for n in p.__all__))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["True"], proc.stderr


def test_a_submodule_loaded_first_keeps_the_package_names_right() -> None:
    """`isthmus.config.bundled` is both a submodule and an exported function: loading the
    submodule directly must not leave the package's name bound to the module."""
    code = (
        "import isthmus.config.bundled\n"
        "from isthmus.config import bundled\n"
        "print(callable(bundled) and bundled.__name__ == 'bundled')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["True"], proc.stderr
