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
    """A cluster site: `nodes × cores_per_node` processors, always present. Bags of tasks may
    hold its free processors."""

    holds_bags = True

    def __init__(self, index: int, site: Site, schedule: Schedule) -> None:
        super().__init__(index, site)
        self.online = self.free = site.nodes * site.cores_per_node
        self._at = schedule

    def start(self, entry: JobEntry, now: float) -> None:
        """Begin the run and schedule its end, unless its runtime limit (`entry.limit`, set by
        the engine before it starts the run) comes first: the kill at the limit then ends it,
        and its end would be a stale event."""
        self.free -= entry.job.size
        self._track_start(entry, now)
        job = entry.job
        end = now + job.runtime
        limit = entry.limit
        if limit is None or end <= now + limit:
            self._at(end, PRIO_END, EV_END, job.id, entry.run)

    def ends_by(self, entry: JobEntry, t: float) -> bool:
        """The run ends at its start plus the job's recorded runtime; at `t` itself its end
        (PRIO_END) comes before a limit (PRIO_LIMIT)."""
        return entry.started + entry.job.runtime <= t

    def stop(self, entry: JobEntry, now: float) -> None:
        self.free += entry.job.size
        self._track_stop(entry)

    def finished(self, entry: JobEntry, now: float) -> None:
        self.free += entry.job.size
        self._track_stop(entry)


class SimCloud(CloudBackend):
    """A cloud site whose VMs boot after `boot_time` and are gone `shutdown_time` after release.

    Runs that share a VM's processors (FCFS-NW) slow down as processes on a time-shared
    machine do: each processor's worth of run on a VM carrying `load` processors' worth on
    `cores` progresses at `cores / load` of full speed (egalitarian processor sharing), and a
    run spread over several VMs at the rate of its slowest VM. Whenever a VM's load changes,
    the remaining work of its runs is brought up to date and their ends are moved; the ends
    scheduled before are then stale (`end_due`).
    """

    def __init__(self, index: int, site: Site, schedule: Schedule) -> None:
        super().__init__(index, site)
        self._at = schedule
        # job id -> [work left at full speed, rate, since, end, slowed (0/1)] of runs that had company
        self._work: dict[int, list[float]] = {}

    def _rate(self, entry: JobEntry) -> float:
        rate = 1.0
        for vm_id, _ in entry.alloc:
            vm = self.vms[vm_id]
            if vm.load > vm.cores:
                rate = min(rate, vm.cores / vm.load)
        return rate

    def _runs_on(self, vm_ids: list[int]) -> list[JobEntry]:
        ids = set(vm_ids)
        return [e for e in self.running.values() if any(v in ids for v, _ in e.alloc)]

    def _loads_changing(self, vm_ids: list[int], now: float) -> None:
        """Bring the work left of the runs on `vm_ids` up to `now` at their current rates."""
        for e in self._runs_on(vm_ids):
            w = self._work.get(e.job.id)
            if w is None:  # at full speed since it started
                self._work[e.job.id] = [e.job.runtime - (now - e.started), 1.0, now, e.started + e.job.runtime, 0.0]
            else:
                w[0] -= (now - w[2]) * w[1]
                w[2] = now

    def _loads_changed(self, vm_ids: list[int], now: float) -> None:
        """Give the runs on `vm_ids` their new rates and move their ends."""
        for e in self._runs_on(vm_ids):
            rate = self._rate(e)
            w = self._work.get(e.job.id)
            if w is None:  # a run starting now
                if rate == 1.0:
                    continue
                w = self._work[e.job.id] = [e.job.runtime, 1.0, now, now + e.job.runtime, 0.0]
            if rate != w[1]:
                if rate < 1.0:
                    w[4] = 1.0
                w[1] = rate
                w[3] = now + max(0.0, w[0]) / rate
                self._at(w[3], PRIO_END, EV_END, e.job.id, e.run)

    def end_due(self, entry: JobEntry, now: float) -> bool:
        """False for an end scheduled before the run's rate changed."""
        w = self._work.get(entry.job.id)
        return w is None or now >= w[3] - 1e-9 * max(1.0, abs(w[3]))

    def full_speed_runtime(self, entry: JobEntry) -> float | None:
        """The job's runtime when its run was ever slowed by sharing; None when it never was."""
        w = self._work.get(entry.job.id)
        return entry.job.runtime if w is not None and w[4] else None

    def finished(self, entry: JobEntry, now: float) -> None:
        """The run ended: forget its progress."""
        if self._work:
            self._work.pop(entry.job.id, None)
        self._free_alloc(entry, now)

    def stop(self, entry: JobEntry, now: float) -> None:
        """Kill the run and forget its progress."""
        self._work.pop(entry.job.id, None)
        super().stop(entry, now)

    def _boot(self, vm: Vm, now: float) -> None:
        self._at(now + self.site.boot_time, PRIO_VM, EV_VM_READY, self.index, vm.id)

    def _shutdown(self, vm: Vm, now: float) -> None:
        self._at(now + self.site.shutdown_time, PRIO_VM, EV_VM_GONE, self.index, vm.id)

    def _launch(self, entry: JobEntry, now: float) -> None:
        self._at(now + entry.job.runtime, PRIO_END, EV_END, entry.job.id, entry.run)

    def _kill(self, entry: JobEntry, now: float) -> None:
        """Nothing to do: the pending completion event is stale once the run number moves on."""
