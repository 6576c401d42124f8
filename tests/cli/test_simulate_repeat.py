"""`isthmus simulate --repeat/--seeds` (each figure's mean and 95% CI per policy) and
`isthmus compare` (runs side by side, differences, whether the intervals overlap)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from isthmus.cli.compare_cmd import compare_runs
from isthmus.cli.main import app
from isthmus.metrics.stats import interval

runner = CliRunner()
TINY = ["simulate", "-w", "lublin:jobs=40", "--cluster", "8", "--no-plots"]


def _json(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_repeat_three_gives_each_figure_mean_and_interval_over_three_seeds(tmp_path: Path) -> None:
    out = tmp_path / "rep"
    report = _json(runner.invoke(app, [*TINY, "-p", "ff", "--repeat", "3", "--seed", "4", "-o", str(out), "--json"]))
    assert report["repeat"]["seeds"] == [4, 5, 6]
    assert "model drawn again" in report["repeat"]["resampling"]
    (row,) = report["policies"]
    wait = row["wait_mean"]
    assert wait["n"] == 3 and len(wait["values"]) == 3
    assert wait == {**interval(wait["values"]), "values": wait["values"]}
    # each repetition is the single run of its seed
    single = _json(runner.invoke(app, [*TINY, "-p", "ff", "--seed", "5", "-o", str(tmp_path / "one"), "--json"]))
    assert wait["values"][1] == single["policies"][0]["wait_mean"]
    assert (out / "seed-5" / "ff.summary.json").exists()
    saved = json.loads((out / "comparison.json").read_text())
    assert saved["policies"] == report["policies"]
    # every output of a run has the same permissions (those of a plain new file)
    modes = {stat.S_IMODE(os.stat(p).st_mode) for p in [out / "comparison.json", *(out / "seed-4").iterdir()]}
    assert len(modes) == 1


def test_the_table_shows_mean_plus_minus_interval(tmp_path: Path) -> None:
    result = runner.invoke(app, [*TINY, "-p", "ff", "--seeds", "1,2", "-o", str(tmp_path / "t"), "-n", "20"])
    assert result.exit_code == 0, result.output
    assert "mean ± 95% CI over 2 runs" in result.output
    assert " ± " in result.output.split("│ ff")[1]


def test_repeat_over_a_trace_resamples_it(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    assert runner.invoke(app, ["workload", "generate", "lublin:jobs=60", str(trace)]).exit_code == 0
    args = ["simulate", "-w", str(trace), "--cluster", "32", "--no-plots", "-p", "ff", "--json"]
    report = _json(runner.invoke(app, [*args, "--repeat", "2", "-o", str(tmp_path / "r")]))
    assert report["repeat"]["resampling"].startswith("bootstrap of the trace's blocks")
    from isthmus.workloads import resolve_workload
    from isthmus.workloads.resample import resample_blocks

    jobs = resolve_workload(str(trace)).jobs
    assert [r["jobs"] for r in report["repetitions"]] == [len(resample_blocks(jobs, s)) for s in (0, 1)]
    waits = [r["policies"][0]["wait_mean"] for r in report["repetitions"]]
    assert waits[0] != waits[1]  # two different resamplings of the one trace


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--seeds", "1,x"], "'x' is not an integer"), (["--seeds", "1,2", "--repeat", "3"], "disagree")],
)
def test_bad_repeat_options_are_refused(tmp_path: Path, args: list[str], message: str) -> None:
    result = runner.invoke(app, [*TINY, *args, "-o", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert message in result.output


def _run(folder: Path, values: dict[str, list[float]]) -> Path:
    rows = [{"policy": p, "wait_mean": {**interval(v), "values": v}} for p, v in values.items()]
    folder.mkdir()
    (folder / "comparison.json").write_text(json.dumps({"policies": rows}))
    return folder


def test_compare_gives_differences_and_overlap(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {"ff": [100.0, 110.0, 120.0], "sjf": [50.0, 52.0, 54.0]})
    b = _run(tmp_path / "b", {"ff": [105.0, 115.0, 125.0], "sjf": [80.0, 81.0, 82.0]})
    (single := tmp_path / "c").mkdir()
    (single / "comparison.json").write_text(json.dumps({"policies": [{"policy": "ff", "wait_mean": 90.0}]}))
    result = runner.invoke(app, ["compare", str(a), str(b), str(single), "--json"])
    rows = {(r["policy"], r["figure"]): r["runs"] for r in _json(result)["rows"]}
    ff, sjf = rows[("ff", "wait_mean")], rows[("sjf", "wait_mean")]
    assert ff[1]["difference"] == pytest.approx(5.0) and ff[1]["overlap"] is True
    assert sjf[1]["difference"] == pytest.approx(29.0) and sjf[1]["overlap"] is False
    assert sjf[1]["relative"] == pytest.approx(29.0 / 52.0)
    assert ff[2]["mean"] == 90.0 and ff[2]["overlap"] is None  # a single run has no interval
    assert sjf[2] is None  # not run there
    text = runner.invoke(app, ["compare", str(a), str(b)])
    assert text.exit_code == 0, text.output
    assert "CIs apart" in text.output and "CIs overlap" in text.output
    assert compare_runs([json.loads((a / "comparison.json").read_text())] * 2, ["wait_mean"])[0]["runs"][1][
        "difference"
    ] == pytest.approx(0.0)


def test_compare_refuses_a_directory_without_a_run(tmp_path: Path) -> None:
    a = _run(tmp_path / "a", {"ff": [1.0, 2.0]})
    result = runner.invoke(app, ["compare", str(a), str(tmp_path)])
    assert result.exit_code == 2
    assert "no comparison.json" in result.output


def test_repeat_refuses_a_trace_too_short_to_resample(tmp_path: Path) -> None:
    trace = tmp_path / "short.swf"
    trace.write_text("".join(f"{i} {i * 60} -1 30 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n" for i in range(1, 4)))
    result = runner.invoke(app, ["simulate", "-w", str(trace), "--cluster", "2", "--repeat", "2", "-o", str(tmp_path)])
    assert result.exit_code == 2
    assert "within one hour" in result.output
