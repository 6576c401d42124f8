"""A live cloud site whose VMs are leased from a real IaaS provider (Apache Libcloud).

The engine's VM bookkeeping is the simulator's (`CloudBackend`, through `LocalCloud`); this
backend turns a lease into a provider call and a release into a termination, both off the loop
through the site's `SiteWorker` (Cloud Scheduler, seeds/cloud-scheduler-uvic.txt §3.2: VMs
booted with a worker that joins the pool, retired when the work is done):

- a leased VM is recorded (the engine's lease, persisted) before the provider is called, and
  the provider's instance id is recorded as soon as it answers; the instance carries the
  manager's id and the VM's key as tags (and the key as EC2 client token);
- its user data starts the pilot (`agent_command`) with the manager's address, the VM's node
  key and its pilot token; the VM is ready when that pilot registers. A VM whose pilot has not
  registered within `boot_timeout` is an error VM: terminated, counted (`error_vms`), and the
  provisioning policy leases a replacement; a ready VM whose pilot is lost is a failed VM too
  (its runs are requeued);
- a refused lease: capacity and quota errors back off this site with growing delays (30 s,
  doubling up to 15 min) during which it leases nothing, so that provisioning turns to other
  sites; authentication and invalid-request errors stop leasing on the site until the manager
  restarts (the site is unavailable, with the provider's message); timeouts and other
  transient errors only fail that VM;
- reconciliation at start and every `RECONCILE_EVERY` seconds: the provider's instances tagged
  with this manager's id are matched with the recorded VMs by key: a VM whose lease answer was
  lost is adopted, a VM the provider no longer has (or has terminated) fails (its runs are
  requeued), and an instance no live VM claims (a duplicate, a VM released while the manager
  was down) is terminated: nothing leased is forgotten or billed twice.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from isthmus.backends.api import CloudProvider, Instance, LeaseRequest
from isthmus.backends.errors import (
    AuthenticationError,
    CapacityError,
    InvalidRequestError,
    QuotaError,
    SiteError,
)
from isthmus.backends.external import WorkerThread
from isthmus.backends.host import SiteHost
from isthmus.backends.local import LocalCloud, vm_node_key
from isthmus.backends.node import Node
from isthmus.engine.backend import Vm
from isthmus.engine.clock import EV_VM_GONE
from isthmus.model.site import Site
from isthmus.model.states import PilotState, VmState

log = logging.getLogger("isthmus.backends.cloud_site")

RECONCILE_EVERY = 60.0
"""Seconds between two reconciliations of the recorded VMs with the provider's instances."""

BACKOFF_FIRST, BACKOFF_MAX = 30.0, 900.0
"""Seconds a site leases nothing after a capacity or quota error, doubling up to the maximum."""

LEASE_ANSWER_GRACE = 10.0
"""Seconds a recorded VM whose instance is not found waits before it is leased again (a lease
request sent just before a crash may still be under way at the provider)."""

RETRY_RELEASE = 30.0
"""Seconds before a termination the provider refused is tried again."""

PATIENCE_TAG = "isthmus-lease-patience"
"""The tag of a VM whose boot script has the dead-man switch: its patience in seconds."""

RELEASE_WAIT = 120.0
"""Seconds a releasing stop waits for the provider to show every instance terminated."""


