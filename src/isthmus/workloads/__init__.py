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
