"""Package names loaded from their submodules on first use (module ``__getattr__``, PEP 562).

A package that re-exports the public names of its submodules imports every submodule when any
one of them is imported: `isthmus simulate` would load the environment file schema (pydantic
models), YAML, the workload generators and the trace reduction to read one SWF file. A package
that maps its names to submodules here imports a submodule only when one of its names is first
read (``from isthmus.workloads import resolve_workload`` loads ``workloads.resolve`` and what it
imports, nothing else). The names stay listed in the package's ``__all__`` and, for type
checkers, imported under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping


def load_name(package: str, exports: Mapping[str, str], name: str) -> object:
    """The value of `name` in package `package`, whose submodule ``exports[name]`` defines it.

    The submodule is imported and the value stored in the package, so that this runs once per
    name. AttributeError, as for any module, for a name the package does not export.
    """
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    setattr(sys.modules[package], name, value)
    return value


def names(package: str, exports: Mapping[str, str]) -> list[str]:
    """``dir()`` of a package with lazily loaded names: what it holds and what it exports."""
    return sorted(set(vars(sys.modules[package])) | set(exports))
