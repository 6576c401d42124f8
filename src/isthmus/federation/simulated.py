"""Several managers on one simulated clock, exchanging the peer protocol's messages.

Each manager is an ordinary engine with its own sites, policies and event log; they share one
`SimClock` (DESIGN: "several engines on one clock for peer managers"). Every message of the
protocol (Villegas dissertation Table 4.1) is delivered after the latency model's delay:
submitJob (`ForwardJob`), notifyJob back along the chain, the IBM seed's FAILED hand-back, and
resource data, pushed by a provider when it changed by at least `push_threshold` processors or
jobs (sendResourceData) and/or refreshed every `refresh` seconds (the IBM seed's proxy reports
"every 15 seconds"). The policies are the very objects a live manager runs; only how messages
travel differs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from isthmus.engine.clock import PRIO_SUBMIT, SimClock
from isthmus.engine.engine import Engine
from isthmus.engine.peering import PeerState, resource_data
from isthmus.engine.state import JobEntry
from isthmus.model.peers import PeerRole, ResourceData, differs
from isthmus.model.states import JobState

#: One-way delay of a message between two managers on one host, seconds, from this project's
#: live peer protocol on loopback (benchmarks/bench_peers.py, docs/federation.md "Measured"):
#: a submitJob, which stores the job before it answers, took 5.2-9.0 ms round trip (median, on a
#: loaded 2-core machine), so 2.6-4.5 ms one way; small messages (heartbeat, resource data,
#: notifyJob) 0.5-1 ms one way. 5 ms keeps the job messages' order and errs on the slow side.
DEFAULT_LATENCY = 0.005

_EV_MESSAGE = 0
_EV_REFRESH = 1


@dataclass(frozen=True, slots=True)
class LatencyModel:
    """The delay of each message: `fixed` seconds one way, between any two managers."""

    fixed: float = DEFAULT_LATENCY

    def __post_init__(self) -> None:
        if not self.fixed >= 0:
            raise ValueError(f"message latency must be a number of seconds >= 0, got {self.fixed}")

    def delay(self, sender: str, receiver: str) -> float:
        """Seconds a message from `sender` takes to reach `receiver`."""
        return self.fixed


class _Link:
    """One engine's side of the federation (implements `isthmus.engine.peering.Federation`)."""

    def __init__(self, fed: SimFederation, engine: Engine) -> None:
        self.fed = fed
        self.engine = engine
        self.peers: list[PeerState] = []
        self.sent: ResourceData | None = None

    @property
    def max_hops(self) -> int:
        return self.fed.max_hops

    def send(self, engine: Engine, entry: JobEntry, peer: PeerState) -> None:
        target = self.fed.engines[peer.name]
        job, chain = entry.job, (*entry.chain, engine.name)
        self.fed.post(engine.name, peer.name, lambda: target.receive(job, chain))

    def send_back(self, engine: Engine, entry: JobEntry) -> None:
        sender = entry.chain[-1]
        target = self.fed.engines[sender]
        job_id, me = entry.job.id, engine.name
        self.fed.post(me, sender, lambda: target.returned(job_id, me))

    def notify(self, engine: Engine, entry: JobEntry, state: JobState) -> None:
        if not state.terminal:
            return  # only ends change what a simulated origin keeps
        job_id = entry.job.id
        for name in entry.chain:
            target = self.fed.engines[name]
            self.fed.post(engine.name, name, lambda t=target: t.remote_ended(job_id, state))  # type: ignore[misc]

    def changed(self, engine: Engine) -> None:
        threshold = self.fed.push_threshold
        if threshold is None or not self.fed.consumers[engine.name]:
            return
        data = resource_data(engine)
        if differs(self.sent, data, threshold):
            self.sent = data
            self.fed.publish(engine.name, data)


