"""resolve_workload (file or model spec) and the workload summary used by `info`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from workloads_helpers import gwf_line, swf_line, write_gwf_text, write_swf_text

from isthmus.workloads import DEFAULT_MODEL, SwfConversion, Workload, WorkloadError, resolve_workload, summarize
from isthmus.workloads.resolve import looks_like_path
from isthmus.workloads.stats import size_buckets


def test_none_or_empty_means_the_default_model() -> None:
    assert DEFAULT_MODEL == "lublin"
    default = resolve_workload(None)
    assert default.name == "lublin"
    assert len(default) == 2000
    assert resolve_workload("", seed=0).jobs == default.jobs


def test_model_spec_with_parameters_seed_and_jobs() -> None:
    workload = resolve_workload("lublin:jobs=5000,max_size=64", seed=2)
    assert isinstance(workload, Workload)
    assert len(workload) == 5000
    assert workload.max_procs == 64
    assert workload.source == "lublin:jobs=5000,max_size=64 (seed 2)"
    assert len(resolve_workload("uniform", jobs=10)) == 10
    assert resolve_workload("SR50", seed=1).name == "sr50"


def test_unknown_model_lists_the_valid_names() -> None:
    with pytest.raises(WorkloadError) as info:
        resolve_workload("poisson")
    message = str(info.value)
    for name in ("lublin", "uniform", "increasing", "bursty", "periodic", "sr25", "sr50", "sr75"):
        assert name in message


def test_files_are_loaded_and_jobs_keeps_the_first(tmp_path: Path) -> None:
    swf = write_swf_text(tmp_path / "t.swf", [swf_line(i, i) for i in range(1, 6)])
    assert len(resolve_workload(str(swf))) == 5
    assert [j.id for j in resolve_workload(swf, jobs=2).jobs] == [1, 2]
    gwf = write_gwf_text(tmp_path / "t.gwf", [gwf_line(1), gwf_line(2)])
    assert len(resolve_workload(str(gwf))) == 2
    with pytest.raises(WorkloadError, match="no such file"):
        resolve_workload(str(tmp_path / "missing.swf"))
    with pytest.raises(WorkloadError, match=">= 0"):
        resolve_workload(str(swf), jobs=-1)


def test_file_options_are_passed_through(tmp_path: Path) -> None:
    swf = write_swf_text(tmp_path / "t.swf", [swf_line(1, alloc=100), "junk", swf_line(2)])
    workload = resolve_workload(str(swf), skip_invalid=True, conversion=SwfConversion.clipped(), keep_records=True)
    assert [j.size for j in workload.jobs] == [64, 1]
    assert workload.skipped.count == 1
    assert workload.records is not None


def test_looks_like_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert looks_like_path("x.swf") and looks_like_path("x.swf.gz") and looks_like_path("dir/name")
    assert not looks_like_path("lublin:jobs=10")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mytrace").write_text(swf_line(1) + "\n")
    assert looks_like_path("mytrace")
    (tmp_path / "uniform").write_text("")
    assert not looks_like_path("uniform")  # a model name wins over a file of that name
    assert len(resolve_workload("mytrace")) == 1


def test_summary_statistics(tmp_path: Path) -> None:
    lines = [swf_line(i, submit=100 * i, run=60 * i, alloc=a) for i, a in enumerate([1, 2, 3, 4, 5, 8, 9, 33], 1)]
    workload = resolve_workload(str(write_swf_text(tmp_path / "t.swf", lines)))
    summary = summarize(workload)
    assert summary.jobs == 8
    assert summary.runtime is not None
    assert summary.runtime.mean == pytest.approx(60 * 4.5)
    assert summary.runtime.median == pytest.approx(60 * 4.5)
    assert summary.runtime.in_minutes()["mean"] == pytest.approx(4.5)
    assert [(b.label, b.count) for b in summary.size_buckets] == [
        ("1", 1),
        ("2", 1),
        ("3-4", 2),
        ("5-8", 2),
        ("9-16", 1),
        ("17-32", 0),
        ("33-64", 1),
    ]
    assert summary.span_seconds == 700.0
    assert summary.span_days == pytest.approx(700 / 86400)
    area = sum(60 * i * a for i, a in enumerate([1, 2, 3, 4, 5, 8, 9, 33], 1))
    assert summary.total_area == area
    assert summary.offered_load == pytest.approx(area / (64 * 700))
    data = summary.to_dict()
    assert data["jobs"] == 8
    assert data["metadata"]["MaxProcs"] == "64"  # type: ignore[index]


def test_summary_of_an_empty_workload(tmp_path: Path) -> None:
    empty = tmp_path / "e.swf"
    empty.write_text("; MaxProcs: 4\n")
    summary = summarize(resolve_workload(str(empty)))
    assert summary.jobs == 0 and summary.runtime is None and summary.offered_load is None
    assert size_buckets(np.array([], dtype=np.int64)) == []
