"""Fingerprints of event logs on the peer workloads and the KOALA-C traces: a change to the engine
that alters a schedule changes one.

`python tests/sim/log_fingerprints.py > tests/data/log_fingerprints.json` records them; the test
in test_log_fingerprints.py recomputes them and compares. Only the six core columns (time,
kind, job, site, vm, value) of the schedule's own events (SUBMIT to VM_GONE) are hashed, so added
columns and other kinds of events (decision statuses) do not change a fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
TRACES = ("CTC-SP2-1996-3.1-cln.swf.gz", "KTH-SP2-1996-2.1-cln.swf.gz", "SDSC-SP2-1998-4.2-cln.swf.gz", "LCG.swf.gz")
FIRST = 3000
#: (environment, allocation policy, params) run on the first jobs of every trace above
TRACE_CASES = (
    ("koala-c-multicloud", "ff", {}),
    ("koala-c-multicloud", "rr", {}),
    ("koala-c-multicloud", "sjf", {}),
    ("koala-c-multicloud", "sjf-ideal", {}),
    ("koala-c-multicloud", "hsdf", {}),
    ("koala-c-multicloud", "tags-sets", {"limits": [600.0]}),
    ("koala-c-multicluster:k=2", "tags-chain", {"limits": [600.0]}),
)
PEER_CASES = (("synth_10k", "fcfs"), ("synth_10k", "easy"), ("nasa_ipsc_exact", "easy"))
OLD_KINDS = range(12)  # SUBMIT .. VM_GONE


def fingerprint(log: object) -> str:
    """sha256 over (time, kind, job, site, vm, value) of every event of kinds SUBMIT to VM_GONE, in order."""
    cols = log.columns()  # type: ignore[attr-defined]
    h = hashlib.sha256()
    pack = struct.Struct("<dbqhid").pack
    for t, k, j, s, v, x in zip(
        cols["time"], cols["kind"], cols["job"], cols["site"], cols["vm"], cols["value"], strict=True
    ):
        if k in OLD_KINDS:
            h.update(pack(t, k, j, s, v, x))
    return h.hexdigest()


def cases() -> list[tuple[str, str, str, dict[str, object]]]:
    """(case id, workload path, environment, allocation, params)."""
    out = []
    for name, alloc in PEER_CASES:
        out.append(
            (f"{name}/{alloc}", str(SHARED / "peers" / "workloads" / f"{name}.swf.gz"), "cluster:128", alloc, {})
        )
    for trace in TRACES:
        for env, alloc, params in TRACE_CASES:
            out.append(
                (
                    f"{trace.split('-')[0].split('.')[0]}/{env}/{alloc}",
                    str(SHARED / "traces" / trace),
                    env,
                    alloc,
                    params,
                )
            )
    return out  # type: ignore[return-value]


def run_case(path: str, env_name: str, alloc: str, params: dict[str, object]) -> str:
    """Simulate one case and return its fingerprint."""
    from isthmus.config import load_environment, single_cluster
    from isthmus.experiments.runner import prepared_jobs
    from isthmus.model.environment import PolicyChoice
    from isthmus.sim.runner import simulate

    if env_name.startswith("cluster:"):
        env = single_cluster(int(env_name.split(":")[1]))
        from isthmus.workloads.conversion import JobConverter
        from isthmus.workloads.swf import iter_swf

        converter = JobConverter(machine_size=128)
        jobs = [j for j in (converter.from_swf(r) for r in iter_swf(path)) if j is not None]
        prov = "none"
    else:
        env = load_environment(env_name)
        jobs = list(prepared_jobs(path, 32, FIRST, "keep"))  # the reading the fingerprints were made with
        prov = None
    result = simulate(env, jobs, PolicyChoice(alloc, params), prov)
    return fingerprint(result.log)


if __name__ == "__main__":
    json.dump({cid: run_case(p, e, a, prm) for cid, p, e, a, prm in cases()}, sys.stdout, indent=1, sort_keys=True)
    print()
