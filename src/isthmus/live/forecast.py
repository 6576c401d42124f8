"""What-if forecasts of the live queue (`isthmus forecast`, `POST /forecast`).

The live state is copied (`snapshot`, on the manager's loop: queues in their order, running
jobs with their start times, VMs with their lease and boot times, the charged cost so far and
the runtime history the predictors read) and replayed forward by a simulated engine with the
same policies (`run_forecast`, off the loop): the live manager's own recovery entry points
(`Engine.restore`, `Engine.reattach`, `CloudBackend.restore_vm`, `Engine.adopt_lease`) put the
copy into the simulated engine, then its clock runs until every job has ended or the horizon.
Nothing of the live state is touched. Another allocation or provisioning policy, or another
budget, answers "what if"; the same snapshot run twice compares them side by side.

What a forecast assumes (and so how good it is): a job runs for its requested runtime when it
has one (the live manager kills it there), else for the prediction of the allocation policy's
predictor when it has one, else for the mean runtime of the jobs completed so far, else for
the manager's default estimate; a running job that has outlived its estimate ends one second
from now. No job arrives after the snapshot. Policies start afresh (a policy's own memory,
such as a round-robin pointer, is not copied); VMs boot in the site's boot time.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from isthmus.config.errors import ConfigError
from isthmus.config.loader import environment_from_text, parse_text
from isthmus.config.schema import Loc, environment_to_dict, validate_document
from isthmus.engine.backend import CloudBackend
from isthmus.engine.build import PolicyChoices, build_engine
from isthmus.engine.clock import EV_VM_READY, PRIO_VM, SimClock
from isthmus.engine.engine import Engine
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.events import EventKind
from isthmus.model.job import Job
from isthmus.model.states import VmState
from isthmus.sim.runner import simulated_backends

if TYPE_CHECKING:
    from isthmus.live.manager import Manager

DEFAULT_HORIZON = 7 * 86400.0


@dataclass(frozen=True)
class RunningCopy:
    """A running job as the snapshot saw it."""

    job: Job
    site: int
    started: float
    run: int
    restarts: int
    stage: int
    limit: float | None


@dataclass(frozen=True)
class QueuedCopy:
    """A queued job as the snapshot saw it (in its queue's order)."""

    job: Job
    stage: int
    run: int
    restarts: int
    queued_at: float


@dataclass(frozen=True)
class VmCopy:
    """A leased VM as the snapshot saw it."""

    site: int
    vm: int
    state: VmState
    leased_at: float
    ready_at: float | None
    vm_type: int = 0
    image: int = 0
    owner: str | None = None


@dataclass
class Snapshot:
    """Everything a forecast needs, copied from a live engine (plain data: safe off the loop)."""

    now: float
    env: Environment
    allocation: PolicyChoice
    provisioning: PolicyChoice
    round_interval: float | None
    budget: float | None
    spent: float
    #: what each budget cap charged, by period, and its limit now (an admin may have changed it)
    caps: dict[str, tuple[float, dict[str, float]]]
    enforce_walltime: bool
    running: list[RunningCopy] = field(default_factory=list)
    queued: list[QueuedCopy] = field(default_factory=list)
    vms: list[VmCopy] = field(default_factory=list)
    history: dict[str, tuple[float, ...]] = field(default_factory=dict)
    runtime_sum: float = 0.0
    runtime_count: int = 0
    basis: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobForecast:
    """When a job is expected to start and end (None: not within the horizon), and where."""

    job: int
    user: str
    size: int
    state: str
    start: float | None
    end: float | None
    site: str | None
    runtime_basis: str


@dataclass
class Forecast:
    """The forecast of one configuration."""

    now: float
    allocation: str
    provisioning: str
    budget: float | None
    horizon: float
    jobs: list[JobForecast]
    spend: float  # expected charged cost from now on ($)
    unfinished: int  # jobs not ended by the horizon


def _estimate(m: Manager, job: Job, predicted: float | None) -> tuple[float, str]:
    """The runtime a forecast assumes for `job`, and what it is based on."""
    if job.requested_runtime is not None:
        return job.requested_runtime, "requested runtime"
    if predicted is not None and math.isfinite(predicted) and predicted > 0:
        return predicted, "predictor"
    engine = m.engine
    if engine.runtime_count:
        return engine.runtime_sum / engine.runtime_count, "mean of completed jobs"
    return m.config.default_estimate, "default estimate"


def snapshot(m: Manager) -> Snapshot:
    """Copy the live state of `m` (call on the manager's loop; it changes nothing)."""
    engine = m.engine
    now = m.clock.now
    snap = Snapshot(
        now=now,
        env=m.env,
        allocation=m.env.allocation,
        provisioning=m.env.provisioning,
        round_interval=engine.round_interval,
        budget=engine.budget,
        spent=engine.spent,
        enforce_walltime=engine.enforce_walltime,
        history={user: tuple(h) for user, h in engine.history.items()},
        runtime_sum=engine.runtime_sum,
        runtime_count=engine.runtime_count,
        caps={c.cap.name: (c.limit, dict(c.charged)) for c in engine.ledger.caps},
    )
    for b in engine.backends:
        for entry in sorted(b.running.values(), key=lambda e: e.started):
            runtime, basis = _estimate(m, entry.job, entry.predicted)
            # a run past its estimate is assumed to end a second from now
            runtime = max(runtime, now - entry.started + 1.0)
            snap.running.append(
                RunningCopy(
                    dataclasses.replace(entry.job, runtime=runtime),
                    b.index,
                    entry.started,
                    entry.run,
                    entry.restarts,
                    entry.stage,
                    entry.limit,
                )
            )
            snap.basis[entry.job.id] = basis
        if isinstance(b, CloudBackend):
            for vm in b.vms.values():
                if vm.state in (VmState.BOOTING, VmState.READY):
                    snap.vms.append(
                        VmCopy(
                            b.index,
                            vm.id,
                            vm.state,
                            vm.leased_at,
                            vm.ready_at if vm.ready_at >= 0 else None,
                            vm.type,
                            vm.image,
                            vm.owner,
                        )
                    )
    for stage, queue in enumerate(engine.queues):
        for entry in queue.values():
            runtime, basis = _estimate(m, entry.job, entry.predicted)
            snap.queued.append(
                QueuedCopy(
                    dataclasses.replace(entry.job, runtime=runtime), stage, entry.run, entry.restarts, entry.queued_at
                )
            )
            snap.basis[entry.job.id] = basis
    return snap


def what_if_environment(
    live: Environment, *, text: str | None = None, fmt: str = "toml", add_sites: str | None = None
) -> Environment:
    """The environment a what-if forecast runs on: a whole environment given as TOML or YAML
    `text` (its own policies), or the live one with the `[[sites]]` of the TOML `add_sites`
    appended (the live policies). ConfigError naming the line and key of any problem."""
    if text is not None and add_sites is not None:
        raise ConfigError("<what-if>", "give a whole environment or sites to add, not both")
    if text is not None:
        if fmt not in ("toml", "yaml"):
            raise ConfigError("<environment>", f"unknown format {fmt!r}; expected toml or yaml")
        return environment_from_text(text, "toml" if fmt == "toml" else "yaml", file="<environment>")
    if add_sites is None:
        return live
    data, line_of = parse_text(add_sites, "toml", file="<add_sites>")
    extra = set(data) - {"sites"}
    if extra or not isinstance(data.get("sites"), list) or not data["sites"]:
        raise ConfigError(
            "<add_sites>",
            "expected one or more [[sites]] tables and nothing else"
            + (f" (found {', '.join(sorted(extra))})" if extra else ""),
        )
    doc = environment_to_dict(live)
    n = len(doc["sites"])
    doc["sites"] = [*doc["sites"], *data["sites"]]

    def line(loc: Loc) -> int | None:
        """Problems in an added site name its line in `add_sites` (the live sites come first)."""
        if line_of is None or len(loc) < 2 or loc[0] != "sites" or not isinstance(loc[1], int) or loc[1] < n:
            return None
        return line_of(("sites", loc[1] - n, *loc[2:]))

    return validate_document(doc, file="<add_sites>", line_of=line)


def _site_map(snap: Snapshot, env: Environment) -> list[int]:
    """For each live site index, its index in `env` (by name), or -1 when `env` lacks it;
    ConfigError when a site that runs jobs or holds VMs now is missing."""
    index = {s.name: i for i, s in enumerate(env.sites)}
    names = [s.name for s in snap.env.sites]
    busy = {r.site for r in snap.running} | {v.site for v in snap.vms}
    for i in sorted(busy):
        if names[i] not in index:
            raise ConfigError(
                "<environment>",
                f"site {names[i]!r} runs jobs or holds VMs now: a what-if environment must keep it",
                "sites",
            )
    return [index.get(n, -1) for n in names]


def run_forecast(
    snap: Snapshot,
    *,
    allocation: PolicyChoice | None = None,
    provisioning: PolicyChoice | None = None,
    budget: float | str | None = "live",
    horizon: float = DEFAULT_HORIZON,
    env: Environment | None = None,
) -> Forecast:
    """Simulate `snap` forward (policies and budget as live unless given; `budget=None`: no cap)
    until every job has ended or `horizon` seconds have passed. With `env` (see
    `what_if_environment`) the sites, sets, policies and round interval are those of `env`; the
    live sites that run jobs or hold VMs must be in it by name. PolicyError on a bad policy,
    ConfigError on an environment that cannot take the live state."""
    target = env if env is not None else snap.env
    where = _site_map(snap, target)
    alloc = allocation or (target.allocation if env is not None else snap.allocation)
    prov = provisioning or (target.provisioning if env is not None else snap.provisioning)
    cap = snap.budget if budget == "live" else budget
    assert cap is None or isinstance(cap, float | int)
    clock = SimClock(snap.now)
    engine = build_engine(
        target,
        PolicyChoices.of(target, allocation=alloc, provisioning=prov),
        clock=clock,
        backends=simulated_backends(target),
        true_runtimes_known=False,
        round_interval=target.round_interval if env is not None else snap.round_interval,
        budget=cap,
        enforce_walltime=snap.enforce_walltime,
    )
    adopted: dict[tuple[int, int], tuple[float, int]] = {}
    for vm in snap.vms:
        site = where[vm.site]
        backend = engine.cloud_backend(site)
        restored = backend.restore_vm(vm.vm, vm.state, vm.leased_at, vm.ready_at, None, vm.vm_type, vm.image, vm.owner)
        adopted[(site, restored.id)] = (vm.leased_at, vm.vm_type)
        engine.adopt_lease(site, restored.id, vm.leased_at)
        if vm.state is VmState.BOOTING:
            engine.schedule(vm.leased_at + backend.site.boot_time, PRIO_VM, EV_VM_READY, site, restored.id)
    engine.spent = snap.spent  # what the live manager charged so far, released VMs included
    for state in engine.ledger.caps:  # so the caps: what adopting the leases booked is replaced
        if state.cap.name in snap.caps:
            state.limit, charged = snap.caps[state.cap.name]
            state.charged = dict(charged)
    for user, runtimes in snap.history.items():
        engine.history[user] = deque(runtimes, maxlen=2)
    engine.runtime_sum, engine.runtime_count = snap.runtime_sum, snap.runtime_count
    # the live queues keep their numbers when the policy and the sets are the same and the live
    # sites keep their places (sites added at the end); else a queued job joins its arrival
    # queue and a running one the first queue whose sites include its site
    live_names = [s.name for s in snap.env.sites]
    same_queues = env is None or (
        alloc.name == snap.allocation.name
        and target.sets == snap.env.sets
        and [s.name for s in target.sites[: len(live_names)]] == live_names
    )
    for r in snap.running:
        site = where[r.site]
        stage = r.stage
        if not same_queues:
            stage = next((k for k, sites in enumerate(engine.stage_sites) if site in sites), 0)
        engine.restore(r.job, stage=stage, run=r.run, restarts=r.restarts)
        engine.reattach(r.job.id, site, run=r.run, started=r.started, limit=r.limit)
    for q in snap.queued:
        stage = q.stage if same_queues else engine.allocation.arrival_stage(q.job) if len(engine.queues) > 1 else 0
        engine.restore(q.job, stage=stage, run=q.run, restarts=q.restarts, queued_at=q.queued_at)
    engine.request_round(snap.now)
    clock.run(snap.now + horizon, engine.idle)
    return Forecast(
        now=snap.now,
        allocation=alloc.name,
        provisioning=prov.name,
        budget=cap,
        horizon=horizon,
        jobs=_job_forecasts(snap, engine),
        spend=_spend_from(snap.now, engine, adopted),
        unfinished=len(engine.entries),
    )


def _spend_from(now: float, engine: Engine, adopted: dict[tuple[int, int], tuple[float, int]]) -> float:
    """The charged cost of the billing increments begun from `now` on, by the leases the forecast
    adopted (`adopted`: (site, VM) -> (leased at, type)) and those it made, each until its release
    or the forecast's end. Read from the forecast's log: the engine follows billing boundaries only
    under a budget, so its `spent` does not grow without one."""
    leases = dict(adopted)
    released: dict[tuple[int, int], float] = {}
    for e in engine.log:
        if e.kind == EventKind.VM_LEASE:
            leases[(e.site, e.vm)] = (e.time, int(e.value))
        elif e.kind == EventKind.VM_RELEASE:
            released[(e.site, e.vm)] = e.time
    end = engine.clock.now
    total = 0.0
    for (site, vm), (leased_at, vm_type) in leases.items():
        s = engine.env.sites[site]
        until = released.get((site, vm), end)
        more = s.charged_cost(until - leased_at, vm_type) - s.charged_cost(max(now, leased_at) - leased_at, vm_type)
        total += max(0.0, more)
    return total


def _job_forecasts(snap: Snapshot, engine: Engine) -> list[JobForecast]:
    """Each snapshot job's forecast start (its run's START, or the live start) and end."""
    start: dict[int, float] = {}
    site: dict[int, int] = {}
    end: dict[int, float] = {}
    ending = (EventKind.END, EventKind.FAIL)
    for e in engine.log:
        if e.kind == EventKind.START:
            start.setdefault(e.job, e.time)
            site[e.job] = e.site
        elif e.kind in ending or (e.kind == EventKind.KILL and e.job not in engine.entries):
            end[e.job] = e.time
    names = [s.name for s in engine.env.sites]
    live_names = [s.name for s in snap.env.sites]
    out = []
    for r in snap.running:
        j = r.job
        out.append(
            JobForecast(j.id, j.user, j.size, "running", r.started, end.get(j.id), live_names[r.site], snap.basis[j.id])
        )
    for q in snap.queued:
        j = q.job
        s = site.get(j.id)
        out.append(
            JobForecast(
                j.id,
                j.user,
                j.size,
                "queued",
                start.get(j.id),
                end.get(j.id),
                names[s] if s is not None else None,
                snap.basis[j.id],
            )
        )
    return out
