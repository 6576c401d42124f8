"""One entry point from "what the user typed" to a Workload: a trace file or a model spec."""

from __future__ import annotations

import os
from pathlib import Path

from isthmus.workloads.conversion import SwfConversion
from isthmus.workloads.errors import WorkloadError
from isthmus.workloads.seeds import DEFAULT_SEED
from isthmus.workloads.workload import Workload, load_workload

# the generators (isthmus.workloads.generators) are imported where a spec may name a model: a
# trace path is told apart by its suffix or folder, and reading it does not load them

_TRACE_SUFFIXES = (".swf", ".swf.gz", ".gwf", ".gwf.gz")


def looks_like_path(spec: str) -> bool:
    """True when `spec` names a file: a trace suffix, a folder separator, or an existing file
    whose name is not a model name."""
    lower = spec.lower()
    if lower.endswith(_TRACE_SUFFIXES) or lower.endswith(".gz"):
        return True
    if os.sep in spec or (os.altsep is not None and os.altsep in spec):
        return True
    from isthmus.workloads.generators import MODELS

    name = lower.partition(":")[0]
    return name not in MODELS and Path(spec).is_file()


def resolve_workload(
    spec: str | os.PathLike[str] | None = None,
    *,
    seed: int = DEFAULT_SEED,
    jobs: int | None = None,
    skip_invalid: bool = False,
    conversion: SwfConversion | None = None,
    keep_records: bool = False,
    lazy: bool = False,
) -> Workload:
    """The workload `spec` names: a trace file path (.swf, .swf.gz, .gwf) or a model spec.

    A model spec is a name with optional parameters, ``lublin``, ``lublin:jobs=5000,max_size=64``,
    ``uniform``, ``bursty``, ``sr50:arrivals=bursty``; None or "" means the default model
    (``lublin``). For a model, `seed` seeds its random numbers and `jobs` sets the job count;
    for a file, `jobs` keeps the first that many jobs, and `skip_invalid`, `conversion` and
    `keep_records` and `lazy` are passed to :func:`load_workload`. Raises WorkloadError (an unknown model
    lists the valid names); never returns a partial workload.
    """
    if spec is None or (isinstance(spec, str) and not spec.strip()):
        from isthmus.workloads.generators import DEFAULT_MODEL, generate

        return generate(DEFAULT_MODEL, seed=seed, jobs=jobs)
    text = os.fspath(spec)
    if jobs is not None and jobs < 0:
        raise WorkloadError(f"jobs must be >= 0, got {jobs}")
    if not isinstance(spec, str) or looks_like_path(text):
        path = Path(text)
        if not path.exists():
            from isthmus.workloads.generators import MODELS

            raise WorkloadError(f"no such file (and not a workload model; models: {', '.join(MODELS)})", source=text)
        return load_workload(
            path,
            conversion=conversion,
            skip_invalid=skip_invalid,
            keep_records=keep_records,
            first=jobs,
            name=None,
            lazy=lazy,
        )
    from isthmus.workloads.generators import MODELS, generate

    name = text.partition(":")[0].strip().lower()
    if name not in MODELS:
        raise WorkloadError(
            f"unknown workload {text!r}: not a trace file (.swf, .swf.gz, .gwf) and not a model; "
            f"valid models: {', '.join(MODELS)}"
        )
    return generate(text, seed=seed, jobs=jobs)
