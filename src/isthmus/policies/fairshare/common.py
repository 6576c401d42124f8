"""What the EquiPartition fair-share policies share: the split, the shrink schedule, the claims
of waiting rigid jobs (KOALA-CS thesis §3.1, §3.7).

Units are processors (a "node" of the seed is a processor of a site with one core per node).
A site's *idle* processors are those no job runs on; the processors bags hold count as idle to
the rigid jobs (§3.1: "resources usable by CS jobs are those ... not required by other, higher
priority, jobs, i.e., idle resources"), so the *load* that stops growth is that of the other
jobs: processors busy with them over the site's processors.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from isthmus.decisions import Decision
from isthmus.decisions.grow import GrowBag
from isthmus.decisions.hold_release import HoldBagRelease
from isthmus.decisions.shrink import ShrinkBag
from isthmus.model.job import Job
from isthmus.policies.api import BagInfo, CloudInfo, SlotInfo, View
from isthmus.policies.prediction.wait import earliest_fit_on


class FairShareParams(BaseModel):
    """Parameters of the EquiPartition policies."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_load: float = Field(
        0.8,
        gt=0,
        le=1,
        description="no growth where the load of other jobs is at or above this fraction (§3.7.1: 80%)",
    )
    rebalance: bool = Field(
        True,
        description="shrink bags above their equal share so that bags below it can grow (EquiPartition); "
        "false: only idle processors are divided",
    )
    prefer_between_tasks: bool = Field(
        False, description="preempt processors between two tasks first (else the seed's random choice, §3.7.2)"
    )
    seed: int = Field(0, description="seed of the random choice of the processors to preempt")
    blocking: bool | None = Field(
        None,
        description="the allocation starts jobs strictly in queue order: no job past the first one that could not "
        "start even with the bags' processors claims any (default: when the allocation policy is strict, e.g. "
        "fcfs or tags-chain)",
    )
    reservation: bool | None = Field(
        None,
        description="the allocation is EASY backfilling: a job past the first one that could not start even "
        "with the bags' processors claims only where EASY would start it once the processors are back (it ends "
        "by that job's shadow time, or fits in the processors left over then) (default: when the allocation "
        "policy is easy)",
    )

    @model_validator(mode="after")
    def _one_walk(self) -> FairShareParams:
        if self.blocking and self.reservation:
            raise ValueError("blocking and reservation exclude each other: choose the allocation's walk")
        return self

    def walk(self, order: str) -> tuple[bool, bool]:
        """(blocking, reservation) for an allocation policy starting jobs in `order`
        (`View.allocation_order`): each as set, else as the allocation starts jobs; one set true
        turns the other off. A walk unlike the allocation's lets bags shrink for jobs the
        allocation will not start, which may then wait more than the preemption time."""
        if self.blocking:
            return True, False
        if self.reservation:
            return False, True
        blocking = order == "strict" if self.blocking is None else False
        reservation = order == "easy" if self.reservation is None else False
        return blocking, reservation


def equipartition(pool: int, wants: Sequence[int], order: Sequence[int]) -> list[int]:
    """Split `pool` processors among claimants that can use at most `wants[i]` each: every
    claimant gets min(want, level), the processors left over by the level go one each to the
    claimants first in `order` (indices). Shares of claimants that get less than they want
    differ by at most one; the shares sum to min(pool, sum(wants))."""
    shares = [0] * len(wants)
    active = [i for i in order if wants[i] > 0]
    left = max(0, pool)
    while active and left > 0:
        per = left // len(active)
        if per == 0:
            for i in active[:left]:
                shares[i] += 1
            break
        still = []
        for i in active:
            give = min(per, wants[i] - shares[i])
            shares[i] += give
            left -= give
            if shares[i] < wants[i]:
                still.append(i)
        active = still
    return shares


