"""Decision kinds: one module per kind of decision, holding its validation and its application.

A kind is an object with the decision class it handles (`decision`), `validate(ops, d)`, which
raises `isthmus.model.status.Refused` with a code and a reason or returns what `apply` needs,
and `apply(ops, d, ctx)`, which changes the state through the operations the engine offers its
kinds (`isthmus.engine.ops.EngineOps`: never the engine class) and the site backends.

A kind registers itself when its module is imported (`register(KindClass())`, or the class
decorator `@decision_kind`), and the engine dispatches on the decision's class. The modules of
this package are found with `pkgutil` the first time the engine asks for the kinds (`kinds`):
adding a kind is a new module here, no list to edit and no engine code to change. A kind may
also be registered from anywhere else before its decisions are applied (a test's throwaway
kind, a plugin).

The decisions themselves are plain dataclasses that policies build, so they live below the
policies (`isthmus.model.decisions`); a policy that emits a new kind imports its dataclass from
there, and the kind's module here imports it too. Policies return any decision object (the
open `isthmus.model.decisions.Decision` protocol): one without a kind is refused as INVALID.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from isthmus.engine.ops import EngineOps


class DecisionKind(Protocol):
    """How the engine validates and applies one class of decision."""

    @property
    def decision(self) -> type:
        """The decision class this kind handles."""
        ...

    def validate(self, ops: EngineOps, d: Any) -> Any:
        """Raise Refused if `d` cannot be applied now; return what `apply` needs."""
        ...

    def apply(self, ops: EngineOps, d: Any, ctx: Any) -> None:
        """Apply the validated decision `d`."""
        ...


_KINDS: dict[type, DecisionKind] = {}
#: whether the modules of this package were imported (a list: set once, no `global`)
_found: list[bool] = []

K = TypeVar("K", bound=DecisionKind)


def register(kind: DecisionKind) -> DecisionKind:
    """Add a decision kind; a second kind for the same decision class is refused."""
    if kind.decision in _KINDS:
        raise ValueError(f"decision {kind.decision.__name__} already has a kind ({_KINDS[kind.decision]!r})")
    _KINDS[kind.decision] = kind
    return kind


def decision_kind(cls: type[K]) -> type[K]:
    """Class decorator: register an instance of the kind class `cls` (made without arguments)."""
    register(cls())
    return cls


def unregister(decision: type) -> None:
    """Remove the kind of decision class `decision` (a test's throwaway kind); KeyError if none."""
    del _KINDS[decision]


def kinds() -> dict[type, DecisionKind]:
    """The registered kinds by decision class, the modules of this package imported first (once).

    The dict is the registry itself: a kind registered later is seen by engines built before."""
    if not _found:
        _found.append(True)
        for module in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{module.name}")
    return _KINDS
