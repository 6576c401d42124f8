"""A pilot position as the manager's pilot hub and the site backends share it: `Node`.

A node is one cluster node, one pilot job's node or one cloud VM; the hub keeps one per
position (its pilot's state, deadline and outbox of commands), and the site backends create
and update them (a pilot job queued in the batch system, a VM whose lease was answered).
"""

from __future__ import annotations

import asyncio
import math
import subprocess
from dataclasses import dataclass, field
from typing import Any

from isthmus.model.states import PilotState


@dataclass
class Node:
    """One pilot position: a cluster node or a cloud VM; at most one pilot process serves it."""

    key: str
    site: int
    slots: int
    vm: int | None = None
    remote: bool = False  # its pilot is a job of a batch system, on another node: never signalled from here
    state: PilotState = PilotState.DOWN  # in memory: DOWN, QUEUED, SPAWNED, AWAITING, REGISTERED or EXITING
    pilot_id: str | None = None
    pid: int | None = None
    proc: subprocess.Popen[bytes] | None = None
    deadline: float = math.inf
    last_seen: float = 0.0
    seq: int = 0
    outbox: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    waiter: asyncio.Event | None = None
    host: str = ""
    # highest command sequence number handed out in a report answer, and when: the long poll
    # does not repeat those commands unless they stay unacknowledged
    # for the hub's RESEND_AFTER seconds
    sent: int = 0
    sent_at: float = 0.0
    # a VM's first pilot, not registered yet: if it is lost, the VM failed to boot
    booting: bool = False

    def send(self, cmd: dict[str, Any]) -> int:
        """Queue a command for the pilot; returns its sequence number."""
        self.seq += 1
        self.outbox.append((self.seq, cmd))
        if self.waiter is not None:
            self.waiter.set()
        return self.seq