class SimFederation:
    """Managers (engines on one clock) connected as peers, with simulated message delays."""

    def __init__(
        self,
        clock: SimClock,
        *,
        latency: LatencyModel | None = None,
        push_threshold: int | None = 1,
        refresh: float | None = None,
        max_hops: int = 1,
    ) -> None:
        if push_threshold is not None and push_threshold < 1:
            raise ValueError(f"push_threshold must be an integer >= 1 or None, got {push_threshold}")
        if refresh is not None and not refresh > 0:
            raise ValueError(f"refresh must be a number of seconds > 0 or None, got {refresh}")
        if max_hops < 0:
            raise ValueError(f"max_hops must be an integer >= 0, got {max_hops}")
        self.clock = clock
        self.latency = latency or LatencyModel()
        self.push_threshold = push_threshold
        self.refresh = refresh
        self.max_hops = max_hops
        self.engines: dict[str, Engine] = {}
        self.links: dict[str, _Link] = {}
        #: manager -> names of the peers it sends resource data to (they may forward to it)
        self.consumers: dict[str, list[str]] = {}
        self.messages = 0
        self._pending: dict[int, Callable[[], object]] = {}
        self._next = 0
        self._target = clock.register(self._handle)
        self._at = clock.scheduler(self._target)
        self._started = False

    def add(self, engine: Engine) -> None:
        """Add a manager; its name must be unique."""
        if engine.clock is not self.clock:
            raise ValueError(f"manager {engine.name!r} runs on another clock")
        if engine.name in self.engines:
            raise ValueError(f"two managers are called {engine.name!r}")
        self.engines[engine.name] = engine
        self.links[engine.name] = _Link(self, engine)
        self.consumers[engine.name] = []

    def connect(self, a: str, b: str, role: PeerRole = PeerRole.BOTH) -> None:
        """Connect managers `a` and `b`; `role` is what `b` is to `a` (a provider: `a` may
        forward jobs to `b`; both: each to the other)."""
        for name in (a, b):
            if name not in self.engines:
                raise ValueError(f"no manager {name!r} (managers: {', '.join(self.engines)})")
        if a == b:
            raise ValueError(f"manager {a!r} cannot be its own peer")
        mirrored = {PeerRole.PROVIDER: PeerRole.CONSUMER, PeerRole.CONSUMER: PeerRole.PROVIDER}.get(role, role)
        for me, other, r in ((a, b, role), (b, a, mirrored)):
            link = self.links[me]
            if any(p.name == other for p in link.peers):
                raise ValueError(f"managers {a!r} and {b!r} are already connected")
            link.peers.append(PeerState(len(link.peers), other, r, self.latency.delay(me, other)))
            if r.provides:
                self.consumers[other].append(me)

    def start(self) -> None:
        """Attach every engine to its link and send each its providers' first resource data."""
        if self._started:
            raise RuntimeError("the federation was already started")
        self._started = True
        for name, engine in self.engines.items():
            engine.attach(self.links[name])
            self.publish(name, resource_data(engine))
        if self.refresh is not None:
            self.clock.background += 1
            self._at(self.clock.now + self.refresh, PRIO_SUBMIT, _EV_REFRESH, -1, -1)

    def post(self, sender: str, receiver: str, deliver: Callable[[], object]) -> None:
        """Deliver a message from `sender` to `receiver` after the latency model's delay."""
        i = self._next
        self._next += 1
        self._pending[i] = deliver
        self.messages += 1
        self._at(self.clock.now + self.latency.delay(sender, receiver), PRIO_SUBMIT, _EV_MESSAGE, i, -1)

    def publish(self, sender: str, data: ResourceData) -> None:
        """Send `sender`'s resource data to every peer that may forward to it."""
        for name in self.consumers[sender]:
            link = self.links[name]
            peer = next(p for p in link.peers if p.name == sender)

            def deliver(peer: PeerState = peer) -> None:
                if peer.data is None or peer.data.time <= data.time:
                    peer.data = data
                    peer.heard_at = self.clock.now

            self.post(sender, name, deliver)

    def idle(self) -> bool:
        """True when every manager is idle and no message is in flight."""
        return not self._pending and all(e.idle() for e in self.engines.values())

    def _handle(self, kind: int, a: int, b: int) -> None:
        if kind == _EV_MESSAGE:
            self._pending.pop(a)()
        elif kind == _EV_REFRESH:
            self.clock.background -= 1
            for name, engine in self.engines.items():
                if self.consumers[name]:
                    data = resource_data(engine)
                    self.links[name].sent = data
                    self.publish(name, data)
            assert self.refresh is not None
            self.clock.background += 1
            self._at(self.clock.now + self.refresh, PRIO_SUBMIT, _EV_REFRESH, -1, -1)
