"""What a run's report records so that it can be repeated and read without the command line:
the versions it ran with, the environment's sites and the workload's statistics."""

from __future__ import annotations

import json
import platform
import sys
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from isthmus.model.environment import Environment
from isthmus.model.job import Job
from isthmus.model.jobtable import JobTable

#: The libraries whose versions can change a run's numbers or files (recorded when installed).
LIBRARIES = ("numpy", "pyarrow", "pydantic", "matplotlib", "typer", "rich")


def versions() -> dict[str, Any]:
    """isthmus's, Python's and the `LIBRARIES`' versions, and the platform."""
    from isthmus import __version__

    libraries: dict[str, str] = {}
    for name in LIBRARIES:
        try:
            libraries[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "isthmus": __version__,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "executable": sys.executable,
        "libraries": libraries,
    }


def environment_sites(env: Environment) -> dict[str, Any]:
    """The environment as a report shows it: its round interval and, per site, its kind, size
    (processors; for a cloud its VM bounds and cores per VM) and price."""
    sites = []
    for s in env.sites:
        row: dict[str, Any] = {
            "site": s.name,
            "kind": s.kind.value if hasattr(s.kind, "value") else str(s.kind),
            "processors": s.max_processors,
        }
        if s.is_cloud:
            row.update(
                min_vms=s.min_vms,
                max_vms=s.max_vms,
                cores_per_vm=s.cores_per_node,
                price_per_hour=s.price_per_hour,
                billing_increment_s=s.billing_increment,
                boot_time_s=s.boot_time,
            )
        else:
            row.update(nodes=s.nodes, cores_per_node=s.cores_per_node)
        sites.append(row)
    return {"name": env.name, "round_interval_s": env.round_interval, "sites": sites}


def workload_statistics(jobs: Sequence[Job]) -> dict[str, Any]:
    """The simulated jobs' statistics: count, users, submit span, sizes, runtimes (mean and
    percentiles, seconds), requested runtimes known, total area (processor-seconds)."""
    if isinstance(jobs, JobTable):
        c = jobs.cols
        submit, size, runtime = c.submit, c.size.astype(np.float64), c.runtime
        requested, users = c.requested, int(np.unique(c.user).size)
    else:
        submit = np.fromiter((j.submit for j in jobs), dtype=np.float64, count=len(jobs))
        size = np.fromiter((j.size for j in jobs), dtype=np.float64, count=len(jobs))
        runtime = np.fromiter((j.runtime for j in jobs), dtype=np.float64, count=len(jobs))
        requested = np.fromiter(
            (np.nan if j.requested_runtime is None else j.requested_runtime for j in jobs),
            dtype=np.float64,
            count=len(jobs),
        )
        users = len({j.user for j in jobs})
    n = int(submit.size)
    if not n:
        return {"jobs": 0}
    q = np.percentile(runtime, [25, 50, 75, 99])
    return {
        "jobs": n,
        "users": users,
        "first_submit_s": float(submit.min()),
        "last_submit_s": float(submit.max()),
        "span_days": float(submit.max() - submit.min()) / 86400.0,
        "size_min": int(size.min()),
        "size_mean": float(size.mean()),
        "size_max": int(size.max()),
        "runtime_mean_s": float(runtime.mean()),
        "runtime_q1_s": float(q[0]),
        "runtime_median_s": float(q[1]),
        "runtime_q3_s": float(q[2]),
        "runtime_p99_s": float(q[3]),
        "requested_runtime_known": int(np.count_nonzero(~np.isnan(requested) & (requested > 0))),
        "area_processor_seconds": float(np.dot(size, runtime)),
    }


def run_provenance(
    *, command: str, command_with_defaults: str, seed: int, env: Environment, workload_statistics: Mapping[str, Any]
) -> dict[str, Any]:
    """What a simulation's comparison.json records to be run and read again: the command as given
    and with every default, the seed, `versions()`, the environment's sites and the workload's
    statistics."""
    return {
        "command": command,
        "command_with_defaults": command_with_defaults,
        "seed": seed,
        "versions": versions(),
        "environment_detail": environment_sites(env),
        "workload_statistics": dict(workload_statistics),
    }


def write_provenance(path: Path, *, command: str, command_with_defaults: str, options: Mapping[str, Any]) -> Path:
    """Write an experiment's provenance.json (the command as given and with every default, the
    experiment's options as run, seeds included, and `versions()`), atomically; its path."""
    from isthmus.metrics.records import atomic_write

    doc = {
        "command": command,
        "command_with_defaults": command_with_defaults,
        "options": dict(options),
        "versions": versions(),
    }
    text = json.dumps(doc, indent=2, default=str) + "\n"

    def write(tmp: Path) -> None:
        tmp.write_text(text, encoding="utf-8")

    return atomic_write(path, write)