def user_data(
    agent_command: str,
    url: str,
    key: str,
    slots: int,
    pilot_timeout: float,
    token: str,
    ca_pem: str | None = None,
    insecure_http: bool = False,
    lease_patience: float | None = None,
) -> str:
    """The VM's boot script: start the pilot for node `key`, its token on stdin (not in its
    command line or environment); `ca_pem`, the CA certificate it verifies the manager against,
    is written to a file of its own first.

    With `lease_patience` (the dead-man switch) the pilot gives its manager that many seconds
    to answer (instead of `pilot_timeout`), and once it has ended, for whatever reason, the VM
    powers itself off with ``shutdown -h now``; leased with instance-initiated shutdown
    behaviour "terminate", the instance is then terminated and billing ends even when its
    manager never comes back."""
    ca = "ca=$(mktemp) || exit 1\ncat > \"$ca\" <<'ISTHMUS_CA'\n" + ca_pem.strip() + "\nISTHMUS_CA\n" if ca_pem else ""
    tls = (' --ca-file "$ca"' if ca_pem else "") + (" --insecure-http" if insecure_http else "")
    timeout = pilot_timeout if lease_patience is None else lease_patience
    script = (
        "#!/bin/sh\n"
        f"# isthmus pilot of VM {key}\n"
        f"{ca}"
        f"{'exec ' if lease_patience is None else ''}{agent_command} --url {url} --node {key} --slots {slots} "
        f"--timeout {timeout:g}{tls} --token-stdin <<'ISTHMUS_TOKEN'\n"
        f"{token}\n"
        "ISTHMUS_TOKEN\n"
    )
    if lease_patience is not None:
        script += (
            f"# dead-man switch: the pilot has ended (its manager unheard of for {lease_patience:g} s, or told\n"
            "# to exit): nothing runs on this VM any more, so it powers off (and is terminated)\n"
            "shutdown -h now\n"
        )
    return script


