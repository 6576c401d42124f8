"""Every experiment `isthmus experiment` runs, with the traces it reads by default and the
options it takes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from isthmus.experiments import ibm_cloud, koala_c, koala_cs, villegas, villegas_forwarding
from isthmus.experiments.result import ExperimentResult


@dataclass(frozen=True)
class ExperimentSpec:
    """One experiment: its function, the trace files it reads by default (None: it runs
    synthetic workloads and takes no trace) and the keyword options it accepts."""

    run: Callable[..., ExperimentResult]
    traces: tuple[str, ...] | None
    options: frozenset[str]


def _koala(run: Callable[..., ExperimentResult], *options: str) -> ExperimentSpec:
    return ExperimentSpec(run, koala_c.DEFAULT_TRACES, frozenset({"cancelled", *options}))


EXPERIMENTS: dict[str, ExperimentSpec] = {
    "koala-c-limits": _koala(koala_c.koala_c_limits, "chains", "limits_min"),
    "koala-c-sets": _koala(koala_c.koala_c_sets, "limits_min"),
    "koala-c-multicluster": _koala(koala_c.koala_c_multicluster, "chains"),
    "koala-c-multicloud": _koala(koala_c.koala_c_multicloud),
    **{
        name: ExperimentSpec(run, None, frozenset({"seeds"}))
        for name, run in villegas.EXPERIMENTS.items()
        if name not in villegas.DEFAULT_TRACES
    },
    "villegas-fcbf": ExperimentSpec(
        villegas.villegas_fcbf, villegas.DEFAULT_TRACES["villegas-fcbf"], frozenset({"cancelled", "week"})
    ),
    "villegas-forwarding": ExperimentSpec(
        villegas_forwarding.villegas_forwarding, villegas_forwarding.DEFAULT_TRACES, frozenset({"cancelled", "weeks"})
    ),
    "ibm-cloud": ExperimentSpec(ibm_cloud.ibm_cloud, ibm_cloud.DEFAULT_TRACES, frozenset({"cancelled", "start_day"})),
    koala_cs.LAUNCHER: ExperimentSpec(koala_cs.koala_cs_launcher, None, frozenset()),
    koala_cs.UNOBTRUSIVE: ExperimentSpec(koala_cs.koala_cs_unobtrusive, None, frozenset({"seeds"})),
    koala_cs.FAIRNESS: ExperimentSpec(koala_cs.koala_cs_fairness, None, frozenset({"seeds"})),
}