def level_up(
    units: int, current: Sequence[int], caps: Sequence[int], ties: Sequence[tuple[int, ...]] | None = None
) -> list[int]:
    """Give `units` processors to claimants holding `current`, the lowest first (water filling),
    none beyond `caps[i]`; returns what each gets (ties: the smallest `ties` key first, without
    keys the lower index first)."""
    got = [0] * len(current)
    level = list(current)
    while units > 0:
        open_ = [i for i in range(len(level)) if level[i] < caps[i]]
        if not open_:
            break
        low = min(level[i] for i in open_)
        if ties is not None:
            open_.sort(key=lambda i: ties[i])
        for i in open_:
            if level[i] == low and units > 0:
                level[i] += 1
                got[i] += 1
                units -= 1
    return got


def take_evenly(need: int, holdings: Sequence[int], ties: Sequence[tuple[int, ...]] | None = None) -> list[int]:
    """Take `need` processors from holders of `holdings`, the largest first so that each gives an
    equal amount where they hold alike (§3.7.1: "orders each to shrink an equal amount"); returns
    what each gives (ties: the largest `ties` key first, without keys the later index, the later
    arrival), never more than it holds."""
    took = [0] * len(holdings)
    level = list(holdings)
    order = list(range(len(level) - 1, -1, -1))
    if ties is not None:
        order.sort(key=lambda i: ties[i], reverse=True)
    while need > 0:
        high = max(level, default=0)
        if high <= 0:
            break
        for i in order:
            if level[i] == high and need > 0:
                level[i] -= 1
                took[i] += 1
                need -= 1
    return took


def tie_keys(held: Sequence[dict[int, int]], bags: Sequence[BagInfo], site: int) -> list[tuple[int, int, int]]:
    """How ties between bags holding alike on `site` are broken: (processors held on the other
    sites, tasks done, arrival index); the smallest key gets an odd processor first and the
    largest gives one back first. Breaking ties by arrival alone gave the first bag every odd
    processor on every site for good, which on small sites made SEP unfair."""
    return [(sum(h.values()) - h[site], b.done, k) for k, (h, b) in enumerate(zip(held, bags, strict=True))]


def shrink_schedule(slots: Sequence[SlotInfo], count: int, rng: random.Random, prefer_between: bool) -> tuple[int, ...]:
    """The processors to preempt (the Launcher Preemption Policy, KOALA-CS thesis §3.7.2): `count`
    of `slots` chosen at random with `rng` (the seed's LPP), or with `prefer_between` the ones
    between two tasks first (no work is lost on them), then at random among the others. All of
    them when `count` is at least their number."""
    if count >= len(slots):
        return tuple(s.id for s in slots)
    if not prefer_between:
        return tuple(s.id for s in rng.sample(list(slots), count))
    between = [s for s in slots if s.task < 0]
    if len(between) >= count:
        return tuple(s.id for s in rng.sample(between, count))
    busy = [s for s in slots if s.task >= 0]
    return tuple(s.id for s in between) + tuple(s.id for s in rng.sample(busy, count - len(between)))


@dataclass
class SiteRoom:
    """One round's picture of a site that may hold bags: processors free and not claimed by a
    waiting rigid job (`growable`), free or being preempted and not claimed (`room`), processors
    bags must give back for waiting rigid jobs (`need`), and the load of the other jobs."""

    growable: int
    room: int
    need: int
    load: float
    #: (rigid job id, processors bags must give back for it), in queue order
    claims: tuple[tuple[int, int], ...] = ()
    #: on a cloud whose VMs are not interchangeable: claiming job id -> the VMs it may run on
    #: (bags give back launchers there); a claim not named here may take any
    claim_vms: Mapping[int, frozenset[int]] = field(default_factory=dict)
    #: on such a cloud: the VMs a job starting this round may run on; bags grow elsewhere
    keep: tuple[int, ...] = ()
    #: rigid jobs that count on processors bags give back for no job (to hold for them), in queue order
    holds: tuple[int, ...] = ()


