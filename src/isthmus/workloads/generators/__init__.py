"""Seeded, deterministic synthetic workload models, by name.

:data:`MODELS` maps each model name to a :class:`Model` (parameters with defaults, the
function that draws the jobs, where the model comes from). :func:`generate` builds a
:class:`~isthmus.workloads.workload.Workload` from a model name, a seed (or a
``numpy.random.Generator``) and parameter overrides; the same seed and parameters always
give the same jobs, and no global random state is touched.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from isthmus.model.job import Job
from isthmus.workloads.errors import WorkloadError
from isthmus.workloads.generators.dissertation import (
    BurstyParams,
    IncreasingParams,
    StreamParams,
    UniformParams,
    generate_bursty,
    generate_increasing,
    generate_stream,
    generate_uniform,
)
from isthmus.workloads.generators.lublin import LublinParams, generate_lublin
from isthmus.workloads.generators.params import describe_params, parse_params, spec_string, split_spec
from isthmus.workloads.seeds import DEFAULT_SEED
from isthmus.workloads.swf import SwfHeader
from isthmus.workloads.workload import Workload

DISSERTATION = (
    "D. Villegas, Interoperable Resource Brokering with Policy-based Provisioning and Job Allocation, "
    "PhD dissertation, FIU, 2012"
)
LUBLIN_CITATION = (
    "U. Lublin, D. G. Feitelson, The workload on parallel supercomputers: modeling the "
    "characteristics of rigid jobs, JPDC 63(11):1105-1122, 2003"
)


@dataclass(frozen=True, slots=True)
class Model:
    """A named workload model: default parameters, the job generator, and its source.

    `build(params, rng)` returns the jobs; `machine(params)` the processors the workload is
    meant for (written as MaxProcs).
    """

    name: str
    summary: str
    citation: str
    defaults: Any
    build: Callable[[Any, np.random.Generator], list[Job]]
    machine: Callable[[Any], int | None]

    def params(self, overrides: Mapping[str, str] | None = None, **values: Any) -> Any:
        """The default parameters with text `overrides` (from a spec) and typed `values` applied."""
        params = parse_params(type(self.defaults), dict(overrides or {}), self.defaults)
        return dataclasses.replace(params, **values) if values else params


MODELS: dict[str, Model] = {
    "lublin": Model(
        "lublin",
        "Lublin & Feitelson (2003) rigid parallel jobs (batch), daily cycle; the default workload",
        LUBLIN_CITATION,
        LublinParams(),
        generate_lublin,
        lambda p: p.machine,
    ),
    "uniform": Model(
        "uniform",
        "hour-long Poisson stream, ~70% load, runtimes 47 s ± 41.1 s (dissertation §6.4.3)",
        f"{DISSERTATION}, §6.4.3",
        UniformParams(),
        generate_uniform,
        lambda p: p.procs,
    ),
    "increasing": Model(
        "increasing",
        "hour-long, load rising in steps, ~50% average, runtimes 47 s ± 41.1 s (§6.4.3)",
        f"{DISSERTATION}, §6.4.3",
        IncreasingParams(),
        generate_increasing,
        lambda p: p.procs,
    ),
    "bursty": Model(
        "bursty",
        "hour-long, spikes to 170% over mild load, ~15% average, runtimes 47 s ± 41.1 s (§6.4.3)",
        f"{DISSERTATION}, §6.4.3",
        BurstyParams(),
        generate_bursty,
        lambda p: p.procs,
    ),
    "periodic": Model(
        "periodic",
        "1,000 jobs, gaps 60 s -> 5 s -> 60 s four times, runtimes 47 s ± 41.1 s (§6.5, §6.5.4)",
        f"{DISSERTATION}, §6.4.3, §6.5.4",
        StreamParams(),
        generate_stream,
        lambda p: p.procs,
    ),
    "sr25": Model(
        "sr25",
        "1,000 jobs, 25% short (10 s) and 75% long (1 h), periodic arrivals (§6.5.3)",
        f"{DISSERTATION}, §6.5.3",
        StreamParams(short_fraction=0.25),
        generate_stream,
        lambda p: p.procs,
    ),
    "sr50": Model(
        "sr50",
        "1,000 jobs, 50% short (10 s) and 50% long (1 h), periodic arrivals (§6.5.3, §6.5.4)",
        f"{DISSERTATION}, §6.5.3, §6.5.4",
        StreamParams(short_fraction=0.5),
        generate_stream,
        lambda p: p.procs,
    ),
    "sr75": Model(
        "sr75",
        "1,000 jobs, 75% short (10 s) and 25% long (1 h), periodic arrivals (§6.5.3)",
        f"{DISSERTATION}, §6.5.3",
        StreamParams(short_fraction=0.75),
        generate_stream,
        lambda p: p.procs,
    ),
}

#: The workload used when the user names none.
DEFAULT_MODEL = "lublin"


def model_names() -> list[str]:
    """The valid model names, in registry order."""
    return list(MODELS)


def get_model(name: str) -> Model:
    """The model called `name` (case-insensitive); WorkloadError listing the valid names if none."""
    model = MODELS.get(name.strip().lower())
    if model is None:
        raise WorkloadError(f"unknown workload model {name!r}; valid models: {', '.join(MODELS)}")
    return model


def generate(
    spec: str,
    *,
    seed: int | None = DEFAULT_SEED,
    rng: np.random.Generator | None = None,
    jobs: int | None = None,
) -> Workload:
    """Generate the workload of a model spec such as ``lublin`` or ``sr50:arrivals=bursty``.

    The random numbers come from `rng` when given, else from ``numpy.random.default_rng(seed)``
    (a ``seed=`` parameter in the spec wins over the argument). `jobs` overrides the model's
    job count. Raises WorkloadError for an unknown model or parameter.
    """
    try:
        name, raw = split_spec(spec)
    except ValueError as exc:
        raise WorkloadError(str(exc), source=spec) from None
    model = get_model(name)
    if "seed" in raw:
        seed_text = raw.pop("seed")
        try:
            seed = int(seed_text)
        except ValueError:
            raise WorkloadError(f"seed must be an integer, got {seed_text!r}", source=spec) from None
    try:
        params = model.params(raw)
        if jobs is not None:
            params = dataclasses.replace(params, jobs=jobs)
        generator = rng if rng is not None else np.random.default_rng(seed)
        job_list = model.build(params, generator)
    except ValueError as exc:
        raise WorkloadError(f"{model.name}: {exc}", source=spec) from None
    full_spec = spec_string(model.name, params, model.defaults)
    machine = model.machine(params)
    return Workload(
        name=model.name,
        jobs=job_list,
        header=model_header(model, full_spec, seed if rng is None else None, machine, len(job_list), params),
        max_procs=machine,
        source=f"{full_spec} (seed {seed})" if rng is None else full_spec,
        records=None,
        conversion=None,
    )


def model_header(
    model: Model, spec: str, seed: int | None, machine: int | None, count: int, params: object | None = None
) -> SwfHeader:
    """The SWF header of a generated workload: what generated it (isthmus and its version, the
    model with every parameter's value), with which seed, for what machine."""
    from isthmus import __version__

    header = SwfHeader()
    header.add("Version", "2.2")
    header.add("Computer", "synthetic")
    header.add("Installation", f"isthmus {__version__} workload model {model.name}")
    header.add("Acknowledge", model.citation)
    header.add("Information", model.summary)
    header.add("Conversion", f"isthmus workload generate {spec}" + (f" --seed {seed}" if seed is not None else ""))
    if params is not None:
        values = ", ".join(f"{k}={v}" for k, v in describe_params(params))
        header.add("Note", f"generated by isthmus {__version__}: model {model.name}, parameters {values}")
    header.add("Note", "times are whole seconds (each rounded to the nearest second, halves up)")
    header.add("MaxJobs", count)
    header.add("MaxRecords", count)
    header.add("UnixStartTime", 0)
    if machine is not None:
        header.add("MaxNodes", machine)
        header.add("MaxProcs", machine)
    return header


__all__ = ["DEFAULT_MODEL", "MODELS", "Model", "generate", "get_model", "model_names"]
