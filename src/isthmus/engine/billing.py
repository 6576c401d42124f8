"""What the engine's leases cost: the budget, billing boundaries and lease churn.

`Billing` holds the cap on the charged cost of all leases (`budget`, None: no cap) and the
cost committed so far (`spent`: every started billing increment of every lease). A paid VM's
next billing boundary is an event on the clock (`schedule`); at the boundary (`boundary`) the
next increment is paid, or, when the budget or a budget cap cannot pay it, the VM is released
and the runs on it are killed and requeued. The environment's per-user and per-site caps are
the ledger's (`isthmus.engine.budgets`). `lease_churn` stops a run whose provisioning leases
and releases VMs for ever without the clock moving. It talks to the engine through `BillingOps`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from isthmus.engine.clock import EV_BILLING, PRIO_BILLING
from isthmus.model.events import EventKind, KillCause
from isthmus.model.states import VmState
from isthmus.model.status import Status, StatusCode

if TYPE_CHECKING:
    from isthmus.engine.ops import BillingOps

_VM_RELEASE = int(EventKind.VM_RELEASE)


class Billing:
    """The budget of one engine and the billing of its paid VMs."""

    def __init__(self, ops: BillingOps, budget: float | None, lease_churn_limit: int) -> None:
        if budget is not None and (budget < 0 or math.isnan(budget)):
            raise ValueError(f"budget must be a number >= 0, got {budget}")
        self.ops = ops
        #: Cap on the charged cost of all leases ($); None: no cap.
        self.budget = budget
        #: Charged cost committed so far: every started billing increment of every lease.
        self.spent = 0.0
        # VMs leased at the clock's current instant (`lease_churn`): leasing far more than the
        # clouds hold without time passing is a lease and release cycle that never ends
        self._lease_instant = -math.inf
        self._leases_now = 0
        self._lease_churn_limit = lease_churn_limit

    def schedule(self, time: float, site: int, vm_id: int) -> None:
        """Schedule the next billing boundary of a paid VM (a background event on the clock)."""
        ops = self.ops
        ops.clock.background += 1
        ops.schedule(time, PRIO_BILLING, EV_BILLING, site, vm_id)

    def boundary(self, site: int, vm_id: int) -> None:
        """A paid VM reached the end of a billing increment: pay the next one or release it."""
        ops = self.ops
        ops.clock.background -= 1
        backend = ops.cloud_backend(site)
        vm = backend.vms.get(vm_id)
        if vm is None or vm.state not in (VmState.BOOTING, VmState.READY):
            return  # released meanwhile
        price = backend.price_of(vm)
        now = ops.clock.now
        ledger = ops.ledger
        if self.budget is None or self.spent + price <= self.budget + 1e-9:
            cap = ledger.pay_boundary(site, vm_id, price, now, backend.site.billing_increment)
            if cap is None:
                self.spent += price
                if (
                    self.budget is None
                    and ledger.per_user
                    and not ledger.bills(site, ledger.vm_user.get((site, vm_id), ""))
                ):
                    ledger.unbilled.add((site, vm_id))  # no cap covers its user: not followed
                else:
                    self.schedule(now + backend.site.billing_increment, site, vm_id)
                return
            cap.released_vms += 1
            who = f" for {u}" if (u := ledger.vm_user.get((site, vm_id), "")) and cap.users else ""
            why = f"its VM on {backend.name} was released: budget {cap.cap.name} cannot pay its next increment{who}"
        else:
            why = f"its VM on {backend.name} was released: the budget is spent"
        for entry in [e for e in backend.running.values() if any(v == vm_id for v, _ in e.alloc)]:
            ops.kill(entry, KillCause.BUDGET, requeue=True)
            ops.why_not[entry.job.id] = Status(StatusCode.OVER_BUDGET, why, "budget")
        ledger.released(site, vm_id)
        if vm.state is VmState.BOOTING:
            backend.booting -= 1
            vm.state = VmState.READY  # release() expects a ready VM; it never became usable
            backend.online += vm.cores
            backend.free += vm.cores
        backend.release((vm_id,), now)
        ops.log.append(now, _VM_RELEASE, -1, site, vm_id, 0.0, -1, ops.log.policy_index("budget"))
        ops.changed()

    def lease_churn(self, count: int, policy: str) -> None:
        """Count `count` VMs leased now; ValueError once the VMs leased at this one instant pass
        ten times what the clouds hold (and 100): VMs that boot and are released in no time (boot
        and idle release times of 0) let a provisioning policy lease and release them forever
        while the clock stands still."""
        now = self.ops.clock.now
        if now != self._lease_instant:
            self._lease_instant, self._leases_now = now, 0
        self._leases_now += count
        if self._leases_now > self._lease_churn_limit:
            clouds = self.ops.clouds
            instant = [b.name for b in clouds if b.site.boot_time == 0 and b.site.idle_release_time == 0]
            why = f" (boot and idle release times of 0 on {', '.join(instant)})" if instant else ""
            raise ValueError(
                f"at time {now} {policy or 'a policy'} has leased {self._leases_now} VMs without the clock "
                f"moving on, as many released at once{why}: the simulation cannot advance; give the clouds "
                "a boot time or an idle release time above 0"
            )
