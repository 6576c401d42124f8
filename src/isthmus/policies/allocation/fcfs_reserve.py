"""FCFS with VM reservation: the dissertation's dynamic FCFS (Villegas dissertation §7.3.1)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import ClassVar

from isthmus.decisions import Decision
from isthmus.decisions.reserve import ReserveVms
from isthmus.decisions.start import start_job
from isthmus.policies.allocation.common import SingleSetPolicy
from isthmus.policies.api import View


class FcfsReserve(SingleSetPolicy):
    """Strict FCFS that reserves free VMs for the head job until there are enough to run it.

    Villegas dissertation §7.3.1: "FCFS always reserves any free VMs until there are enough to
    run the job at the head of the queue", so that "partially available resources [...] are not
    released due to being idle". Each round jobs start in arrival order while they fit (first
    fit over the sites, counting the VMs reserved for the job as its own and those reserved for
    others as taken). When the head does not fit, it holds (ReserveVms) every idle VM of the
    first cloud of its queue that can ever hold it, up to the VMs it needs; the provisioning
    policy cannot release them and no other job runs on them. The hold is kept until the job
    starts: a reservation is the engine's decision like a start, logged as RESERVE and shown by
    `why`.
    """

    name: ClassVar[str] = "fcfs-reserve"
    seed: ClassVar[str] = "Villegas dissertation §7.3.1 (dynamic FCFS with VM reservation)"

    def decide(self, view: View) -> Iterable[Decision]:
        """Start the head of the queue while it fits; reserve idle VMs for the first that does not."""
        order = view.stage_sites(0)
        sites = view.sites
        # free processors no one holds, counted down as jobs start this round
        free = [s.free - s.reserved for s in sites]
        out: list[Decision] = []
        for e in view.queue(0):
            job_id, size = e.job.id, e.job.size
            chosen = -1
            for i in order:
                s = sites[i]
                own = s.free_for(job_id) - (s.free - s.reserved) if s.reserved else 0
                if free[i] + own >= size:
                    chosen = i
                    free[i] -= size - own
                    break
            if chosen >= 0:
                out.append(start_job(job_id, chosen, None, self.name))
                continue
            for i in order:
                cloud = view.cloud(i)
                if cloud is None or cloud.site.max_processors < size:
                    continue
                out.append(ReserveVms(job_id, i, math.ceil(size / cloud.site.cores_per_node), by=self.name))
                break
            break
        return out
