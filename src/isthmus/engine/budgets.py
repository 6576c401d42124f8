"""The ledger of budget caps: what each cap has charged, per period, and whether it can pay more.

Charges are booked when a billing increment starts (the lease's first, then each boundary),
in the period of that moment: a day is a UTC day of the clock's time (seconds since the epoch
live; since the simulation's start, counted from the epoch, in simulation), a month a calendar
month of it. Limits can change at run time (an admin raising a cap); what was charged stays.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field

from isthmus.model.budget import BudgetCap


def period_key(period: str | None, t: float) -> str:
    """The period `t` falls in: "" for a total cap, "YYYY-MM-DD" or "YYYY-MM" otherwise."""
    if period is None:
        return ""
    day = dt.datetime.fromtimestamp(max(0.0, t), tz=dt.UTC)
    return day.strftime("%Y-%m-%d") if period == "day" else day.strftime("%Y-%m")


@dataclass
class CapState:
    """A cap with the sites it covers (indices) and its charges by period."""

    cap: BudgetCap
    sites: frozenset[int]
    limit: float
    charged: dict[str, float] = field(default_factory=dict)

    def spent(self, t: float) -> float:
        """Charged in the period of `t`."""
        return self.charged.get(period_key(self.cap.period, t), 0.0)

    def left(self, t: float) -> float:
        """What the cap can still pay in the period of `t`."""
        return max(0.0, self.limit - self.spent(t))


class Ledger:
    """Every cap of an environment, with its charges (see the module docstring)."""

    def __init__(self, caps: tuple[BudgetCap, ...], site_index: dict[str, int], clouds: frozenset[int]) -> None:
        self.caps: list[CapState] = [
            CapState(c, frozenset(site_index[s] for s in c.sites) if c.sites else clouds, c.limit) for c in caps
        ]

    def __bool__(self) -> bool:
        return bool(self.caps)

    def covering(self, site: int) -> list[CapState]:
        """The caps that bound leases on `site`."""
        return [c for c in self.caps if site in c.sites]

    def refusal(self, site: int, amount: float, t: float) -> CapState | None:
        """The first cap covering `site` that cannot pay `amount` at `t`, or None."""
        for c in self.covering(site):
            if c.spent(t) + amount > c.limit + 1e-9:
                return c
        return None

    def pay(self, site: int, amount: float, t: float) -> None:
        """Book `amount` charged at `t` on every cap covering `site`."""
        for c in self.covering(site):
            key = period_key(c.cap.period, t)
            c.charged[key] = c.charged.get(key, 0.0) + amount

    def replay(self, site: int, leased_at: float, until: float, increment: float, price: float) -> float:
        """Book the increments a lease from `leased_at` started before `until` (a restart
        rebuilding the ledger); returns their total."""
        if price <= 0:
            return 0.0
        n = max(1, math.ceil((until - leased_at) / increment - 1e-9))
        for k in range(n):
            self.pay(site, price, leased_at + k * increment)
        return n * price

    def get(self, name: str) -> CapState | None:
        """The cap named `name`."""
        return next((c for c in self.caps if c.cap.name == name), None)
