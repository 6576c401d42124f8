"""CSV / Parquet / JSON files, the comparison table and the PNG plots."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from metrics_helpers import LogBuilder, env_with_cloud
from metrics_synthetic import synthetic_run

from isthmus.metrics import COLUMNS, RunMetrics, compare_table, compute_run_metrics, read_records, style, write_run
from isthmus.metrics.plots import draw_all, plot_all, plot_cost, plot_mean_slowdown, plot_processors, plot_wait_cdf
from isthmus.metrics.records import JobStatus
from isthmus.metrics.run import stream_run


def small_log() -> LogBuilder:
    b = LogBuilder()
    b.lease(0, 1, vm=0).release(5400, 1, vm=0)
    b.submit(0, 1, 1, runtime=5340, user="alice").start(60, 1, 1).end(5400, 1, 1)
    b.submit(5, 2, 2, runtime=100).start(5, 2, 0).kill(15, 2, 0).start(20, 2, 0).end(120, 2, 0)
    b.submit(6, 3, 64).reject(6, 3, 'needs 64, "too large", sorry')
    b.submit(7, 4, 1)
    return b


def small_run() -> RunMetrics:
    b = small_log()
    return compute_run_metrics(b.build(), b.jobs, env_with_cloud())


def test_write_run_files(tmp_path: Path) -> None:
    paths = write_run(small_run(), tmp_path / "out", "ff")
    assert {p.name for p in paths.values()} == {"ff.jobs.csv", "ff.jobs.parquet", "ff.summary.json"}
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "ff.jobs.csv",
        "ff.jobs.parquet",
        "ff.summary.json",
    ]
    with paths["jobs_csv"].open(newline="") as f:
        rows = list(csv.reader(f))
    assert tuple(rows[0]) == COLUMNS
    assert rows[0][:5] == ["job_id", "submit", "start", "end", "site"]
    by_id = {r[0]: dict(zip(rows[0], r, strict=True)) for r in rows[1:]}
    assert by_id["1"]["site"] == "ec2" and by_id["1"]["user"] == "alice"
    assert float(by_id["1"]["start"]) == 60 and float(by_id["1"]["end"]) == 5400
    assert by_id["2"]["restarts"] == "1" and float(by_id["2"]["wasted_processor_seconds"]) == 20
    assert by_id["3"]["status"] == "rejected"
    assert by_id["3"]["reason"] == 'needs 64, "too large", sorry'
    # unknown values are empty cells
    assert by_id["3"]["start"] == "" and by_id["3"]["end"] == "" and by_id["3"]["site"] == ""
    assert by_id["4"]["status"] == "unfinished" and by_id["4"]["reason"] == "unfinished at end of run"
    summary = json.loads(paths["summary"].read_text())
    assert summary["cost_charged"] == pytest.approx(0.13)
    assert summary["jobs_rejected"] == 1


def test_csv_and_parquet_round_trip(tmp_path: Path) -> None:
    m = small_run()
    paths = write_run(m, tmp_path, "run")
    expected = m.records.to_arrow()
    for p in (paths["jobs_csv"], paths["jobs_parquet"]):
        t = read_records(p)
        assert t.column_names == list(COLUMNS)
        assert t.num_rows == len(m.records)
        assert t.to_pylist() == expected.to_pylist()
    assert pq.read_table(paths["jobs_parquet"]).column_names[:5] == [
        "job_id",
        "submit",
        "start",
        "end",
        "site",
    ]


def test_compare_table() -> None:
    m = small_run()
    rows = compare_table({"ff": m, "sjf": m})
    assert [r["policy"] for r in rows] == ["ff", "sjf"]
    assert rows[0]["cost_charged"] == pytest.approx(0.13)
    assert rows[0]["jobs_total"] == 4 and rows[0]["jobs_completed"] == 2
    assert list(rows[0])[:3] == ["policy", "jobs_total", "jobs_completed"]


def test_plots_are_written(tmp_path: Path) -> None:
    log, jobs, env = synthetic_run(5000, seed=1)  # enough steps to exercise downsampling
    big = compute_run_metrics(log, jobs, env)
    runs = {"ff": big, "tiny": small_run()}
    paths = plot_all(runs, tmp_path / "plots", prefix="cmp-")
    assert set(paths) == {"wait_cdf", "slowdown", "utilization", "processors", "cost"}
    for p in paths.values():
        assert p.exists() and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.name.startswith("cmp-")
    p = plot_processors({"ff": big}, tmp_path / "ec2.png", site="ec2")
    assert p.read_bytes()[:4] == b"\x89PNG"
    p = plot_mean_slowdown({"empty": compute_run_metrics(LogBuilder().build(), {}, env)}, tmp_path / "e.png")
    assert p.exists()
    assert not list(tmp_path.rglob("*.tmp"))


def test_plots_of_streamed_runs_equal_the_plots_of_whole_runs(tmp_path: Path) -> None:
    """A streamed run keeps only what the plots draw of its series (`SampledSeries`): the PNGs
    are the same bytes as those of the whole series, downsampled or not, on every site."""
    log, jobs, env = synthetic_run(5000, seed=1)  # enough steps to exercise downsampling
    whole = {"ff": compute_run_metrics(log, jobs, env), "tiny": small_run()}
    b = small_log()
    streamed = {
        "ff": stream_run(log, jobs, env, None, tmp_path / "ff.csv", tmp_path / "ff.parquet"),
        "tiny": stream_run(b.build(), b.jobs, env_with_cloud(), None, tmp_path / "t.csv", tmp_path / "t.parquet"),
    }
    a, s = plot_all(whole, tmp_path / "whole"), plot_all(streamed, tmp_path / "streamed")
    for kind in a:
        assert a[kind].read_bytes() == s[kind].read_bytes(), kind
    for site in ("ec2", "c1"):
        one = plot_processors({"ff": whole["ff"]}, tmp_path / "a.png", site=site).read_bytes()
        assert one == plot_processors({"ff": streamed["ff"]}, tmp_path / "b.png", site=site).read_bytes()


@pytest.mark.parametrize("batch_rows", [1, 7, 64, 100_000])
def test_streamed_files_equal_one_table(tmp_path: Path, batch_rows: int) -> None:
    """The records streamed in batches give the rows of the whole table written at once: the CSV
    byte for byte, the Parquet file the same table (its row groups are the batches)."""
    import pyarrow.csv as pacsv

    log, jobs, env = synthetic_run(300, seed=3)
    m = compute_run_metrics(log, jobs, env)
    assert len(m.records) > 64 and m.records.count(JobStatus.REJECTED) > 0
    whole = m.records.to_arrow()
    pacsv.write_csv(whole, tmp_path / "whole.csv", pacsv.WriteOptions(include_header=True, quoting_style="needed"))
    csv_path, parquet_path = m.records.write_files(tmp_path / "s.csv", tmp_path / "s.parquet", batch_rows=batch_rows)
    assert csv_path.read_bytes() == (tmp_path / "whole.csv").read_bytes()
    streamed = pq.read_table(parquet_path)
    assert streamed.equals(whole)
    assert pq.ParquetFile(parquet_path).metadata.num_row_groups == -(-len(m.records) // batch_rows)
    assert read_records(csv_path).equals(whole)


def test_streamed_files_without_rows_keep_header_and_schema(tmp_path: Path) -> None:
    b = LogBuilder()
    empty = compute_run_metrics(b.build(), {}, env_with_cloud())
    csv_path, parquet_path = empty.records.write_files(tmp_path / "e.csv", tmp_path / "e.parquet")
    assert csv_path.read_text().splitlines() == [",".join(f'"{c}"' for c in COLUMNS)]
    assert pq.read_table(parquet_path).column_names == list(COLUMNS)
    assert pq.read_table(parquet_path).num_rows == 0


def test_streamed_files_leave_nothing_behind_on_error(tmp_path: Path) -> None:
    m = small_run()
    (tmp_path / "old.csv").write_text("kept\n")
    with pytest.raises(ValueError, match="batch_rows"):
        m.records.write_files(tmp_path / "old.csv", tmp_path / "x.parquet", batch_rows=0)
    assert (tmp_path / "old.csv").read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.csv"]


def test_metrics_reading_the_log_in_place_equal_the_copy(tmp_path: Path) -> None:
    """`copy_log=False` gives the same records, summary and series, and leaves no view of the
    log behind (the log may grow again once the call returns)."""
    log, jobs, env = synthetic_run(400, seed=5)
    copied = compute_run_metrics(log, jobs, env)
    in_place = compute_run_metrics(log, jobs, env, copy_log=False)
    assert in_place.records.to_arrow().equals(copied.records.to_arrow())
    assert json.dumps(in_place.summary, sort_keys=True, default=str) == json.dumps(
        copied.summary, sort_keys=True, default=str
    )
    assert in_place.timeseries.utilization(50)[1].tolist() == copied.timeseries.utilization(50)[1].tolist()
    log.append(log.event(len(log) - 1).time + 1.0, 0, job=10**9, value=1.0)  # no BufferError: no view left


def test_figures_share_parsed_math_text_and_draw_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures' renderers share one mathtext parser (each figure parsed the logarithmic
    axes' labels again, when a logarithmic wait axis is asked for): the second figure finds them
    parsed, and the PNGs are the bytes that Agg's own canvas (a parser per renderer) draws."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    import isthmus.metrics.plots as plots

    log, jobs, env = synthetic_run(2000, seed=4)
    runs = {"ff": compute_run_metrics(log, jobs, env), "tiny": small_run()}
    parser = plots._Canvas._mathtext
    parser._parse_cached.cache_clear()
    shared = plot_all(runs, tmp_path / "shared")
    log_axis = plot_wait_cdf(runs, tmp_path / "log.png", log=True)
    before = parser._parse_cached.cache_info()
    assert before.misses > 0
    plot_wait_cdf(runs, tmp_path / "again.png", log=True)  # drawn before: every label is parsed already
    after = parser._parse_cached.cache_info()
    assert after.misses == before.misses and after.hits > before.hits
    monkeypatch.setattr(plots, "_Canvas", FigureCanvasAgg)
    own = plot_all(runs, tmp_path / "own")
    for kind in shared:
        assert shared[kind].read_bytes() == own[kind].read_bytes(), kind
    assert log_axis.read_bytes() == plot_wait_cdf(runs, tmp_path / "own-log.png", log=True).read_bytes()


def test_figures_are_written_in_each_format_asked(tmp_path: Path) -> None:
    runs = {"ff": small_run()}
    paths = plot_all(runs, tmp_path, formats="png, svg")
    for kind, path in paths.items():
        assert path.suffix == ".png" and path.read_bytes()[:4] == b"\x89PNG", kind
        assert path.with_suffix(".svg").read_bytes()[:5] == b"<?xml", kind
        assert not path.with_suffix(".pdf").exists()
    # a vector format alone, twice: the same bytes (no creation date in the files)
    pdf = plot_cost(runs, tmp_path / "a" / "cost.png", formats=("pdf", "svg"))
    assert pdf.suffix == ".pdf" and pdf.read_bytes()[:4] == b"%PDF" and not pdf.with_suffix(".png").exists()
    assert pdf.read_bytes() == plot_cost(runs, tmp_path / "b" / "cost.png", formats=("pdf",)).read_bytes()
    assert pdf.with_suffix(".svg").read_bytes() == (tmp_path / "cost.svg").read_bytes()
    with pytest.raises(ValueError, match="'jpeg'"):
        plot_all(runs, tmp_path / "bad", formats="png,jpeg")
    assert not (tmp_path / "bad").exists()


def test_figures_name_workload_and_environment_and_label_their_axes_with_units() -> None:
    log, jobs, env = synthetic_run(300, seed=2)
    run = compute_run_metrics(log, jobs, env)
    runs = {"ff": run, "sjf": run}
    figures = draw_all(runs, workload="lublin", environment=env)
    assert set(figures) == {"wait_cdf", "slowdown", "utilization", "processors", "cost"}
    for kind, fig in figures.items():
        assert fig._suptitle is not None and fig._suptitle.get_text().endswith(f"— lublin on {env.name}"), kind
        for ax in fig.axes:
            assert ax.get_xscale() == "linear" and ax.get_yscale() == "linear", kind
            assert ax.get_ylabel(), kind
        bottom = fig.axes[-1]
        assert "[" in bottom.get_xlabel() or bottom.get_xlabel() == "allocation policy", kind
        # the legend is outside the data: right of the axes
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        for legend in legends:
            fig.canvas.draw()
            box = legend.get_window_extent()
            assert box.x0 >= fig.axes[0].get_window_extent().x1, kind
    assert "[%" in figures["utilization"].axes[0].get_ylabel()
    assert "[US$]" in figures["cost"].axes[0].get_ylabel()
    panels = figures["processors"].axes
    assert len(panels) == 2 and len({ax.get_ylim() for ax in panels}) == 1  # one y scale
    most = sum(s.max_processors for s in env.sites)
    lines = [ln for ln in panels[0].get_lines() if list(ln.get_ydata()) == [most, most]]
    assert lines, "no capacity line"
    assert panels[0].get_ylim()[1] >= most
    colours = {ln.get_color() for ln in figures["utilization"].axes[0].get_lines()}
    assert colours <= set(style.PALETTE) and len(colours) == 2
    slowdown = figures["slowdown"].axes[0]
    assert slowdown.get_xlabel() == "allocation policy" and slowdown.get_ylim()[0] == 0
