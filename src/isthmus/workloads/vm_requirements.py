"""VM requirements given to a workload's jobs (`isthmus simulate --vm`).

Traces (SWF, GWF) and the generators carry no VM requirements (Cloud Scheduler's job
attributes, cloud-scheduler-uvic.txt Appendix I); a simulation gives them by rule: every job,
or every job of one user, asks for the same VM. A rule is written
``[user=U:]key=value[,key=value...]`` with the keys of the REST API's ``vm`` object: vm_type,
image, cpu_arch, cores, memory_mb, storage_gb, network. Example: ``user=3:memory_mb=4096,cpu_arch=x86_64``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from isthmus.model.job import Job, VmRequirements

_INT_KEYS = ("cores", "memory_mb")
_FLOAT_KEYS = ("storage_gb",)
KEYS: tuple[str, ...] = tuple(f.name for f in fields(VmRequirements))


@dataclass(frozen=True, slots=True)
class VmRule:
    """Jobs of `user` (every job when None) ask for `vm`."""

    user: str | None
    vm: VmRequirements


def parse_vm_rule(text: str) -> VmRule:
    """The rule written in `text`; ValueError naming the bad part and what was expected."""
    user: str | None = None
    body = text.strip()
    head, sep, rest = body.partition(":")
    if sep and head.startswith("user="):
        user = head.removeprefix("user=").strip()
        if not user:
            raise ValueError(f"{text!r}: user= needs a name")
        body = rest
    values: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in body.split(","))):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise ValueError(f"{text!r}: expected key=value, got {part!r}")
        if key not in KEYS:
            raise ValueError(f"{text!r}: unknown key {key!r}; valid: {', '.join(KEYS)}")
        if key in _INT_KEYS:
            if not value.isdigit() or int(value) < 1:
                raise ValueError(f"{text!r}: {key} expects an integer >= 1, got {value!r}")
            values[key] = int(value)
        elif key in _FLOAT_KEYS:
            try:
                number = float(value)
            except ValueError:
                number = math.nan
            if not (number > 0 and math.isfinite(number)):
                raise ValueError(f"{text!r}: {key} expects a number > 0, got {value!r}")
            values[key] = number
        else:
            values[key] = value
    if not values:
        raise ValueError(f"{text!r}: no requirement given (keys: {', '.join(KEYS)})")
    return VmRule(user, VmRequirements(**values))  # type: ignore[arg-type]


def apply_vm_rules(jobs: Sequence[Job], rules: Sequence[VmRule]) -> list[Job]:
    """`jobs` with the VM requirements of the last rule matching each (a job no rule matches
    is unchanged)."""
    if not rules:
        return list(jobs)
    out = []
    for job in jobs:
        vm = job.vm
        for rule in rules:
            if rule.user is None or rule.user == job.user:
                vm = rule.vm
        out.append(job if vm is job.vm else replace(job, vm=vm))
    return out
