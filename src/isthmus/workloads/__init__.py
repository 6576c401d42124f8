"""Workloads: SWF/GWF readers and writers, filters, trace reduction, synthetic models.

The usual entry points:

- :func:`resolve_workload` — a trace file path or a model spec (``lublin``, ``sr50``, ...)
  to a :class:`Workload`;
- :func:`load_workload` — read an SWF or GWF trace (plain or gzip) completely, or raise
  :class:`WorkloadError` naming ``file:line``;
- :class:`SwfReader` / :func:`iter_swf`, :class:`GwfReader` / :func:`iter_gwf` — stream records;
  :func:`write_swf` — write records atomically;
- :mod:`~isthmus.workloads.filters`, :func:`reduce_workload`, :func:`summarize`,
  :func:`generate`.

Semantics of every ambiguity (sizes, runtime cuts, unknown values) are in
:mod:`isthmus.workloads.conversion` and ``docs/workloads.md``.
"""

from typing import TYPE_CHECKING

from isthmus import lazy

if TYPE_CHECKING:
    from isthmus.workloads.conversion import (
        CANCELLED_CHOICES,
        RUN_CANCELLED,
        ConversionStats,
        IdMapper,
        JobConverter,
        SwfConversion,
        cancelled_before_start,
        cancelled_report,
        describe_cancelled,
        job_from_swf,
        record_from_job,
    )
    from isthmus.workloads.errors import SkipReport, WorkloadError
    from isthmus.workloads.filters import (
        DropUnknownRuntime,
        Filter,
        FirstJobs,
        MaxSize,
        SubmitWindow,
        filter_entries,
        filter_jobs,
    )
    from isthmus.workloads.generators import DEFAULT_MODEL, MODELS, generate, get_model, model_names
    from isthmus.workloads.gwf import GwfReader, GwfRecord, convert_gwf_to_swf, iter_gwf
    from isthmus.workloads.reduce import ReductionReport, ks_distance, reduce_workload
    from isthmus.workloads.resolve import resolve_workload
    from isthmus.workloads.stats import WorkloadSummary, summarize
    from isthmus.workloads.swf import (
        SwfHeader,
        SwfReader,
        SwfRecord,
        format_swf_record,
        iter_swf,
        read_swf_header,
        write_swf,
    )
    from isthmus.workloads.workload import Entry, Workload, load_workload

#: Names loaded on first use (isthmus.lazy): reading a trace does not load the generators,
#: the filters, the reduction or the GWF reader.
_LAZY = {
    **dict.fromkeys(
        (
            "CANCELLED_CHOICES",
            "RUN_CANCELLED",
            "ConversionStats",
            "IdMapper",
            "JobConverter",
            "SwfConversion",
            "cancelled_before_start",
            "cancelled_report",
            "describe_cancelled",
            "job_from_swf",
            "record_from_job",
        ),
        "conversion",
    ),
    **dict.fromkeys(("SkipReport", "WorkloadError"), "errors"),
    **dict.fromkeys(
        ("DropUnknownRuntime", "Filter", "FirstJobs", "MaxSize", "SubmitWindow", "filter_entries", "filter_jobs"),
        "filters",
    ),
    **dict.fromkeys(("DEFAULT_MODEL", "MODELS", "generate", "get_model", "model_names"), "generators"),
    **dict.fromkeys(("GwfReader", "GwfRecord", "convert_gwf_to_swf", "iter_gwf"), "gwf"),
    **dict.fromkeys(("ReductionReport", "ks_distance", "reduce_workload"), "reduce"),
    "resolve_workload": "resolve",
    **dict.fromkeys(("WorkloadSummary", "summarize"), "stats"),
    **dict.fromkeys(
        ("SwfHeader", "SwfReader", "SwfRecord", "format_swf_record", "iter_swf", "read_swf_header", "write_swf"), "swf"
    ),
    **dict.fromkeys(("Entry", "Workload", "load_workload"), "workload"),
}

__all__ = [
    "CANCELLED_CHOICES",
    "DEFAULT_MODEL",
    "MODELS",
    "RUN_CANCELLED",
    "ConversionStats",
    "DropUnknownRuntime",
    "Entry",
    "Filter",
    "FirstJobs",
    "GwfReader",
    "GwfRecord",
    "IdMapper",
    "JobConverter",
    "MaxSize",
    "ReductionReport",
    "SkipReport",
    "SubmitWindow",
    "SwfConversion",
    "SwfHeader",
    "SwfReader",
    "SwfRecord",
    "Workload",
    "WorkloadError",
    "WorkloadSummary",
    "cancelled_before_start",
    "cancelled_report",
    "convert_gwf_to_swf",
    "describe_cancelled",
    "filter_entries",
    "filter_jobs",
    "format_swf_record",
    "generate",
    "get_model",
    "iter_gwf",
    "iter_swf",
    "job_from_swf",
    "ks_distance",
    "load_workload",
    "model_names",
    "read_swf_header",
    "record_from_job",
    "reduce_workload",
    "resolve_workload",
    "summarize",
    "write_swf",
]


if not TYPE_CHECKING:  # type checkers see the imports above

    def __getattr__(name: str) -> object:
        """A name of `_LAZY`, imported from its submodule on first use."""
        return lazy.load_name(__name__, _LAZY, name)

    def __dir__() -> list[str]:
        """The package's names, the lazily loaded ones included."""
        return lazy.names(__name__, _LAZY)
