"""Budget caps: hard limits on the charged cost of cloud leases (docs/clouds.md, "Budgets").

A cap bounds what leases on some cloud sites (all of them by default) may cost, in total or
within each period (a UTC day or calendar month), for some users (everyone by default).
Costs are charged per started billing increment, when the increment starts, to the user the
VM serves (isthmus.engine.budgets has the attribution rule): a lease whose first increment a
cap cannot pay is refused, and a VM whose next increment a cap cannot pay is released at its
boundary, its jobs requeued. `on_limit` says what a cap does for running jobs: "requeue"
(nothing ahead: a job still running at a boundary the cap cannot pay is requeued) or "finish"
(a job starting on a VM of the cap commits the increments its requested runtime needs, so it
finishes on paid time; new leases and other increments only get what is left).
"""

from __future__ import annotations

from dataclasses import dataclass

PERIODS: tuple[str, ...] = ("day", "month")
ON_LIMIT: tuple[str, ...] = ("requeue", "finish")


@dataclass(frozen=True, slots=True)
class BudgetCap:
    """One cap: `limit` dollars over the leases of `sites` (names; empty: every cloud site)
    charged to `users` (empty: everyone), per `period` ("day", "month") or in total (None);
    `on_limit` is "requeue" or "finish" (module docstring)."""

    name: str
    limit: float
    sites: tuple[str, ...] = ()
    period: str | None = None
    users: tuple[str, ...] = ()
    on_limit: str = "requeue"

    def __post_init__(self) -> None:
        if self.on_limit not in ON_LIMIT:
            raise ValueError(f"budget {self.name!r}: on_limit {self.on_limit!r}, expected one of {', '.join(ON_LIMIT)}")
        if self.period is not None and self.period not in PERIODS:
            raise ValueError(f"budget {self.name!r}: period {self.period!r}, expected one of {', '.join(PERIODS)}")
