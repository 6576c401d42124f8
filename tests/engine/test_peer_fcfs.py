"""Strict FCFS agrees, job for job and to the second, with the reference peer schedules.

References: tests/data/peers (AccaSim strict FCFS; pyss and Alea give the same schedule on
these inputs, ../shared/peers/README.md). The workloads are read from ../shared/peers.
"""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from isthmus.config import single_cluster
from isthmus.model.events import EventKind
from isthmus.sim.runner import simulate
from isthmus.workloads.conversion import JobConverter
from isthmus.workloads.swf import iter_swf

ROOT = Path(__file__).resolve().parents[2]
PEERS = ROOT.parent / "shared" / "peers" / "workloads"
DATA = ROOT / "tests" / "data" / "peers"


def reference(name: str) -> dict[int, tuple[float, float]]:
    with gzip.open(DATA / f"accasim_{name}_fcfs.csv.gz", "rt") as f:
        return {int(r["job_id"]): (float(r["start"]), float(r["end"])) for r in csv.DictReader(f)}


@pytest.mark.parametrize("name", ["synth_10k", "nasa_ipsc_exact"])
def test_strict_fcfs_matches_the_peer_on_every_job(name):
    path = PEERS / f"{name}.swf.gz"
    if not path.exists():
        pytest.skip(f"peer workload {path} not found (../shared/peers is beside the project in CI)")
    converter = JobConverter(machine_size=128)
    jobs = [j for j in (converter.from_swf(r) for r in iter_swf(path)) if j is not None]
    result = simulate(single_cluster(128), jobs, "fcfs", "none")
    ours = {}
    for e in result.log:
        if e.kind is EventKind.START:
            ours[e.job] = [e.time, None]
        elif e.kind is EventKind.END:
            ours[e.job][1] = e.time
    ref = reference(name)
    assert set(ours) == set(ref)
    differing = [j for j in ref if ours[j][0] != ref[j][0]]
    assert differing == [], f"{len(differing)} start times differ, first {differing[:5]}"
    # End times differ only where the documented semantics differ: a 0-second job lasts
    # 1 second here, as in pyss (docs/workloads.md); AccaSim keeps 0.
    zero = {j.id for j in jobs if j.runtime == 1.0}
    assert all(ours[j][1] == ref[j][1] or (j in zero and ours[j][1] == ref[j][1] + 1) for j in ref)
