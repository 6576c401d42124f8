"""What an agent sees of the engine's read-only view, as arrays: the first queued jobs (the
queue's visible slots) and the sites.

The environment (`isthmus.gym.env`) and the trained-agent policy (`isthmus.gym.policy`) both
build their observations here, from the same view the other policies read, so an agent sees in
`isthmus simulate` and in the live manager exactly what it saw in training. Nothing here imports
Gymnasium.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from isthmus.policies.allocation.common import Placer, first_fit
from isthmus.policies.api import JobInfo, View

#: Columns of a queue slot: present (1: a job fills the slot), fits (it can start now on a site of
#: the queue), size (processors / the queue's largest site), runtime (log10(1 + seconds) / 6, at most 2),
#: waited (log10(1 + seconds queued) / 6).
SLOT_FEATURES = ("present", "fits", "size", "runtime", "waited")
#: Columns of a site: free, busy and online processors, each over the site's most processors.
SITE_FEATURES = ("free", "busy", "online")
#: What the runtime column reads: the estimate a live system has (the requested runtime, else the
#: runtime predictor's) or the real runtime (simulation only, as `sjf-ideal`).
RuntimeSource = Literal["estimate", "runtime"]

_LOG_SCALE = 6.0  # log10 of a million seconds: about 11.6 days maps to 1


def _log_scaled(seconds: float) -> float:
    if math.isnan(seconds) or seconds <= 0:
        return 0.0
    return min(math.log10(1.0 + seconds) / _LOG_SCALE, 2.0)


@dataclass
class Slots:
    """The visible part of the queue at one decision point: the entries in the slots (queue
    order), their feature rows, and the site each would start on now (-1: it does not fit)."""

    entries: list[JobInfo]
    features: NDArray[np.float32]
    sites: list[int]

    def mask(self) -> NDArray[np.int8]:
        """Which actions are possible: one per slot (its job fits now), then wait (always 1)."""
        fits = [1 if s >= 0 else 0 for s in self.sites]
        fits += [0] * (self.features.shape[0] - len(fits))
        return np.array([*fits, 1], dtype=np.int8)


def queue_sites(view: View) -> Sequence[int]:
    """The sites the agent's single queue may use, in first-fit order."""
    return view.stage_sites(0)


def fit_site(view: View, free: list[int], order: Sequence[int], entry: JobInfo) -> int:
    """The first site of `order` where `entry`'s job fits on the `free` processors now (VM
    matching respected on clouds), or -1."""
    if view.vm_matching:
        return Placer(view).first_fit(free, order, entry.job)
    return first_fit(free, order, entry.job.size)


def runtime_of(entry: JobInfo, source: RuntimeSource) -> float:
    """The runtime column's seconds for `entry`: its estimate or its real runtime."""
    return entry.job.runtime if source == "runtime" else entry.estimated_runtime


def observe_slots(
    view: View,
    entries: Sequence[JobInfo],
    free: list[int],
    slots: int,
    source: RuntimeSource,
) -> Slots:
    """The feature rows of the first `slots` of `entries` (queued jobs in queue order) given the
    `free` processors per site (a scratch copy the caller may have counted down)."""
    order = queue_sites(view)
    largest = max((view.sites[i].site.max_processors for i in order), default=1) or 1
    now = view.now
    rows = np.zeros((slots, len(SLOT_FEATURES)), dtype=np.float32)
    shown: list[JobInfo] = []
    sites: list[int] = []
    for k, entry in enumerate(entries):
        if k >= slots:
            break
        site = fit_site(view, free, order, entry)
        rows[k] = (
            1.0,
            1.0 if site >= 0 else 0.0,
            min(entry.job.size / largest, 1.0),
            _log_scaled(runtime_of(entry, source)),
            _log_scaled(now - entry.queued_at),
        )
        shown.append(entry)
        sites.append(site)
    return Slots(shown, rows, sites)


def observe_sites(view: View, free: list[int], sites: int) -> NDArray[np.float32]:
    """One row per site (up to `sites`, zero rows after the last): free, busy and online
    processors over the site's most processors, with `free` as the caller counts it."""
    rows = np.zeros((sites, len(SITE_FEATURES)), dtype=np.float32)
    for i, info in enumerate(view.sites):
        if i >= sites:
            break
        most = info.site.max_processors or 1
        rows[i] = (
            min(max(free[i], 0) / most, 1.0),
            min(info.busy / most, 1.0),
            min(info.online / most, 1.0),
        )
    return rows


def queue_fill(queued: int, slots: int) -> float:
    """How full the queue is, as `queued` jobs over the visible slots, at most 4 (a long queue)."""
    return min(queued / max(slots, 1), 4.0)


#: Columns of the global row: `queue_fill` and the free fraction of all processors.
GLOBAL_FEATURES = ("queue", "free")


def observe(
    view: View,
    entries: Sequence[JobInfo],
    free: list[int],
    *,
    slots: int,
    sites: int,
    source: RuntimeSource,
) -> tuple[dict[str, NDArray[np.float32]], Slots]:
    """The observation at a decision point (``queue``: one row a slot, ``sites``: one row a site,
    ``globals``: `GLOBAL_FEATURES`) and the slots it shows, for the queued `entries` (queue order)
    and the `free` processors per site."""
    shown = observe_slots(view, entries, free, slots, source)
    most = sum(info.site.max_processors for info in view.sites) or 1
    free_share = min(sum(max(f, 0) for f in free) / most, 1.0)
    overall = np.array([queue_fill(len(entries), slots), free_share], dtype=np.float32)
    obs = {"queue": shown.features, "sites": observe_sites(view, free, sites), "globals": overall}
    return obs, shown


def wait_allowed(view: View, started: bool = False) -> bool:
    """Whether the agent may wait: only while some job runs or some VM boots (or the agent
    `started` a job in this round), since then an event is to come that brings a new decision;
    a wait on an idle pool could last for ever."""
    if started:
        return True
    for i, info in enumerate(view.sites):
        if info.running:
            return True
        cloud = view.cloud(i)
        if cloud is not None and cloud.booting:
            return True
    return False
