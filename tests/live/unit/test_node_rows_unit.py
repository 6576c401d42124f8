"""`isthmus nodes` (GET /nodes): each pilot position as sinfo -N shows a node, with the
processors its runs' slots and bag lanes hold (hand-made positions)."""

from __future__ import annotations

from isthmus.backends.node import Node
from isthmus.live.pilots import Assignment
from isthmus.live.pool_view import node_rows
from isthmus.model.environment import Environment
from isthmus.model.site import Site, SiteKind
from isthmus.model.states import PilotState

ENV = Environment(
    name="nodes",
    sites=(Site("c1", nodes=3, cores_per_node=4), Site("cloud", kind=SiteKind.CLOUD, max_vms=2, cores_per_node=2)),
)


def test_each_position_with_its_state_and_processors() -> None:
    nodes = {
        "0/n2": Node("0/n2", 0, 4, state=PilotState.REGISTERED, host="h2"),
        "0/n0": Node("0/n0", 0, 4, state=PilotState.REGISTERED, host="h0"),
        "0/n1": Node("0/n1", 0, 4, state=PilotState.REGISTERED, host="h1"),
        "1/vm0": Node("1/vm0", 1, 2, vm=0, state=PilotState.DOWN),
        "1/vm1": Node("1/vm1", 1, 2, vm=1, state=PilotState.EXITING, host="vm1"),
    }
    runs = [
        Assignment(job=1, run=0, site=0, slots=[("0/n0", 0), ("0/n0", 1), ("0/n1", 0)]),
        Assignment(job=2, run=0, site=0, slots=[("0/n1", 1), ("0/n1", 2)]),
    ]
    lanes = {"0/n1": 1, "0/n2": 4}
    rows = node_rows(nodes, runs, lambda key: lanes.get(key, 0), ENV)
    assert [(r["node"], r["site"], r["state"], r["host"]) for r in rows] == [
        ("0/n0", "c1", "mixed", "h0"),
        ("0/n1", "c1", "allocated", "h1"),  # 3 slots of runs and a bag lane
        ("0/n2", "c1", "allocated", "h2"),  # bag lanes only
        ("1/vm0", "cloud", "booting", None),  # its pilot starts when the VM has booted
        ("1/vm1", "cloud", "draining", "vm1"),
    ]
    assert [(r["cpus_allocated"], r["cpus_idle"], r["cpus_total"]) for r in rows] == [
        (2, 2, 4),
        (4, 0, 4),
        (4, 0, 4),
        (0, 0, 2),  # a position whose pilot is not serving offers nothing
        (0, 0, 2),
    ]
    more = {
        "0/n0": Node("0/n0", 0, 4, state=PilotState.REGISTERED),
        "0/n1": Node("0/n1", 0, 4, state=PilotState.QUEUED),  # a pilot job waiting in its batch system
        "0/n2": Node("0/n2", 0, 4, state=PilotState.DOWN),
    }
    assert [r["state"] for r in node_rows(more, [], lambda key: 0, ENV)] == ["idle", "queued", "down"]
