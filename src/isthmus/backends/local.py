"""Live site backends on the local machine: a cluster of pilot slots and a cloud whose VMs are pilots.

Both are ordinary engine backends: the engine validates a decision and calls them; they turn
it into messages for pilots through the manager (`PilotHub`). A *local cluster* has
`nodes` pilots of `cores_per_node` slots each, started by the manager and always present. A
*local cloud* leases a "VM" by starting one pilot after the site's boot delay and releases it
by stopping that pilot after the shutdown delay; capacity, idle times and which VMs a job
uses are the shared `CloudBackend` bookkeeping, so billing is the same as in simulation.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

from isthmus.agent.jobenv import pilot_environment
from isthmus.engine.backend import CloudBackend, SiteBackend, Vm
from isthmus.engine.state import JobEntry
from isthmus.model.site import Site

Slot = tuple[str, int]
"""(node key, slot index on that node)."""


def cluster_node_key(site: int, node: int) -> str:
    """The key of node `node` of cluster site `site`."""
    return f"{site}/n{node}"


def vm_node_key(site: int, vm_id: int) -> str:
    """The key of the pilot standing for VM `vm_id` of cloud site `site`."""
    return f"{site}/vm{vm_id}"


class PilotHub(Protocol):
    """What a live backend needs of the manager."""

    def launch(self, entry: JobEntry, site: int, slots: Sequence[Slot]) -> None:
        """Send the run of `entry` to the pilot of its first slot."""

    def kill(self, entry: JobEntry) -> None:
        """Tell the pilot running `entry` to kill it."""

    def released(self, entry: JobEntry) -> None:
        """The run of `entry` ended; forget its slots."""

    def vm_boot(self, site: int, vm: Vm, delay: float) -> None:
        """Start the pilot of a leased VM after `delay` seconds; report ready when it registers."""

    def vm_shutdown(self, site: int, vm: Vm, delay: float) -> None:
        """Stop the pilot of a released VM after `delay` seconds; report it gone."""

    def vm_discarded(self, site: int, vm_id: int) -> None:
        """A failed VM is gone: stop whatever is left of its pilot."""


class LocalCluster(SiteBackend):
    """A cluster site made of pilot slots on this machine, always present. Bags of tasks may hold
    its slots (each a launcher lane, isthmus.live.bag_tasks)."""

    holds_bags = True

    def __init__(self, index: int, site: Site, hub: PilotHub) -> None:
        super().__init__(index, site)
        self.hub = hub
        self.online = self.free = site.nodes * site.cores_per_node
        self.slots: dict[Slot, int] = {}  # occupied slot -> job id
        self.reattach: dict[int, list[Slot]] = {}  # job id -> recorded slots (restart recovery)
        self.all_slots: list[Slot] = [
            (cluster_node_key(index, n), c) for n in range(site.nodes) for c in range(site.cores_per_node)
        ]

    def expect_reattach(self, job_id: int, slots: list[Slot]) -> None:
        """The recorded slots of a run about to be re-attached after a manager restart."""
        self.reattach[job_id] = [(str(k), int(c)) for k, c in slots]

    def _take(self, entry: JobEntry) -> list[Slot]:
        recorded = self.reattach.pop(entry.job.id, None)
        chosen: list[Slot]
        if recorded is not None:
            chosen = [(k, c) for k, c in recorded]
        else:
            chosen = []
            need = entry.job.size
            for slot in self.all_slots:
                if slot not in self.slots:
                    chosen.append(slot)
                    if len(chosen) == need:
                        break
        for slot in chosen:
            self.slots[slot] = entry.job.id
        return chosen

    def take_bag_slot(self, bag_id: int) -> Slot:
        """A free slot for a processor of bag `bag_id` (the engine took it from `free` already)."""
        slot = next(s for s in self.all_slots if s not in self.slots)
        self.slots[slot] = bag_id
        return slot

    def give_bag_slot(self, slot: Slot) -> None:
        """A bag's processor on `slot` was given back (the engine added it to `free` already)."""
        self.slots.pop(slot, None)

    def _give_back(self, entry: JobEntry) -> None:
        job_id = entry.job.id
        for slot in [s for s, j in self.slots.items() if j == job_id]:
            del self.slots[slot]

    def start(self, entry: JobEntry, now: float) -> None:
        """Occupy `size` free slots (packed on as few nodes as possible) and launch the run."""
        slots = self._take(entry)
        self.free -= entry.job.size
        self._track_start(entry, now)
        self.hub.launch(entry, self.index, slots)  # the hub does not send it while re-attaching

    def stop(self, entry: JobEntry, now: float) -> None:
        """Kill the run and free its slots."""
        self.hub.kill(entry)
        self._release(entry)

    def finished(self, entry: JobEntry, now: float) -> None:
        """The run ended by itself: free its slots."""
        self._release(entry)

    def _release(self, entry: JobEntry) -> None:
        self._give_back(entry)
        self.free += entry.job.size
        self._track_stop(entry)
        self.hub.released(entry)