class ProviderCloud(WorkerThread, LocalCloud):
    """A cloud site on a real provider (see the module docstring)."""

    def __init__(self, index: int, site: Site, make: Callable[[str], CloudProvider], ctx: SiteHost) -> None:
        super().__init__(index, site, ctx.hub)
        assert site.provider is not None
        self.ctx = ctx
        self.settings = site.provider
        self._make = make
        self.provider: CloudProvider | None = None
        self.instance_of: dict[int, str] = {}  # vm id -> provider instance id
        self.error_vms = 0  # VMs that failed to boot or were refused, replaced by provisioning
        self.last_error = ""
        self.backoff_until = 0.0
        self._backoff = 0.0
        self._stopped_leasing = ""  # why leasing stopped for good (authentication, invalid request)
        self._leasing: set[int] = set()  # VMs whose lease call is under way
        self._unanswered: dict[int, float] = {}  # recorded VMs with no instance found yet: since when

    # ------------------------------------------------------------------------ plumbing

    @property
    def cloud(self) -> CloudProvider:
        """The provider (connected by `begin`)."""
        if self.provider is None:
            raise RuntimeError(f"site {self.name} is used before the manager started it")
        return self.provider

    def lease_refusal(self, now: float) -> str:
        """Why no VM can be leased now: leasing stopped (authentication, invalid request) or
        backing off after a capacity or quota error; VMs already there keep running jobs."""
        if self._stopped_leasing:
            return f"leasing stopped: {self._stopped_leasing}"
        left = self.backoff_until - time.time()
        return f"backing off for {left:.0f} s after: {self.last_error}" if left > 0 else ""

    def restore(self, rows: Sequence[dict[str, Any]], now: float) -> None:
        """PilotLauncher: nothing before recovery; `begin` sets the VMs' pilots up."""

    def begin(self, manager_id: str) -> None:
        """Connect as manager `manager_id`; set recorded VMs' pilots up; reconcile."""
        self.provider = self._make(manager_id)
        now = time.time()
        for vm_id, pid in self.ctx.store.vm_provider_ids(self.index).items():
            self.instance_of[vm_id] = pid
        for vm in list(self.vms.values()):
            key = vm_node_key(self.index, vm.id)
            node = self.ctx.hub.nodes.get(key)
            if node is None:
                continue
            node.remote = True
            if vm.state is VmState.READY:  # its pilot re-registers
                node.state = PilotState.AWAITING
                node.deadline = now + self.ctx.config.reattach_timeout
            elif vm.state is VmState.BOOTING:
                node.booting = True
                node.state = PilotState.SPAWNED if vm.id in self.instance_of else PilotState.QUEUED
                node.deadline = vm.leased_at + self.settings.boot_timeout if vm.id in self.instance_of else math.inf
        self.reconcile()

    # -------------------------------------------------------------------- VM lifecycle

    def _boot(self, vm: Vm, now: float) -> None:
        key = vm_node_key(self.index, vm.id)
        node = Node(key, self.index, vm.cores, vm=vm.id, remote=True)
        node.booting = True
        self.ctx.hub.nodes[key] = node
        self.ctx.hub.spawn(node)  # makes its token, then calls launch_pilot

    def launch_pilot(self, node: Node, token: str) -> None:
        """PilotLauncher: lease the VM of `node` with a boot script that starts its pilot; the
        provider is called after the lease is persisted."""
        assert node.vm is not None
        cfg = self.ctx.config
        ca_pem = cfg.pilot_ca_file.read_text() if cfg.pilot_ca_file is not None else None
        script = user_data(
            self.settings.agent_command,
            cfg.url,
            node.key,
            node.slots,
            cfg.pilot_timeout,
            token,
            ca_pem,
            cfg.insecure_http,
            self.settings.lease_patience,
        )
        size, image = self.size_and_image(node.vm)
        patience = self.settings.lease_patience
        tags = {PATIENCE_TAG: f"{patience:g}"} if patience is not None else {}
        request = LeaseRequest(node.key, size, image, tags=tags, user_data=script)
        node.state = PilotState.QUEUED
        node.deadline = math.inf
        vm_id = node.vm
        self.ctx.later(0.0, self._lease, request, vm_id)

    def size_and_image(self, vm_id: int) -> tuple[str, str]:
        """The provider's size id and image id for VM `vm_id`: those of its instance type and
        image (Cloud Scheduler, Appendix I: the VM a job asked for), the provider settings'
        ones for a site without declared types and images."""
        vm = self.vms.get(vm_id)
        site = self.site
        size = self.settings.instance_type
        if site.instance_types:
            size = site.types[vm.type if vm is not None else 0].size_id
        image = self.settings.image
        if site.images:
            image = site.images[vm.image if vm is not None else 0].image_id
        return size, image

    def _lease(self, request: LeaseRequest, vm_id: int) -> None:
        self._leasing.add(vm_id)
        self.worker.call(self.cloud.lease, [request], done=lambda r: self._leased(request.key, vm_id, r))

    def _leased(self, key: str, vm_id: int, result: list[Instance | SiteError] | SiteError) -> None:
        self._leasing.discard(vm_id)
        outcome = result if isinstance(result, SiteError) else result[0]
        vm = self.vms.get(vm_id)
        if isinstance(outcome, SiteError):
            self._refused(outcome)
            if vm is not None and vm.state is VmState.BOOTING:
                with self.ctx.external():  # `_discard` counts it as an error VM (its node is booting)
                    self.ctx.engine.vm_failed(self.index, vm_id, f"lease refused: {outcome}")
            else:
                self.error_vms += 1
            return
        self._backoff = 0.0
        self.instance_of[vm_id] = outcome.provider_id
        try:
            self.ctx.store.set_vm_provider_id(self.index, vm_id, outcome.provider_id)
        except Exception as exc:  # found again by its tags at the next reconciliation
            log.warning("VM %s: could not record instance %s: %s", key, outcome.provider_id, exc)
        if vm is None or vm.state is not VmState.BOOTING:  # released meanwhile: terminate it
            self._terminate(outcome.provider_id, vm_id)
            return
        node = self.ctx.hub.nodes.get(key)
        if node is not None and node.state == PilotState.QUEUED:
            node.state = PilotState.SPAWNED
            node.deadline = time.time() + self.settings.boot_timeout
            self.ctx.hub.set_pilot_row(node, PilotState.SPAWNED)
        log.info("site %s: VM %s is instance %s", self.name, key, outcome.provider_id)

    def _refused(self, err: SiteError) -> None:
        self.last_error = str(err)
        if isinstance(err, CapacityError | QuotaError):
            self._backoff = min(BACKOFF_MAX, self._backoff * 2 if self._backoff else BACKOFF_FIRST)
            self.backoff_until = time.time() + self._backoff
            log.warning("site %s: %s; no lease for %.0f s", self.name, err, self._backoff)
        elif isinstance(err, AuthenticationError | InvalidRequestError):
            self._stopped_leasing = str(err)
            log.error("site %s: %s; leasing stopped until the manager restarts", self.name, err)
        else:
            log.warning("site %s: lease failed: %s", self.name, err)

    def registered(self, node: Node) -> None:
        """PilotLauncher: the VM's pilot registered (the hub marks the VM ready)."""

    def pilot_lost(self, node: Node) -> None:
        """PilotLauncher: a ready VM's pilot was lost: the VM failed (its runs already are lost);
        nothing restarts a pilot inside a remote VM, so it is terminated and provisioning decides."""
        if node.vm is not None and node.vm in self.vms and not self.ctx.stopping:
            self.ctx.engine.vm_failed(self.index, node.vm, "its pilot was lost")

    def _shutdown(self, vm: Vm, now: float) -> None:
        """Released: tell its pilot to exit, terminate the instance; gone once the provider agrees."""
        node = self.ctx.hub.nodes.pop(vm_node_key(self.index, vm.id), None)
        if node is not None:
            self.ctx.hub.retire(node, "VM released")
        pid = self.instance_of.get(vm.id)
        if pid is None:  # never leased (or its answer is pending): gone now
            self.ctx.later(0.0, self._gone, vm.id)
            return
        self._terminate(pid, vm.id)

    def _discard(self, vm: Vm, now: float) -> None:
        """A failed VM: stop its pilot and terminate its instance."""
        node = self.ctx.hub.nodes.pop(vm_node_key(self.index, vm.id), None)
        if node is not None:
            if node.booting:
                self.error_vms += 1
            self.ctx.hub.retire(node, "VM failed")
        pid = self.instance_of.get(vm.id)
        if pid is not None:
            self._terminate(pid, vm.id)

    def _terminate(self, pid: str, vm_id: int) -> None:
        self.worker.call(self.cloud.release, [pid], done=lambda r: self._terminated(pid, vm_id, r))

    def _terminated(self, pid: str, vm_id: int, result: dict[str, SiteError | None] | SiteError) -> None:
        err = result if isinstance(result, SiteError) else result.get(pid)
        if err is not None:
            log.warning("site %s: could not terminate %s (%s); trying again", self.name, pid, err)
            self.ctx.later(RETRY_RELEASE, self._terminate, pid, vm_id)
            return
        self.instance_of.pop(vm_id, None)
        self._gone(vm_id)

    def _gone(self, vm_id: int) -> None:
        vm = self.vms.get(vm_id)
        if vm is not None and vm.state is VmState.RELEASING:
            with self.ctx.external():
                self.ctx.engine.handle(EV_VM_GONE, self.index, vm_id)

    # ------------------------------------------------------------------------ release

    def release_all(self, timeout: float = RELEASE_WAIT, poll: float = 1.0) -> list[str]:
        """At a releasing stop (blocking, after `close`): terminate every instance of this site
        tagged with the manager's id, then list again until the provider shows none of them
        alive (an instance a lease still under way adds is terminated too). Returns the
        instances terminated; the ones still alive after `timeout` are logged, and the next
        start's reconciliation terminates them. The VMs stay recorded: the next start finds
        their instances gone and fails them (their runs were requeued or ended already)."""
        if self.provider is None:
            return []
        prefix = f"{self.index}/vm"
        deadline = time.time() + timeout
        asked: set[str] = set()
        alive: list[str] = []
        while True:
            try:
                listed = self.cloud.instances()
            except SiteError as exc:
                log.warning("site %s: cannot list its instances to release them: %s", self.name, exc)
                listed = None
            if listed is not None:
                alive = [
                    i.provider_id
                    for i in listed
                    if i.state != "terminated" and i.tags.get("isthmus-vm", "").startswith(prefix)
                ]
                if not alive:
                    break
                fresh = [pid for pid in alive if pid not in asked]
                if fresh:
                    for pid, err in self.cloud.release(fresh).items():
                        if err is None:
                            asked.add(pid)
                        else:
                            log.warning("site %s: could not terminate %s: %s", self.name, pid, err)
            if time.time() >= deadline:
                log.error("site %s: instance(s) still alive after the release: %s", self.name, alive)
                break
            time.sleep(poll)
        if asked:
            log.warning("site %s: released %d instance(s) at the stop: %s", self.name, len(asked), sorted(asked))
        return sorted(asked)

    # ------------------------------------------------------------------- reconciliation

    def reconcile(self) -> None:
        """Compare the provider's instances of this manager with the recorded VMs (off the loop)."""
        if self.ctx.stopping:
            return
        self.worker.call(self.cloud.instances, done=self._reconciled)

    def _reconciled(self, result: list[Instance] | SiteError) -> None:
        self.ctx.later(RECONCILE_EVERY, self.reconcile)
        if isinstance(result, SiteError):
            log.warning("site %s: cannot list its instances: %s", self.name, result)
            self.last_error = str(result)
            return
        prefix = f"{self.index}/vm"
        alive = [i for i in result if i.state != "terminated"]
        by_key: dict[str, list[Instance]] = {}
        for inst in alive:
            by_key.setdefault(inst.tags.get("isthmus-vm", ""), []).append(inst)
        claimed: set[str] = set()
        with self.ctx.external():
            for vm in list(self.vms.values()):
                key = vm_node_key(self.index, vm.id)
                found = by_key.get(key, [])
                pid = self.instance_of.get(vm.id)
                if vm.state is VmState.RELEASING:
                    if pid is not None:
                        claimed.add(pid)  # being terminated
                    continue
                if pid is None and found:  # the lease answer was lost: adopt the instance
                    pid = found[0].provider_id
                    self.instance_of[vm.id] = pid
                    self.ctx.store.set_vm_provider_id(self.index, vm.id, pid)
                    node = self.ctx.hub.nodes.get(key)
                    if node is not None and node.state == PilotState.QUEUED:
                        node.state = PilotState.SPAWNED
                        node.deadline = vm.leased_at + self.settings.boot_timeout
                    log.warning("site %s: VM %s adopted instance %s", self.name, key, pid)
                if pid is not None and pid in {i.provider_id for i in found}:
                    claimed.add(pid)
                elif pid is not None:
                    self.ctx.engine.vm_failed(self.index, vm.id, f"the provider no longer has instance {pid}")
                elif vm.state is VmState.BOOTING and vm.id not in self._leasing:
                    # recorded, no instance found: the manager stopped before or while asking. A
                    # request sent just before a crash may still be under way at the provider, so
                    # it is leased again (with the same key and client token) only once a second
                    # listing, LEASE_ANSWER_GRACE later, still does not show it
                    first = self._unanswered.setdefault(vm.id, time.time())
                    if time.time() - first < LEASE_ANSWER_GRACE:
                        self.ctx.later(LEASE_ANSWER_GRACE, self.reconcile)
                        continue
                    self._unanswered.pop(vm.id, None)
                    node = self.ctx.hub.nodes.get(key)
                    if node is not None:
                        log.warning("site %s: VM %s was never leased: leasing it now", self.name, key)
                        self.ctx.hub.spawn(node)
            stray = [
                i.provider_id
                for i in alive
                if i.provider_id not in claimed and i.tags.get("isthmus-vm", "").startswith(prefix)
            ]
            if stray:
                log.warning("site %s: terminating instance(s) no live VM claims: %s", self.name, stray)
                self.worker.call(self.cloud.release, stray, done=lambda r: None)

    def describe(self) -> dict[str, object]:
        """The cloud's figures (`CloudBackend.describe`) and its provider: driver, VMs that
        failed to boot or were refused, the last error, and whether it leases now ("ok") or why not."""
        d = super().describe()
        d["provider"] = {
            "driver": self.settings.driver,
            "error_vms": self.error_vms,
            "last_error": self.last_error,
            "leasing": self.lease_refusal(time.time()) or "ok",
        }
        return d
