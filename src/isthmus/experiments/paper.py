"""Numbers published in KOALA-C (koala-c-multicluster-multicloud.txt) to compare against."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TraceFacts:
    """Table II (runtime statistics in minutes, after dropping jobs > 32 nodes) and Table III."""

    name: str
    grid: bool
    jobs: str
    runtime_mean: float
    runtime_q1: float
    runtime_median: float
    runtime_q3: float
    runtime_p99: float
    optimal_limit_min: int
    short_fraction: float


KOALA_C: dict[str, TraceFacts] = {
    f.name: f
    for f in (
        TraceFacts("KTH-SP2", False, "27K (96%)", 149, 1, 14, 164, 1323, 25, 0.55),
        TraceFacts("CTC-SP2", False, "74K (94%)", 184, 2, 16, 223, 1081, 125, 0.69),
        TraceFacts("SDSC-BLUE", False, "175K (76%)", 46, 1, 2, 14, 961, 55, 0.87),
        TraceFacts("SDSC-SP2", False, "63K (94%)", 96, 1, 8, 42, 1068, 40, 0.75),
        TraceFacts("DAS2-fs3", True, "65K (99%)", 12, 0, 1, 1, 92, 25, 0.98),
        TraceFacts("AuverGrid", True, "50K (100%)", 218, 1, 17, 123, 1645, 60, 0.67),
        TraceFacts("LCG", True, "50K (100%)", 113, 2, 4, 27, 2901, 20, 0.69),
        TraceFacts("NorduGrid", True, "50K (100%)", 4315, 32, 1403, 7720, 17836, 120, 0.32),
    )
}

#: §V-B: "a runtime limit of 40 minutes is suitable for most traces" (TAGS-sets).
TAGS_SETS_LIMIT_MIN = 40

#: §V-C2 / Fig. 6: TAGS-sets costs more than most other policies "by a factor ranging from 1.3 to 4.2".
TAGS_SETS_COST_FACTOR = (1.3, 4.2)


def facts_for(trace_path: str) -> TraceFacts | None:
    """The paper's facts for a trace file named like the PWA file (e.g. CTC-SP2-1996-3.1-cln.swf.gz)."""
    base = trace_path.rsplit("/", 1)[-1].lower()
    for name, facts in KOALA_C.items():
        if base.startswith(name.lower()):
            return facts
    return None