def _launchers_on_vms(view: View, site: int) -> dict[int, int]:
    """VM id -> launchers of bags on it, not being preempted, on cloud `site`."""
    count: dict[int, int] = {}
    for bag in view.bags.active:
        for slot in bag.slots(site):
            count[slot.vm] = count.get(slot.vm, 0) + 1
    return count


def _job_room(cloud: CloudInfo, job: Job, launchers: Mapping[int, int]) -> tuple[int, int, int, frozenset[int]]:
    """On a cloud whose VMs are not interchangeable (several types or images, VMs serving one
    user, retiring VMs) or for a job with VM requirements: on the ready VMs that may take `job`
    (`vm_accepts`, not reserved for another job), the cores free, being preempted and held by
    launchers of bags (not being preempted), and those VMs."""
    free = leaving = held = 0
    vms = []
    for vm in cloud.vms():
        if vm.ready and vm.reserved_for in (-1, job.id) and cloud.vm_accepts(vm, job):
            on = launchers.get(vm.id, 0)
            free += vm.free
            held += on
            leaving += vm.bagged - on
            vms.append(vm.id)
    return free, leaving, held, frozenset(vms)


def site_rooms(
    view: View, sites: Sequence[int], blocking: bool = False, reservation: bool = False
) -> dict[int, SiteRoom]:
    """Walk the waiting rigid jobs in queue order (queue 0 first) and claim processors for each,
    as the allocation policy would start them: on the first of their sites where they fit on the
    processors free now (the allocation, deciding after this policy, starts them this round),
    else on the first where they fit on those free or being preempted (the free ones there
    first). A job that fits nowhere, but would on a site if bags gave back processors
    there, claims that site (the one needing the fewest back; §3.1.3: "it determines how many
    nodes must be freed on that cluster"): bags shrink there. A job that fits nowhere even then
    claims nothing: bags may use the processors until it could start; with `blocking` (strict
    FCFS allocation) neither does any job after it, nor any job after one that does not start
    this round (it waits for processors being preempted, or bags shrink for it) and counts on
    processors not held for it (free now, or being preempted for another job): strict FCFS
    starts the later job only after it, which may lose them and need a shrink of its own (the
    job bags shrank for would then wait past the preemption time); with `reservation` (EASY allocation) the
    first such job (queue 0) gets EASY's reservation, computed as EASY will once the processors
    claimed before it are back (the bags' preemption time from now, `BagsInfo.preemption_time`),
    and a job after it claims only on the sites where EASY would then start it: not the
    reservation's site, unless it ends by the shadow time when started then or fits in the
    processors left over at it (each job placed before ending its estimated runtime after it
    starts: now, when the processors being preempted it counts on are back, `BagsInfo.coming_by`,
    or the preemption time from now for a claim); a head that may start by then (its shadow time
    comes by the preemption time) is started where it fits first on the processors free now as
    jobs end, and the claim must pass the next head's reservation too; bags do not grow on the
    free processors of a reservation's site beyond those left over at its shadow time once the
    jobs after the head counting on them are served. On a cloud, free cores of VMs reserved for a
    queued job or retiring are not growable (a bag may not take them). On a cloud whose VMs are
    not interchangeable (`selective`) or for a job with VM requirements, a job counts only the
    cores of the VMs it may run on (`vm_accepts`): its claim names them (`SiteRoom.claim_vms`:
    the launchers preempted are there), and when it fits now they are kept from the bags'
    growth this round (`SiteRoom.keep`).

    Processors the engine holds for a waiting job (free ones, `View.holds`, and those being
    preempted for it, `BagsInfo.leaving_for`) count for that job alone, first. A job the walk
    starts this round on another site lets them go for the jobs after it as being freed, not as
    free now (the allocation places this round's jobs on the processors free when it decides);
    a job that does not start this round keeps them (it may still start on them)."""
    bags = view.bags
    now = view.now
    avail = {}
    free = {}
    release = {}
    holds = view.holds() if view.holding else None
    for i, s in enumerate(view.sites):
        if s.available(now):
            avail[i] = s.free + bags.leaving(i)
            free[i] = s.free
            release[i] = bags.held(i) - bags.leaving(i)
            if holds is not None and s.reserved and i in bags.sites:
                free[i] -= s.reserved
                avail[i] -= s.reserved
            if holds is not None:
                avail[i] -= bags.leaving_for(i, -1)
    watched = set(sites)
    need = dict.fromkeys(sites, 0)
    claims: dict[int, list[tuple[int, int]]] = {i: [] for i in sites}
    claim_vms: dict[int, dict[int, frozenset[int]]] = {i: {} for i in sites}
    clouds = {i: c for i in avail if (c := view.cloud(i)) is not None}
    picky = {i for i, c in clouds.items() if c.selective}
    launchers: dict[int, dict[int, int]] = {}
    # per cloud, the VMs that jobs not every VM may take, fitting now, may start on (the
    # allocation deciding after this policy): no launcher goes there this round
    keep: dict[int, set[int]] = {}
    holding: dict[int, list[int]] = {i: [] for i in sites}
    # processors being preempted for no waiting job, per cluster site (what such a hold takes)
    spare = {i: bags.leaving(i) - bags.leaving_for(i, -1) for i in sites if i in avail and view.cloud(i) is None}
    easy = _EasyWalk(view, now + bags.preemption_time, need) if reservation else None
    for stage in range(view.stages):
        every = [i for i in view.stage_sites(stage) if i in avail]
        # with `blocking`: some job of this queue ahead does not start this round (`waiting`),
        # and one of those counts on processors not held for it (`uncovered`)
        waiting = uncovered = False
        for entry in view.queue(stage):
            if not any(avail[i] for i in watched if i in avail) and not any(
                release[i] for i in watched if i in release
            ):
                break
            size = entry.job.size
            # what this job may use where not every VM may take it: its own free, being
            # preempted and bag-held cores (on the VMs it may run on), within the site's
            free_j, avail_j, release_j = free, avail, release
            vms_j: dict[int, frozenset[int]] = {}
            fussy = [i for i in every if i in clouds and (i in picky or entry.job.vm is not None)]
            if fussy:
                free_j, avail_j, release_j = dict(free), dict(avail), dict(release)
                for i in fussy:
                    if i not in launchers:
                        launchers[i] = _launchers_on_vms(view, i)
                    jf, jl, jh, vms_j[i] = _job_room(clouds[i], entry.job, launchers[i])
                    free_j[i] = min(free[i], jf)
                    avail_j[i] = min(avail[i], jf + jl)
                    release_j[i] = min(release.get(i, 0), jh)
            own: dict[int, int] = {}
            held: dict[int, int] = {}
            if holds is not None:  # processors held for this job: free, and free or being preempted
                held = {i: holds.get(entry.job.id, {}).get(i, 0) for i in every}
                own = {i: held[i] + bags.leaving_for(i, entry.job.id) for i in every}
            choices = every
            start = now
            while True:
                move = _move(choices, size, free_j, avail_j, release_j, held, own)
                if move is None or easy is None:
                    break
                start = easy.start_of(move, entry.job.id, free)
                if easy.allows(move, start, entry.estimated_runtime, size):
                    break
                choices = [i for i in choices if i != move[1]]  # EASY would not start it there
            if move is None:
                if blocking:
                    break
                if easy is not None and stage == 0:
                    easy.reserve(every, size, entry.estimated_runtime)
                continue
            how, site, n = move
            if blocking and how == "claim" and uncovered:
                # a job ahead that does not start this round counts on processors not held for
                # it: strict FCFS starts this one after it, which may need a shrink of its own
                break
            if easy is not None:
                easy.place(site, start, start + entry.estimated_runtime, size)
            if how == "claim":
                avail[site] = 0
                free[site] = 0
                release[site] -= n
                need[site] += n
                claims[site].append((entry.job.id, n))
                if site in vms_j:
                    claim_vms[site][entry.job.id] = vms_j[site]
                waiting = True
                continue
            if how in ("fit", "later") and site in vms_j:
                keep.setdefault(site, set()).update(vms_j[site])
            covered = how in ("own", "own-later") and n == 0
            if how in ("later", "own-later") and n > free[site] and spare.get(site, 0) > 0:
                # it counts on processors being preempted for no job: held for it as they come
                # (no shrink names it)
                holding[site].append(entry.job.id)
                covered = spare[site] >= n - free[site]
                spare[site] -= min(spare[site], n - free[site])
            if blocking and (waiting or how in ("later", "own-later")):
                waiting = True
                uncovered = uncovered or not covered
            avail[site] -= n
            free[site] -= min(free[site], n)
            if how == "own" and not (blocking and waiting):
                # starting there this round ends its holds elsewhere: for all then, after this
                # round (the allocation places this round's jobs on what is free now)
                for i in every:
                    if i != site and own[i]:
                        avail[i] += own[i]
    rooms = {}
    keep_free = easy.spare() if easy is not None else {}
    for i in sites:
        s = view.sites[i]
        if i not in avail:
            rooms[i] = SiteRoom(0, 0, 0, 1.0)
            continue
        other = s.online - s.free - bags.held(i)
        load = other / s.online if s.online else 1.0
        growable = min(free[i], avail[i], keep_free.get(i, free[i]))
        cloud = view.cloud(i)
        kept = keep.get(i, ())
        if cloud is not None and growable > 0:  # free cores of VMs no bag may take: left out
            usable = sum(
                v.free for v in cloud.vms() if v.ready and not v.retiring and v.reserved_for < 0 and v.id not in kept
            )
            growable = min(growable, usable)
        rooms[i] = SiteRoom(
            growable,
            avail[i],
            need[i],
            load,
            tuple(claims[i]),
            claim_vms=claim_vms[i],
            keep=tuple(sorted(kept)),
            holds=tuple(holding.get(i, ())),
        )
    return rooms


