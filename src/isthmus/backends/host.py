"""What a live site backend behind an external system needs of the manager that hosts it: `SiteHost`.

The engine-side adapters of this package (`batch_site.BatchCluster`, `pilot_jobs_site.PilotJobs`,
`cloud_site.ProviderCloud`) turn a batch system's or a cloud provider's answers into engine
events and pilot positions. They take a `SiteHost`, never the live manager: the protocols below
name every member they use, and the live manager's context (`isthmus.live.context.LiveContext`)
satisfies them structurally (mypy checks it where the manager builds these backends), so this
package imports nothing of `isthmus.live`. A test may hand them any object that has these members.
The other half of the contract, what the manager's pilot hub calls on a site whose pilots an
external system starts, is `PilotLauncher`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from isthmus.agent.accounts import Account
from isthmus.backends.local import PilotHub
from isthmus.backends.node import Node
from isthmus.model.states import PilotState

if TYPE_CHECKING:
    from isthmus.engine.engine import Engine
    from isthmus.store.projector import RunRecord


class HostHub(PilotHub, Protocol):
    """The manager's pilot hub as site backends see it: its nodes (pilot positions), what it keeps
    of each run for the database, and the pilots' lifecycle (besides the local backends' calls)."""

    @property
    def nodes(self) -> dict[str, Node]:
        """Every pilot position by node key (a backend adds, updates and removes its own)."""
        ...

    @property
    def records(self) -> dict[tuple[int, int], RunRecord]:
        """Where each started run is and its limit, by (job, run), for the database projection."""
        ...

    @property
    def ended(self) -> dict[tuple[int, int], dict[str, Any]]:
        """What is known of each ended run (an "error" message), by (job, run)."""
        ...

    @property
    def lost_reasons(self) -> dict[tuple[int, int], str]:
        """Why each lost run was lost, by (job, run)."""
        ...

    @property
    def recovering(self) -> bool:
        """True while a restart's recovery re-attaches runs (they are not submitted again)."""
        ...

    def spawn(self, node: Node) -> None:
        """Make the pilot token of `node` and start its pilot (a site's `launch_pilot` for remote ones)."""
        ...

    def retire(self, node: Node, reason: str) -> None:
        """Tell the pilot of `node` to exit (its runs end with it); its token stops working."""
        ...

    def set_pilot_row(self, node: Node, state: PilotState) -> None:
        """Record the pilot's state of `node` in the database (best effort)."""
        ...

    def node_lost(self, node: Node, why: str) -> bool:
        """The pilot of `node` is lost: its runs are lost and requeued; True when it was known."""
        ...

    def mark_running(self, started: Sequence[tuple[int, int, float, str]]) -> None:
        """Runs (job, run, time, detail) their site confirmed running: the database says so."""
        ...

    def history_note(self, job: int, run: int, detail: str) -> None:
        """Add `detail` to the history of run `run` of `job`."""
        ...


class HostIntake(Protocol):
    """The manager's intake of submissions: each live job's validated request."""

    @property
    def specs(self) -> dict[int, dict[str, Any]]:
        """The submission of each job not ended, by job id."""
        ...


class HostBags(Protocol):
    """The launchers of bags of tasks on pilots (a pilot-job site vacates them for local users)."""

    def vacate(self, node: Node, why: str) -> bool:
        """Preempt every bag launcher on `node`; True when some were."""
        ...

    def lanes_on(self, node_key: str) -> int:
        """How many bag launchers the pilot of `node_key` runs."""
        ...


class HostStore(Protocol):
    """The database, for what a site records of its external system (ids that survive a restart)."""

    def get_meta(self, key: str) -> str | None:
        """A value of the meta table, None if unset."""
        ...

    def set_slots(self, job: int, run: int, slots: list[tuple[str, int]]) -> None:
        """Record where run `run` of `job` runs (a batch system's job id)."""
        ...

    def set_vm_provider_id(self, site: int, vm: int, provider_id: str) -> None:
        """Record the provider's instance id of a VM."""
        ...

    def vm_provider_ids(self, site: int) -> dict[int, str]:
        """The recorded instance ids of the live VMs of `site`, by VM id."""
        ...