class LocalCloud(CloudBackend):
    """A cloud site on this machine: each leased VM is one pilot with `cores_per_node` slots."""

    def __init__(self, index: int, site: Site, hub: PilotHub) -> None:
        super().__init__(index, site)
        self.hub = hub
        self.reattach: dict[int, tuple[tuple[int, int], ...]] = {}  # job id -> recorded alloc

    def expect_reattach(self, job_id: int, slots: list[Slot]) -> None:
        """The recorded slots of a run about to be re-attached: it keeps the same VMs and cores."""
        alloc: dict[int, int] = {}
        for key, _c in slots:
            vm_id = int(str(key).split("/vm", 1)[1])
            alloc[vm_id] = alloc.get(vm_id, 0) + 1
        self.reattach[job_id] = tuple(alloc.items())

    def start(self, entry: JobEntry, now: float, alloc: tuple[tuple[int, int], ...] | None = None) -> None:
        """Shared VM bookkeeping; a re-attached run keeps the VMs it was recorded on."""
        recorded = self.reattach.pop(entry.job.id, None)
        super().start(entry, now, alloc if recorded is None else tuple(recorded))

    def finished(self, entry: JobEntry, now: float) -> None:
        """Shared bookkeeping, then forget the run's slots."""
        super().finished(entry, now)
        self.hub.released(entry)

    def stop(self, entry: JobEntry, now: float) -> None:
        """Kill (through `_kill`), shared bookkeeping, forget the run's slots."""
        super().stop(entry, now)
        self.hub.released(entry)

    @staticmethod
    def slots_of(site: int, alloc: Sequence[tuple[int, int]]) -> list[Slot]:
        """The pilot slots of an allocation ((vm id, cores), ...)."""
        return [(vm_node_key(site, vm_id), c) for vm_id, cores in alloc for c in range(cores)]

    def _boot(self, vm: Vm, now: float) -> None:
        self.hub.vm_boot(self.index, vm, self.site.boot_time)

    def _shutdown(self, vm: Vm, now: float) -> None:
        self.hub.vm_shutdown(self.index, vm, self.site.shutdown_time)

    def _discard(self, vm: Vm, now: float) -> None:
        self.hub.vm_discarded(self.index, vm.id)

    def _launch(self, entry: JobEntry, now: float) -> None:
        self.hub.launch(entry, self.index, self.slots_of(self.index, entry.alloc))

    def _kill(self, entry: JobEntry, now: float) -> None:
        self.hub.kill(entry)


# ------------------------------------------------------------------------- pilot processes


