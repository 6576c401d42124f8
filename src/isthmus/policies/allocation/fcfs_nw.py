"""FCFS-NoWait (Villegas dissertation §6.3.2, Table 6.2)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.decisions.start import StartJob, start_job
from isthmus.policies.allocation.common import SingleSetPolicy, first_fit, free_processors
from isthmus.policies.api import View


class FcfsNoWait(SingleSetPolicy):
    """FCFS-NW: jobs in arrival order; a job that finds no free VM is not queued but shares
    busy VMs, round robin.

    Villegas dissertation §6.3.2: "FCFS-NoWait (FCFS-NW) is an extension to FCFS where jobs are
    not queued when no available VMs exist. Instead, this policy assigns jobs to VMs that are
    already running other jobs, round robin. This policy eliminates the wait time, but may
    introduce bottlenecks in the execution of jobs." Each round, in arrival order, a job starts
    on the first site with enough free processors; otherwise on the first cloud of its queue
    whose ready VMs have as many processors in all (StartJob with `share`: the engine takes the
    free processors first, then busy VMs round robin). A job waits only while no such cloud
    has VMs up (they are booting or not leased yet); then the jobs behind it wait too.

    How sharing is simulated (docs/simulation.md): runs on a VM carrying more processes than
    cores progress at cores/load of full speed, as on a time-shared machine; live, the
    processes really share the VM.
    """

    name: ClassVar[str] = "fcfs-nw"
    seed: ClassVar[str] = "Villegas dissertation §6.3.2, Table 6.2 (FCFS-NoWait)"

    def decide(self, view: View) -> Iterable[Decision]:
        """Start every queued job in order: on free processors, else sharing busy VMs."""
        order = view.stage_sites(0)
        sites = view.sites
        free = free_processors(view)
        out: list[Decision] = []
        for e in view.queue(0):
            size = e.job.size
            i = first_fit(free, order, size)
            if i >= 0:
                free[i] -= size
                out.append(start_job(e.job.id, i, None, self.name))
                continue
            shared = next((k for k in order if view.cloud(k) is not None and sites[k].online >= size), -1)
            if shared < 0:
                break
            free[shared] = max(0, free[shared] - size)
            out.append(StartJob(e.job.id, shared, by=self.name, share=True))
        return out
