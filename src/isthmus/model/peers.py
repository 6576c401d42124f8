"""Peer managers and the resource data they exchange (Villegas dissertation ch. 4).

A manager's *resource data* is what it tells its peers about itself: per site, the processors
it has now and could have (a cloud's potential VMs, §7.4), how many are idle, and the jobs
waiting for them. It is aggregated per site (§4.2.2: "resource description may be aggregated
to reduce the amount of information transferred") and stamped with the time it was measured,
so that a policy can see how old it is ("information aging").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PeerRole(StrEnum):
    """What a peer is to this manager (Villegas §4.2): a *provider* runs jobs this manager
    forwards to it, a *consumer* forwards jobs here; "both" is each to the other."""

    PROVIDER = "provider"
    CONSUMER = "consumer"
    BOTH = "both"

    @property
    def provides(self) -> bool:
        """True when this manager may forward jobs to the peer."""
        return self is not PeerRole.CONSUMER

    @property
    def consumes(self) -> bool:
        """True when the peer may forward jobs here (and is sent this manager's resource data)."""
        return self is not PeerRole.PROVIDER


@dataclass(frozen=True, slots=True)
class SiteSummary:
    """One site as a manager reports it to its peers.

    `processors` are usable now (a cluster's nodes, a cloud's ready VMs; 0 outside the site's
    availability window: the IBM seed's drained cloud "reported as 0"); `max_processors` the
    most it can ever offer; `idle` the usable processors running nothing; `busy` those running
    jobs; `queued_jobs` and `queued_processors` the jobs waiting in queues that may use it and
    the processors they request. `capacity` counts potential VMs (§7.4: "a site that can
    instantiate a maximum of 100 VMs and has 50 of them in use and 20 idle would have a capacity
    of 50 VMs: 20 idle plus 30 potential"): for a cluster it is its idle processors.
    """

    name: str
    is_cloud: bool
    available: bool
    processors: int
    max_processors: int
    idle: int
    busy: int
    queued_jobs: int
    queued_processors: int

    @property
    def capacity(self) -> int:
        """Idle processors plus those that could still be leased (0 when unavailable)."""
        if not self.available:
            return 0
        if not self.is_cloud:
            return self.idle
        return max(0, self.max_processors - self.busy)


@dataclass(frozen=True, slots=True)
class ResourceData:
    """What one manager tells its peers about its sites at time `time` (sendResourceData).

    The manager-wide figures are what the §4.5 forwarding policies compare: queue length
    (waiting jobs), the processors they request, idle processors, load (queued processors
    minus idle ones) and capacity.
    """

    manager: str
    time: float
    sites: tuple[SiteSummary, ...]
    queued_jobs: int
    queued_processors: int

    @property
    def idle(self) -> int:
        """Idle processors over all sites."""
        return sum(s.idle for s in self.sites if s.available)

    @property
    def capacity(self) -> int:
        """Capacity (idle plus potential processors) over all sites."""
        return sum(s.capacity for s in self.sites)

    @property
    def processors(self) -> int:
        """Usable processors over all sites."""
        return sum(s.processors for s in self.sites)

    @property
    def largest(self) -> int:
        """The most processors one available site can ever offer (the largest job it can run)."""
        return max((s.max_processors for s in self.sites if s.available), default=0)

    @property
    def load(self) -> int:
        """Queued processors minus idle ones (§4.5.2's LowestLoad)."""
        return self.queued_processors - self.idle

    def to_dict(self) -> dict[str, object]:
        """A JSON-friendly form (the wire format of the peer protocol)."""
        return {
            "manager": self.manager,
            "time": self.time,
            "queued_jobs": self.queued_jobs,
            "queued_processors": self.queued_processors,
            "sites": [
                {
                    "name": s.name,
                    "is_cloud": s.is_cloud,
                    "available": s.available,
                    "processors": s.processors,
                    "max_processors": s.max_processors,
                    "idle": s.idle,
                    "busy": s.busy,
                    "queued_jobs": s.queued_jobs,
                    "queued_processors": s.queued_processors,
                }
                for s in self.sites
            ],
        }


def differs(a: ResourceData | None, b: ResourceData, threshold: int) -> bool:
    """True when `b` should be pushed to peers that last received `a`: the first report, a site
    becoming (un)available, or a change of idle processors, queued processors, capacity or queue
    length by at least `threshold` (sendResourceData "when the dynamic changes in resource
    capacity, utilization, or availability are over a threshold", §4.2.1)."""
    if a is None or len(a.sites) != len(b.sites):
        return True
    if any(x.available != y.available for x, y in zip(a.sites, b.sites, strict=True)):
        return True
    return (
        abs(a.idle - b.idle) >= threshold
        or abs(a.queued_processors - b.queued_processors) >= threshold
        or abs(a.capacity - b.capacity) >= threshold
        or abs(a.queued_jobs - b.queued_jobs) >= threshold
    )


@dataclass(frozen=True, slots=True)
class PeerSettings:
    """One ``[[peers]]`` entry of an environment file: a peer manager this one talks to.

    `name` is the peer's environment name (how it introduces itself), `address` its API's base
    URL, `role` what it is to this manager. The shared secret authenticating both directions is
    named, never given: `token_env` (an environment variable) or `token_file` (a file holding
    it). `heartbeat` is the interval, seconds, this manager proposes in openConn (None: the
    ``[federation]`` default). `ca_file` is the CA file an https peer is verified against (empty:
    the trusted CAs); `insecure_http` allows an http:// address outside loopback.
    """

    name: str
    address: str
    role: PeerRole = PeerRole.BOTH
    token_env: str = ""
    token_file: str = ""
    heartbeat: float | None = None
    ca_file: str = ""
    insecure_http: bool = False


@dataclass(frozen=True, slots=True)
class FederationSettings:
    """The ``[federation]`` table: how this manager takes part in forwarding.

    `max_hops`: how many managers a job may pass through (1: a forwarded job runs where it is
    received); `push_threshold`: resource data is pushed when it changed by at least this many
    processors or jobs (Villegas §4.2.1); `heartbeat`: the default heartbeat interval, seconds;
    `missed_heartbeats`: a peer silent this many intervals is down and gets no jobs; `timeout`:
    seconds one protocol request may take before it counts as failed.
    """

    max_hops: int = 1
    push_threshold: int = 1
    heartbeat: float = 2.0
    missed_heartbeats: int = 3
    timeout: float = 5.0
