"""Small builders shared by the engine tests."""

from __future__ import annotations

from isthmus.model import Environment, Job, Site, SiteKind, SiteSet
from isthmus.model.events import EventKind
from isthmus.sim.runner import SimulationResult


def job(jid: int, submit: float, size: int, runtime: float, req: float | None = None, user: str = "u") -> Job:
    """A rigid job."""
    return Job(jid, submit, size, runtime, requested_runtime=req, user=user)


def clusters(*procs: int, interval: float | None = None, sets: tuple[SiteSet, ...] = ()) -> Environment:
    """An environment of clusters named s0, s1, ... with the given processor counts."""
    sites = tuple(Site(f"s{i}", nodes=p) for i, p in enumerate(procs))
    return Environment("test", sites, sets=sets, round_interval=interval)


def cloud_env(
    cluster: int,
    max_vms: int,
    *,
    min_vms: int = 0,
    boot: float = 0.0,
    price: float = 0.0,
    increment: float = 3600.0,
    idle: float = 300.0,
    interval: float | None = None,
) -> Environment:
    """One cluster `c` plus one cloud `cloud`."""
    sites = (
        Site("c", nodes=cluster),
        Site(
            "cloud",
            kind=SiteKind.CLOUD,
            max_vms=max_vms,
            min_vms=min_vms,
            boot_time=boot,
            price_per_hour=price,
            billing_increment=increment,
            idle_release_time=idle,
        ),
    )
    return Environment("test-cloud", sites, round_interval=interval)


def starts(result: SimulationResult) -> list[tuple[int, float, int]]:
    """(job, start time, site) of every START, in log order."""
    return [(e.job, e.time, e.site) for e in result.log if e.kind is EventKind.START]


def start_of(result: SimulationResult) -> dict[int, tuple[float, int]]:
    """Start time and site of the last run of each job."""
    return {j: (t, s) for j, t, s in starts(result)}


def events(result: SimulationResult, *kinds: EventKind) -> list[tuple[float, str, int, int]]:
    """(time, kind name, job, site) of the events of the given kinds."""
    return [(e.time, e.kind.name, e.job, e.site) for e in result.log if e.kind in kinds]
