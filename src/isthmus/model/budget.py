"""Budget caps: hard limits on the charged cost of cloud leases (docs/clouds.md, "Budgets").

A cap bounds what leases on some cloud sites (all of them by default) may cost, in total or
within each period (a UTC day or calendar month). Costs are charged per started billing
increment, when the increment starts: a lease whose first increment a cap cannot pay is
refused, and a VM whose next increment a cap cannot pay is released at its boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

PERIODS: tuple[str, ...] = ("day", "month")


@dataclass(frozen=True, slots=True)
class BudgetCap:
    """One cap: `limit` dollars over the leases of `sites` (names; empty: every cloud site),
    per `period` ("day", "month") or in total (None)."""

    name: str
    limit: float
    sites: tuple[str, ...] = ()
    period: str | None = None