def spawn_pilot(
    *,
    url: str,
    node: str,
    slots: int,
    token: str,
    log_dir: Path,
    pilot_timeout: float,
    extra_env: dict[str, str] | None = None,
    extra_args: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start `python -m isthmus.agent` for `node` in its own session.

    The token goes through a pipe on the pilot's stdin, neither on its command line nor in its
    environment: its jobs, which run as the same user, could read both (`/proc/$PPID/environ`).
    Its environment is built (isthmus.agent.jobenv.pilot_environment), never the manager's.
    """
    log_dir.mkdir(parents=True, exist_ok=True)
    env = pilot_environment()  # not the manager's: its secrets would reach the pilot's jobs
    env.update(extra_env or {})
    cmd = [
        sys.executable,
        "-m",
        "isthmus.agent",
        "--url",
        url,
        "--node",
        node,
        "--slots",
        str(slots),
        "--timeout",
        str(pilot_timeout),
        "--token-stdin",
        *extra_args,  # how it reaches the manager: its CA file, or that plain HTTP is allowed
    ]
    safe = node.replace("/", "-")
    with open(log_dir / f"{safe}.log", "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            umask=0o022,  # its jobs' files get the usual modes, not the manager's 077
        )
    assert proc.stdin is not None
    try:
        proc.stdin.write(token.encode() + b"\n")
        proc.stdin.close()
    except BrokenPipeError:  # the pilot died at once: housekeeping sees it exit
        pass
    return proc


def pid_is_pilot(pid: int) -> bool:
    """True when `pid` is a live (not zombie) isthmus agent process on this machine."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
        if stat.rsplit(b")", 1)[1].split()[0] == b"Z":
            return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (OSError, IndexError):
        return False
    return b"isthmus.agent" in cmdline or (b"agent" in cmdline and b"isthmus" in cmdline)


def kill_run(pid: int, job: int, run: int) -> bool:
    """SIGKILL the process group of run `run` of job `job`, led by `pid`, if `pid` is still that
    run (its environment names the job and run: a recycled pid is left alone); True if killed."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            environ = f.read().split(b"\0")
    except OSError:
        return False
    if f"ISTHMUS_JOB_ID={job}".encode() not in environ or f"ISTHMUS_RUN={run}".encode() not in environ:
        return False
    kill_group(pid)
    return True


def kill_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group led by `pid`, ignoring a group already gone."""
    try:  # noqa: SIM105
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def still_pilot(pid: int, proc: subprocess.Popen[bytes] | None) -> bool:
    """True while `pid` is still the pilot: signalling its group cannot hit an unrelated process.

    A pilot this manager started is its child: its pid stays reserved until it is reaped, so
    Popen.poll() (which reaps) tells whether it is still ours. A pilot of an earlier incarnation
    is checked by its command line. Once a pid is reaped it can be reused at once, e.g. by a job
    that is the leader of its own process group: a delayed SIGKILL must not reach it.
    """
    if proc is not None:
        return proc.poll() is None
    return pid_is_pilot(pid)


def pilot_alive(pid: int | None, proc: subprocess.Popen[bytes] | None) -> bool:
    """True while the pilot process (started here as `proc`, or recorded as `pid`) runs."""
    if proc is not None:
        return proc.poll() is None
    return pid is not None and pid_is_pilot(pid)


def kill_marked_runs(marks: Sequence[tuple[int, int, str]]) -> int:
    """SIGKILL every process on this machine that belongs to one of `marks` ((job, run, nodefile)
    triples: its environment carries ISTHMUS_JOB_ID=job, ISTHMUS_RUN=run and ISTHMUS_NODEFILE=
    nodefile, a path in one manager's spool that no other manager's runs carry), with its process
    group; returns how many processes were found.

    This finds a run whose pilot died without killing it (a SIGKILLed pilot leaves its runs in
    their own sessions) whatever its pid, even one its pilot never reported. Two passes: a
    process forked during the first is caught by the second.
    """
    return kill_marked(
        (f"ISTHMUS_JOB_ID={job}", f"ISTHMUS_RUN={run}", f"ISTHMUS_NODEFILE={nodefile}") for job, run, nodefile in marks
    )


def kill_marked(marks: Iterable[Sequence[str]]) -> int:
    """SIGKILL every process on this machine whose environment carries all the ``NAME=value``
    entries of one of `marks`, with its process group (see `kill_marked_runs`); how many were found."""
    wanted = {tuple(m.encode() for m in mark) for mark in marks}
    if not wanted:
        return 0
    own = os.getpgrp()
    found: set[int] = set()
    for _ in range(2):
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            pid = int(name)
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = set(f.read().split(b"\0"))
            except OSError:
                continue
            if not any(all(m in environ for m in mark) for mark in wanted):
                continue
            found.add(pid)
            try:
                group = os.getpgid(pid)
            except OSError:
                continue
            if group != own:
                kill_group(group)
            try:  # noqa: SIM105
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return len(found)