def _move(
    choices: Sequence[int],
    size: int,
    free: Mapping[int, int],
    avail: Mapping[int, int],
    release: Mapping[int, int],
    held: Mapping[int, int],
    own: Mapping[int, int],
) -> tuple[str, int, int] | None:
    """Where the walk puts a job of `size` among `choices` (see `site_rooms`): ("own", site, n)
    on the processors held for it there and n more free ones, ("fit", site, n) on n free ones,
    ("own-later", site, n) and ("later", site, n) the same with processors being preempted,
    ("claim", site, n) with n processors the bags give back there, or None."""
    if own and any(own[i] for i in choices):
        fit = next((i for i in choices if free[i] + held[i] >= size), None)
        if fit is not None:
            return ("own", fit, max(0, size - held[fit]))
        fit = next((i for i in choices if avail[i] + own[i] >= size), None)
        if fit is not None:
            return ("own-later", fit, max(0, size - own[fit]))
        size_left = {i: size - own[i] for i in choices}
    else:
        fit = next((i for i in choices if free[i] >= size), None)
        if fit is not None:
            return ("fit", fit, size)
        fit = next((i for i in choices if avail[i] >= size), None)
        if fit is not None:
            return ("later", fit, size)
        size_left = dict.fromkeys(choices, size)
    best = None
    for i in choices:
        missing = size_left[i] - avail[i]
        if release.get(i, 0) >= missing and (best is None or missing < size_left[best] - avail[best]):
            best = i
    return None if best is None else ("claim", best, size_left[best] - avail[best])


