"""Decision kinds: one module per kind of decision, holding its validation and its application.

A kind is an object with the decision class it handles (`decision`), `validate(engine, d)`,
which raises `isthmus.model.status.Refused` with a code and a reason or returns what `apply`
needs, and `apply(engine, d, ctx)`, which changes the state through the engine and the site
backends. `register` adds a kind; the engine dispatches on the decision's class. Adding a kind
of decision (forward a job, grow or shrink a malleable job) is a new module here and a
`register` call: no engine code changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine


class DecisionKind(Protocol):
    """How the engine validates and applies one class of decision."""

    @property
    def decision(self) -> type:
        """The decision class this kind handles."""
        ...

    def validate(self, engine: Engine, d: Any) -> Any:
        """Raise Refused if `d` cannot be applied now; return what `apply` needs."""
        ...

    def apply(self, engine: Engine, d: Any, ctx: Any) -> None:
        """Apply the validated decision `d`."""
        ...


_KINDS: dict[type, DecisionKind] = {}


def register(kind: DecisionKind) -> DecisionKind:
    """Add a decision kind; a second kind for the same decision class is refused."""
    if kind.decision in _KINDS:
        raise ValueError(f"decision {kind.decision.__name__} already has a kind ({_KINDS[kind.decision]!r})")
    _KINDS[kind.decision] = kind
    return kind


def kinds() -> dict[type, DecisionKind]:
    """The registered kinds by decision class (the built-in ones are loaded on first call)."""
    if not _KINDS:
        from isthmus.engine.kinds import (  # noqa: F401
            abort,
            forward,
            grow,
            hold,
            hold_release,
            kill,
            lease,
            release,
            reserve,
            retire,
            shrink,
            start,
            wake,
        )
    return _KINDS
