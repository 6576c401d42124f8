"""Simulated sites: a cluster that is always there and a cloud with boot delays.

They replay each job's recorded runtime: starting a run schedules its completion on the
simulated clock. Everything else (capacity, VMs, idle times) is the shared bookkeeping of
`isthmus.engine.backend`, the same code the live backends use.
"""

from __future__ import annotations

from isthmus.engine.backend import CloudBackend, SiteBackend, Vm
from isthmus.engine.clock import EV_END, EV_VM_GONE, EV_VM_READY, PRIO_END, PRIO_VM, Schedule
from isthmus.engine.state import JobEntry
from isthmus.model.site import Site


class SimCluster(SiteBackend):
    """A cluster site: `nodes × cores_per_node` processors, always present."""

    def __init__(self, index: int, site: Site, schedule: Schedule) -> None:
        super().__init__(index, site)
        self.online = self.free = site.nodes * site.cores_per_node
        self._at = schedule

    def start(self, entry: JobEntry, now: float) -> None:
        self.free -= entry.job.size
        self._track_start(entry, now)
        self._at(now + entry.job.runtime, PRIO_END, EV_END, entry.job.id, entry.run)

    def stop(self, entry: JobEntry, now: float) -> None:
        self.free += entry.job.size
        self._track_stop(entry)

    def finished(self, entry: JobEntry, now: float) -> None:
        self.free += entry.job.size
        self._track_stop(entry)


class SimCloud(CloudBackend):
    """A cloud site whose VMs boot after `boot_time` and are gone `shutdown_time` after release."""

    def __init__(self, index: int, site: Site, schedule: Schedule) -> None:
        super().__init__(index, site)
        self._at = schedule

    def _boot(self, vm: Vm, now: float) -> None:
        self._at(now + self.site.boot_time, PRIO_VM, EV_VM_READY, self.index, vm.id)

    def _shutdown(self, vm: Vm, now: float) -> None:
        self._at(now + self.site.shutdown_time, PRIO_VM, EV_VM_GONE, self.index, vm.id)

    def _launch(self, entry: JobEntry, now: float) -> None:
        self._at(now + entry.job.runtime, PRIO_END, EV_END, entry.job.id, entry.run)

    def _kill(self, entry: JobEntry, now: float) -> None:
        """Nothing to do: the pending completion event is stale once the run number moves on."""