class _Waits(NamedTuple):
    """A job the walk cannot start even with the bags' processors (an EASY head, or behind one)."""

    size: int
    sites: list[int]
    runtime: float


class _Runs(NamedTuple):
    """A job the walk starts or claims for: when it starts, its estimated end, size and site."""

    start: float
    end: float
    size: int
    site: int


class _EasyWalk:
    """The walk's picture of EASY backfilling (`site_rooms` with `reservation`) as EASY will see
    it at `ready` (once the processors claimed now are back): the jobs it starts in order before
    the first one that cannot start (the head), then the head's reservation, recomputed for each
    claim after it (the processors bags give back count as free for the head, as EASY counts
    held ones), and the jobs after the head (backfilled) checked against it in queue order. A
    head whose reservation comes by `ready` may have started by then (its processors free up
    before the claimed ones come): the next job that cannot start is then EASY's head, so a
    claim must pass that head's reservation too (with the first head started at its shadow
    time), and so on while the heads' shadow times come by `ready`."""

    def __init__(self, view: View, ready: float, shrunk: dict[int, int]) -> None:
        self.view = view
        self.ready = ready
        #: processors this round's shrinks give back per site (the walk's `need`, shared)
        self.shrunk = shrunk
        #: per site, the jobs started in order before the head: (estimated end, size)
        self.placed: dict[int, list[tuple[float, int]]] = {}
        #: from the head on, in queue order: the jobs that cannot start and those the walk
        #: starts or claims for
        self.after: list[_Waits | _Runs] = []

    def reserve(self, sites: list[int], size: int, runtime: float) -> None:
        """A job of `size` (estimated `runtime`) cannot start even with the bags' processors."""
        self.after.append(_Waits(size, sites, runtime))

    def start_of(self, move: tuple[str, int, int], job_id: int, free: Mapping[int, int]) -> float:
        """When the job of this move starts: now on free processors, at `ready` on those a shrink
        gives back, when the processors being preempted it counts on are back
        (`BagsInfo.coming_by`; its own, and with `free` too few those for no job)."""
        how, site, n = move
        now = self.view.now
        if how == "claim":
            return self.ready
        if how not in ("later", "own-later"):
            return now
        bags = self.view.bags
        by = bags.coming_by(site, job_id) if how == "own-later" else -math.inf
        if n > free[site]:
            by = max(by, bags.coming_by(site, -1))
        return min(self.ready, max(now, by))

    def place(self, site: int, start: float, end: float, size: int) -> None:
        """The walk starts or claims for a job of `size` on `site`, ending at `end` (estimated)."""
        if not self.after:
            self.placed.setdefault(site, []).append((end, size))
        else:
            self.after.append(_Runs(start, end, size, site))

    def allows(self, move: tuple[str, int, int], start: float, runtime: float, size: int) -> bool:
        """Whether EASY would start the job of this move then (always before the head): with the
        move's shrink the head's reservation is recomputed, and each job after the head on the
        reservation's site that does not end by the shadow time must fit in what is left over;
        while the head's shadow time comes by `ready`, the same against the next head. A job
        starting before `ready` (on processors being preempted) is checked as EASY sees it then,
        without this round's shrinks."""
        if not self.after:
            return True
        how, site, n = move
        shrunk = dict(self.shrunk)
        if how == "claim":
            shrunk[site] = shrunk.get(site, 0) + n
        pending = [*self.after, _Runs(start, start + runtime, size, site)]
        if start < self.ready:
            return self.left_over({}, pending, start) is not None
        return self.left_over(shrunk, pending, self.ready) is not None

    def left_over(self, shrunk: Mapping[int, int], pending: list[_Waits | _Runs], at: float) -> dict[int, int] | None:
        """EASY's picture at `at` with `pending` after the jobs placed before the head: None if a job
        after a head does not pass its reservation, else per reservation site on which a job
        after the head counts on the processors left over at the shadow time, how many are
        still left over (bags growing there on free processors would take them)."""
        placed = {i: list(jobs) for i, jobs in self.placed.items()}
        spare: dict[int, int] = {}
        while True:
            h = next((k for k, e in enumerate(pending) if isinstance(e, _Waits)), None)
            if h is None:
                return spare
            for e in pending[:h]:  # started before this head
                assert isinstance(e, _Runs)
                placed.setdefault(e.site, []).append((e.end, e.size))
            head = pending[h]
            assert isinstance(head, _Waits)
            res_site, res_time, extra = self.reservation(shrunk, head.size, head.sites, placed, at)
            counted = False
            for e in pending[h + 1 :]:
                if isinstance(e, _Runs) and e.site == res_site and e.end > res_time:
                    if e.size > extra:
                        return None
                    extra -= e.size
                    counted = True
            if counted:
                spare[res_site] = min(spare.get(res_site, extra), extra)
            if res_time > at:
                return spare
            # the head may start by `ready`: EASY's head is then the next job that cannot start
            site, start = self.start(head, placed)
            if start >= res_time:
                site, start = res_site, res_time
            placed.setdefault(site, []).append((start + head.runtime, head.size))
            pending = pending[h + 1 :]

    def start(self, head: _Waits, placed: Mapping[int, list[tuple[float, int]]]) -> tuple[int, float]:
        """Where and when `head` may start from now on the processors free now and not held (the
        jobs `placed` taking theirs), as the running jobs end: before `ready` it starts there,
        not at its reservation as EASY sees it at `ready`."""
        view = self.view
        best = (-1, math.inf)
        for i in head.sites:
            s = view.sites[i]
            jobs = placed.get(i, [])
            free = s.free - s.reserved - sum(n for _, n in jobs)
            t, _ = earliest_fit_on(s, free, view.now, head.size, jobs)
            if t < best[1]:
                best = (i, t)
        return best

    def spare(self) -> dict[int, int]:
        """Per site, how many free processors bags may grow on without taking those a job after
        EASY's head counts on (sites not named: no limit)."""
        spare: dict[int, int] = {}
        if not self.after:
            return spare
        times = {e.start for e in self.after if isinstance(e, _Runs) and e.start < self.ready}
        for at in [self.ready, *sorted(times)]:
            for i, n in (self.left_over(self.shrunk if at == self.ready else {}, self.after, at) or {}).items():
                spare[i] = min(spare.get(i, n), n)
        return spare

    def reservation(
        self,
        shrunk: Mapping[int, int],
        size: int,
        sites: list[int],
        placed: Mapping[int, list[tuple[float, int]]],
        at: float,
    ) -> tuple[int, float, int]:
        """EASY's reservation for a head of `size` on `sites`: on each site the free processors
        (those held for waiting jobs included, as EASY counts them for its head) and those being
        preempted, now or by this round's shrinks (`shrunk`), less those of the jobs started
        before it (`placed`, free again at their ends); the site where it fits earliest, its
        shadow time and the processors left over then."""
        view = self.view
        bags = view.bags
        best = (-1, math.inf, 0)
        for i in sites:
            s = view.sites[i]
            jobs = placed.get(i, [])
            free = s.free + bags.leaving(i) + shrunk.get(i, 0) - sum(n for _, n in jobs)
            t, extra = earliest_fit_on(s, free, at, size, jobs)
            if t < best[1]:
                best = (i, t, extra)
        return best


