"""Decisions and their kinds: one module per kind of decision, holding the decision's dataclass,
its validation and its application.

A policy returns decisions (plain frozen dataclasses it builds: `isthmus.decisions.start.StartJob`,
...); the engine validates and applies each through the kind registered for its class. A kind is
an object with the decision class it handles (`decision`), `validate(ops, d)`, which raises
`isthmus.model.status.Refused` with a code and a reason or returns what `apply` needs, and
`apply(ops, d, ctx)`, which changes the state through the operations the engine offers its kinds
(`isthmus.decisions.ops.KindOps`: never the engine class, nor any engine module).

This package sits below both the policies and the engine: it imports `isthmus.model` only.
Policies import a decision's dataclass from its module here; the engine finds the kinds here.

Adding a kind is one new module here, with nothing else to edit:

- the decision's frozen dataclass (with a `by` field: the deciding policy, empty for the engine
  to name the one that returned it);
- a kind class with `decision`, `validate` and `apply`, typed against `KindOps` (generic in the
  engine objects it passes back: `def validate(self, ops: KindOps[E, B, S, C], d: MyDecision)`);
- `register(MyKind())` at the end (or the class decorator `@decision_kind`).

A policy that emits it imports the dataclass from that module. The modules of this package
(`ops` aside) are imported with `pkgutil` the first time the engine asks for the kinds (`kinds`),
so a kind no policy imported is registered all the same; a kind may also be registered from anywhere else
before its decisions are applied (a test's throwaway kind, a plugin). Policies return any
decision object (the open `Decision` protocol): one without a kind is refused as INVALID.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from isthmus.decisions.ops import AnyOps


class Decision(Protocol):
    """What a policy returns: any decision object. The engine dispatches on its class to the kind
    registered for it and refuses one it has no kind for (INVALID), so that a new kind of decision
    edits no list. Every decision names its deciding policy (`by`; empty: the engine names the
    policy that returned it)."""

    @property
    def by(self) -> str:
        """The deciding policy's name, or empty."""
        ...


class DecisionKind(Protocol):
    """How the engine validates and applies one class of decision."""

    @property
    def decision(self) -> type:
        """The decision class this kind handles."""
        ...

    def validate(self, ops: AnyOps, d: Any) -> Any:
        """Raise Refused if `d` cannot be applied now; return what `apply` needs."""
        ...

    def apply(self, ops: AnyOps, d: Any, ctx: Any) -> None:
        """Apply the validated decision `d`."""
        ...


#: the one module of the package that is not a kind: the protocols kinds are typed against, which
#: kinds import for type checking only (its generic protocols take tens of milliseconds to build)
_PROTOCOLS = "ops"

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
            if module.name != _PROTOCOLS:
                importlib.import_module(f"{__name__}.{module.name}")
    return _KINDS
