"""A test harness: one policy on a hand-built state, its decisions and their statuses.

As Nomad's scheduler Harness, it runs a policy without a simulation: build a state (queued
jobs, running jobs with their start times, leased VMs) at a chosen time, call `decide()`,
and get back every decision with the status the engine gave it. The state is an ordinary
engine on a simulated clock that is never run, so validation and application are the real
ones; per-policy unit tests use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from isthmus.decisions import Decision
from isthmus.decisions.grow import GrowBag
from isthmus.decisions.start import StartJob
from isthmus.engine.backend import CloudBackend
from isthmus.engine.build import PolicyChoices, build_engine
from isthmus.engine.clock import SimClock
from isthmus.engine.engine import Engine
from isthmus.engine.peering import PeerState
from isthmus.engine.state import JobEntry
from isthmus.model.environment import Environment, PolicyChoice
from isthmus.model.job import Job
from isthmus.model.peers import PeerRole, ResourceData, SiteSummary
from isthmus.model.states import JobState, VmState
from isthmus.model.status import Status
from isthmus.policies.build import DEFAULT_PREDICTOR
from isthmus.sim.runner import simulated_backends


@dataclass(frozen=True)
class Outcome:
    """One decision of the policy and what the engine made of it."""

    decision: Decision
    status: Status


def peer_data(
    manager: str,
    *,
    idle: int = 0,
    processors: int | None = None,
    max_processors: int | None = None,
    queued_jobs: int = 0,
    queued_processors: int = 0,
    is_cloud: bool = False,
    available: bool = True,
    busy: int | None = None,
    time: float = 0.0,
) -> ResourceData:
    """Resource data of a peer with one site (named after the manager), for hand-built states."""
    procs = idle if processors is None else processors
    most = procs if max_processors is None else max_processors
    site = SiteSummary(
        name=manager,
        is_cloud=is_cloud,
        available=available,
        processors=procs,
        max_processors=most,
        idle=idle,
        busy=procs - idle if busy is None else busy,
        queued_jobs=queued_jobs,
        queued_processors=queued_processors,
    )
    return ResourceData(manager, time, (site,), queued_jobs, queued_processors)


class RecordingFederation:
    """The peers of a harness: set by the test; forwarded jobs are recorded, not delivered."""

    def __init__(self, max_hops: int = 1) -> None:
        self.peers: list[PeerState] = []
        self.max_hops = max_hops
        #: (job id, peer name) of every job sent
        self.sent: list[tuple[int, str]] = []
        self.handed_back: list[int] = []
        self.notified: list[tuple[int, JobState]] = []

    def send(self, engine: Engine, entry: JobEntry, peer: PeerState) -> None:
        """Record the job sent."""
        self.sent.append((entry.job.id, peer.name))

    def send_back(self, engine: Engine, entry: JobEntry) -> None:
        """Record the job handed back."""
        self.handed_back.append(entry.job.id)

    def notify(self, engine: Engine, entry: JobEntry, state: JobState) -> None:
        """Record the notification."""
        self.notified.append((entry.job.id, state))

    def changed(self, engine: Engine) -> None:
        """Nothing to push in a harness."""


class Harness:
    """An engine holding a hand-built state at time `now`, for running one policy on it."""

    def __init__(
        self,
        env: Environment,
        allocation: str | PolicyChoice = "fcfs",
        provisioning: str | PolicyChoice = "none",
        *,
        now: float = 0.0,
        predictor: PolicyChoice | None = DEFAULT_PREDICTOR,
        others: Mapping[str, PolicyChoice] | None = None,
        budget: float | None = None,
    ) -> None:
        alloc = allocation if isinstance(allocation, PolicyChoice) else PolicyChoice(allocation)
        prov = provisioning if isinstance(provisioning, PolicyChoice) else PolicyChoice(provisioning)
        self.clock = SimClock(now)
        # only the policies given: the environment's round interval and fair-share policy are not used
        self.engine = build_engine(
            env,
            PolicyChoices(alloc, prov, predictor, dict(others or {})),
            clock=self.clock,
            backends=simulated_backends(env),
            round_interval=None,
            budget=budget,
        )
        self.policies = self.engine.policies
        #: the peers, once `peer` connected one
        self.federation: RecordingFederation | None = None

    @property
    def view(self) -> Any:
        """The read-only view the policies see."""
        return self.engine.view

    def queue(
        self,
        job: Job,
        *,
        stage: int | None = None,
        queued_at: float | None = None,
        chain: tuple[str, ...] = (),
        failed: tuple[str, ...] = (),
    ) -> JobEntry:
        """Put `job` in a queue (its arrival stage, or `stage`) as if it had arrived at `queued_at`.

        With peers (`peer`), the job is also new to the selection policy (unrouted) unless it
        has passed through `max_hops` managers; `chain` and `failed` are its forwarding history.
        """
        engine = self.engine
        if stage is None:
            stage = engine.allocation.arrival_stage(job) if len(engine.queues) > 1 else 0
        entry = engine.restore(job, stage=stage, queued_at=queued_at)
        if entry is None:
            raise ValueError(f"job {job.id} can never run in this environment: {engine.why(job.id)}")
        entry.chain = chain
        entry.failed = failed
        if self.federation is not None and len(chain) >= self.federation.max_hops:
            engine.unrouted.pop(job.id, None)
        return entry

    def peer(
        self,
        name: str,
        data: ResourceData | None,
        *,
        role: PeerRole = PeerRole.BOTH,
        up: bool = True,
        distance: float = 0.0,
    ) -> int:
        """Connect a peer manager with its latest resource data; returns its index."""
        if self.federation is None:
            self.federation = RecordingFederation()
            self.engine.attach(self.federation)
        peers = self.federation.peers
        peers.append(PeerState(len(peers), name, role, distance, up, data, self.clock.now))
        return len(peers) - 1

    def running(self, job: Job, site: int, started: float, *, limit: float | None = None) -> JobEntry:
        """Make `job` run on `site` since `started` (at or before now)."""
        entry = self.queue(job)
        status = self.engine.apply(StartJob(job.id, site, limit))
        if not status.accepted:
            raise ValueError(f"job {job.id} cannot run on site {site}: {status.reason}")
        backend = self.engine.backends[site]
        backend._track_stop(entry)
        entry.started = started
        backend._track_start(entry, started)
        return entry

    def bag(self, job: Job, held: Mapping[int, int] | None = None) -> None:
        """Let bag of tasks `job` arrive now, holding `held` processors per site (each running one
        of its tasks since now, or pulling one with a pull latency)."""
        engine = self.engine
        engine.submit(job)
        for site, count in (held or {}).items():
            status = engine.apply(GrowBag(job.id, site, count), "harness")
            if not status.accepted:
                raise ValueError(f"bag {job.id} cannot hold {count} processors of site {site}: {status.reason}")

    def vms(
        self,
        site: int,
        count: int,
        *,
        leased_at: float | None = None,
        ready: bool = True,
        vm_type: str | None = None,
        owner: str | None = None,
    ) -> list[int]:
        """Lease `count` VMs on cloud `site` (leased at `leased_at`, default now), ready unless
        told, of instance type `vm_type` (default: the site's first), serving `owner` (None: anyone)."""
        backend = self.engine.backends[site]
        if not isinstance(backend, CloudBackend):
            raise ValueError(f"site {site} is not a cloud")
        t = self.clock.now if leased_at is None else leased_at
        names = [x.name for x in backend.site.types]
        type_index = names.index(vm_type) if vm_type is not None else 0
        ids = []
        for _ in range(count):
            vm = backend.restore_vm(
                backend._next_vm,
                VmState.READY if ready else VmState.BOOTING,
                t,
                t if ready else None,
                None,
                type_index,
                0,
                owner,
            )
            ids.append(vm.id)
        return ids

    def decide(self, family: str = "allocation") -> list[Outcome]:
        """Run the policy of `family` once on the current state and apply its decisions in order."""
        policy = {
            "allocation": self.policies.allocation,
            "provisioning": self.policies.provisioning,
            **self.policies.others,
        }[family]
        out = []
        for d in list(policy.decide(self.engine.view)):
            out.append(Outcome(d, self.engine.apply(d, policy.name)))
        return out