class EquiPartitionBase:
    """The round of both EquiPartition policies: shrink bags for waiting rigid jobs, then divide
    the idle processors (`share`, per grid or per site)."""

    name = ""
    Params = FairShareParams
    #: what it splits: idle processors among bags of tasks
    shares: ClassVar[Literal["bags", "vms"]] = "bags"

    def __init__(self, params: FairShareParams | None = None) -> None:
        self.params = params or FairShareParams()
        self._rng = random.Random(self.params.seed)
        #: processors chosen for preemption in the current round
        self._taken: set[int] = set()
        #: per cloud, the VMs the current round's growth leaves alone (`SiteRoom.keep`)
        self._keep: dict[int, tuple[int, ...]] = {}

    def decide(self, view: View) -> Iterable[Decision]:
        """Shrinks for waiting rigid jobs (site-based, an equal amount from each bag there), then
        growth (and rebalancing shrinks) by the policy's equal split."""
        active = list(view.bags.active)
        if not active:
            return []
        sites = [i for i in view.bags.sites if view.sites[i].available(view.now)]
        rooms = site_rooms(view, sites, *self.params.walk(view.allocation_order))
        self._keep = {i: rooms[i].keep for i in sites if rooms[i].keep}
        held = [{i: b.held(i) for i in sites} for b in active]
        self._taken = set()
        out: list[Decision] = [HoldBagRelease(job_id, i, by=self.name) for i in sites for job_id in rooms[i].holds]
        for i in sites:
            for job_id, need in rooms[i].claims:
                vms = rooms[i].claim_vms.get(job_id)
                # on a cloud whose VMs are not interchangeable, what each bag holds on the VMs the job may use
                there = [
                    held[k][i] if vms is None else len([s for s in self._left(b, i) if s.vm in vms])
                    for k, b in enumerate(active)
                ]
                holders = [k for k in range(len(active)) if there[k] > 0]
                keys = tie_keys(held, active, i)
                amounts = take_evenly(need, [there[k] for k in holders], [keys[k] for k in holders])
                for k, n in zip(holders, amounts, strict=True):
                    if n:
                        out.append(self.shrink(active[k], i, n, job_id, vms))
                        held[k][i] -= n
        out.extend(self.share(view, active, sites, rooms, held))
        return out

    def share(
        self,
        view: View,
        active: list[BagInfo],
        sites: list[int],
        rooms: dict[int, SiteRoom],
        held: list[dict[int, int]],
    ) -> list[Decision]:
        """Growth and rebalancing shrinks; `held[k][site]` is what bag k holds after this round's
        shrinks so far (updated here)."""
        raise NotImplementedError

    def _left(self, bag: BagInfo, site: int) -> list[SlotInfo]:
        """The processors of `bag` on `site` no shrink of this round has chosen yet."""
        return [s for s in bag.slots(site) if s.id not in self._taken]

    def shrink(
        self, bag: BagInfo, site: int, count: int, for_job: int = -1, vms: frozenset[int] | None = None
    ) -> ShrinkBag:
        """A shrink of `count` processors of `bag` on `site` (for rigid job `for_job`, -1: to
        rebalance), the processors chosen by the shrink schedule; with `vms`, among those on
        these VMs of a cloud (the ones the job may run on)."""
        slots = self._left(bag, site)
        if vms is not None:
            slots = [s for s in slots if s.vm in vms]
        chosen = shrink_schedule(slots, count, self._rng, self.params.prefer_between_tasks)
        self._taken.update(chosen)
        return ShrinkBag(bag.id, site, chosen, by=self.name, for_job=for_job)

    def grow(self, bag: BagInfo, site: int, count: int) -> GrowBag:
        """A growth of `bag` by `count` processors of `site`."""
        return GrowBag(bag.id, site, count, by=self.name, avoid=self._keep.get(site, ()))

    def split(
        self,
        pool: int,
        current: list[int],
        wants: list[int],
        units: int,
        ties: Sequence[tuple[int, ...]] | None = None,
    ) -> tuple[list[int], list[int]]:
        """Equal targets of `pool` for holders of `current` wanting at most `wants`; returns (growth
        from the `units` idle processors, lowest first; shrink of the holders above their target
        as far as others stay below theirs after the growth, when rebalancing)."""
        order = sorted(range(len(current)), key=lambda k: (-current[k], *(ties[k] if ties else ()), k))
        targets = equipartition(pool, wants, order)
        grow = level_up(units, current, targets, ties)
        shrink = [0] * len(current)
        if self.params.rebalance:
            short = sum(max(0, t - c - g) for t, c, g in zip(targets, current, grow, strict=True))
            excess = [max(0, c - t) for c, t in zip(current, targets, strict=True)]
            if short and any(excess):
                shrink = take_evenly(min(short, sum(excess)), excess, ties)
        return grow, shrink
