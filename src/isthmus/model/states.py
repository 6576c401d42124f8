"""The state vocabularies of isthmus (jobs, bags' tasks, VMs, pilots), and the translation of
backends' native states into them.

The engine, the database, the REST API, the CLI and `isthmus validate` all use `JobState`;
its values are the lower-case words written in the database and shown to users. Terminal
states are listed once, in `TERMINAL`. TIMEOUT (a run killed at its requested runtime) is kept
apart from FAILED (a run that ended with an error), as Parsl's job states do.

A backend that talks to an external system (Slurm, Grid Engine, a cloud) translates the
system's native states through a table (`translate`); a native state missing from the table
becomes UNKNOWN with a warning, never an exception.

Every other kind of state has one enum here too: `TaskState` (a task of a bag of tasks),
`VmState` (a leased VM) and `PilotState` (a pilot node of the live manager). All are `StrEnum`s
whose values are the words stored in the database and sent over the wire, so a member compares
equal to its stored string. A vocabulary outside isthmus (the peer protocol's job states, the
per-job records' statuses) is derived from these enums or translated by a table beside them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import StrEnum

log = logging.getLogger("isthmus.states")


class JobState(StrEnum):
    """Where a job is in its life."""

    QUEUED = "queued"  # waiting in one of the engine's queues
    STARTING = "starting"  # a run was decided and handed to its site, not yet confirmed running
    RUNNING = "running"  # a run is executing
    COMPLETED = "completed"  # the last run ended by itself with success
    FAILED = "failed"  # the last run ended with an error (non-zero exit, refused by the site)
    TIMEOUT = "timeout"  # the last run was killed at its requested runtime
    CANCELLED = "cancelled"  # cancelled by its user or an admin
    LOST = "lost"  # the system lost track of it for good (its site and records are gone)
    REJECTED = "rejected"  # can never run here (larger than every site, no matching VM, ...)
    UNKNOWN = "unknown"  # a backend reported a native state this project does not know

    @property
    def terminal(self) -> bool:
        """True once the job will never run again."""
        return self in TERMINAL


TERMINAL: frozenset[JobState] = frozenset(
    {
        JobState.COMPLETED,
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.CANCELLED,
        JobState.LOST,
        JobState.REJECTED,
    }
)
"""States a job never leaves."""

TERMINAL_NAMES: tuple[str, ...] = tuple(sorted(s.value for s in TERMINAL))
"""The terminal states as the words stored in the database (for SQL `IN` clauses)."""


def translate(table: Mapping[str, JobState], native: str, *, system: str) -> JobState:
    """The `JobState` of a backend's `native` state through its `table`; UNKNOWN with a warning
    naming `system` when the table does not list it."""
    state = table.get(native)
    if state is None:
        log.warning("%s reported an unknown job state %r; treated as %s", system, native, JobState.UNKNOWN.value)
        return JobState.UNKNOWN
    return state


class TaskState(StrEnum):
    """Where a task of a bag of tasks is (the `bag_tasks` table's `state`)."""

    QUEUED = "queued"  # waiting in its bag's queue for a launcher to pull it
    RUNNING = "running"  # a launcher runs it
    DONE = "done"  # its last run exited with code 0
    FAILED = "failed"  # it failed with no retry left


class VmState(StrEnum):
    """Life of a leased VM (the engine's `Vm.state` and the `vms` table's `state`)."""

    BOOTING = "booting"  # leased, not yet usable
    READY = "ready"  # booted: runs jobs
    RELEASING = "releasing"  # released, shutting down (still billed until gone)
    GONE = "gone"  # shut down


class PilotState(StrEnum):
    """Where a pilot node of the live manager is.

    A node's state in memory is one of DOWN, QUEUED, SPAWNED, AWAITING, REGISTERED and EXITING;
    the `pilots` table records QUEUED, SPAWNED, REGISTERED, LOST, EXITED and DETACHED.
    """

    DOWN = "down"  # no pilot runs there
    QUEUED = "queued"  # its pilot job waits in a batch system, or the lease of its VM is not yet answered
    SPAWNED = "spawned"  # its pilot process was started and has not registered yet
    AWAITING = "awaiting"  # a pilot that ran before a restart is expected to register again
    REGISTERED = "registered"  # its pilot registered and sends heartbeats
    EXITING = "exiting"  # its pilot was told to stop
    LOST = "lost"  # its pilot missed its heartbeats or never registered in time
    EXITED = "exited"  # its pilot stopped
    DETACHED = "detached"  # the manager stopped and left the pilot running (reattached at restart)