class HostConfig(Protocol):
    """The manager's settings a site passes on to the pilots and jobs it starts. Times in seconds."""

    @property
    def url(self) -> str:
        """The address pilots reach the manager at."""
        ...

    @property
    def tag(self) -> str | None:
        """Copied to ISTHMUS_TAG in pilots and jobs (None: none)."""
        ...

    @property
    def pilot_timeout(self) -> float:
        """A pilot exits when the manager is unreachable this long."""
        ...

    @property
    def reattach_timeout(self) -> float:
        """After a restart, how long a pilot has to re-register."""
        ...

    @property
    def spawn_timeout(self) -> float:
        """A started pilot must register within this."""
        ...

    @property
    def pilot_ca_file(self) -> Path | None:
        """The CA file pilots verify the manager's certificate against (None: the system's CAs)."""
        ...

    @property
    def insecure_http(self) -> bool:
        """Whether the operator allowed plain HTTP outside loopback (pilots are told so)."""
        ...

    def pilot_tls_args(self) -> list[str]:
        """The `isthmus agent` options every pilot is started with for TLS."""
        ...


class HostClock(Protocol):
    """The engine's clock: what time it is for the engine."""

    @property
    def now(self) -> float:
        """The engine's current time."""
        ...


class PilotLauncher(Protocol):
    """What the pilot hub asks of a site whose pilots something other than a local process starts
    (a batch system's pilot jobs, a provider's VMs): the hub's side of the contract (`SiteHost`
    is the site's). The hub keeps these sites in `launchers`, by site index."""

    def launch_pilot(self, node: Node, token: str) -> None:
        """Start the pilot of `node` with its token."""
        ...

    def registered(self, node: Node) -> None:
        """The pilot of `node` registered."""
        ...

    def pilot_lost(self, node: Node) -> None:
        """The pilot of `node` was lost (its runs already are): replace it."""
        ...

    def restore(self, rows: Sequence[dict[str, Any]], now: float) -> None:
        """After a restart: the site's pilots the database recorded as alive become nodes again."""
        ...


class SiteHost(Protocol):
    """Everything an adapter of this package uses of the live manager (see the module docstring).

    Calls that change the engine from an external system's answer are made inside `external()`,
    which brings the engine's clock to the wall time first and persists what happened after.
    """

    @property
    def engine(self) -> Engine:
        """The engine the site serves."""
        ...

    @property
    def hub(self) -> HostHub:
        """The pilot hub."""
        ...

    @property
    def intake(self) -> HostIntake:
        """The intake of submissions."""
        ...

    @property
    def bags(self) -> HostBags:
        """The bags' launchers."""
        ...

    @property
    def store(self) -> HostStore:
        """The database."""
        ...

    @property
    def config(self) -> HostConfig:
        """The manager's settings."""
        ...

    @property
    def clock(self) -> HostClock:
        """The engine's clock."""
        ...

    @property
    def stopping(self) -> bool:
        """True once the manager is stopping: no new work is started."""
        ...

    @property
    def state_dir(self) -> Path:
        """The manager's state directory (pilots' token files live under it)."""
        ...

    @property
    def spool(self) -> Path:
        """Where jobs' outputs and files live, one directory a job."""
        ...

    def later(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        """Call `fn(*args)` on the event loop after `delay` seconds."""
        ...

    def external(self) -> AbstractContextManager[None]:
        """The bracket around an external event (see the class docstring)."""
        ...

    def job_account(self, job: int) -> Account | None:
        """The Unix account job `job` runs as (None without a ``[users]`` table); AccountError
        when its user has none on this machine."""
        ...
