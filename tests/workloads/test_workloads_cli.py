"""`isthmus workload ...` through Typer's CliRunner: output, --json, errors, atomic outputs."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner
from workloads_helpers import SWF_HEADER, gwf_line, swf_line, write_gwf_text, write_swf_text

from isthmus.cli.main import app
from isthmus.cli.workload_cmd import parse_factor, parse_time
from isthmus.workloads import WorkloadError, iter_swf, load_workload, read_swf_header

runner = CliRunner()


def run(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, ["workload", *args])
    assert "Traceback" not in result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    lines = [swf_line(i, submit=60 * i, run=30 * i, alloc=2 ** (i % 7), req_time=60 * i) for i in range(1, 41)]
    lines.append(swf_line(41, submit=3000, run=-1, alloc=4))
    return write_swf_text(tmp_path / "trace.swf", lines)


def test_info_prints_table_ii_columns(trace: Path) -> None:
    code, out, _ = run("info", str(trace))
    assert code == 0
    for word in ("Workload trace", "jobs", "mean", "Q1", "median", "Q3", "99th", "minutes", "seconds", "3-4", "days"):
        assert word in out
    assert "MaxProcs" in out


def test_info_json(trace: Path) -> None:
    code, out, _ = run("info", str(trace), "--json", "--first", "30", "--max-size", "8")
    assert code == 0
    data = json.loads(out)
    assert data["jobs_before_filters"] == 30
    assert data["jobs"] == sum(1 for i in range(1, 31) if 2 ** (i % 7) <= 8)
    assert data["filters"] == "first 30 jobs, then size <= 8 processors"
    assert set(data["runtime_minutes"]) >= {"mean", "q1", "median", "q3", "p99"}
    assert data["metadata"]["MaxProcs"] == "64"


def test_info_of_a_model(trace: Path) -> None:
    code, out, _ = run("info", "sr50", "--json", "--seed", "3")
    assert code == 0
    data = json.loads(out)
    assert data["jobs"] == 1000 and data["source"] == "sr50 (seed 3)"
    code, out, _ = run("info", "lublin:jobs=100")
    assert code == 0 and "lublin" in out


def test_bad_input_is_one_line_on_stderr_with_exit_code_2(tmp_path: Path) -> None:
    bad = write_swf_text(tmp_path / "bad.swf", [swf_line(1), "1 0 -1 abc 4 -1 -1 -1 -1 -1 1 1 1 1 1 -1 -1 -1"])
    for args in (
        ["info", str(bad)],
        ["info", "nosuchmodel"],
        ["info", str(tmp_path / "missing.swf")],
        ["info", "lublin:bogus=1"],
        ["info", str(bad), "--oversize", "trim"],
        ["filter", str(bad), str(tmp_path / "o.swf")],
        ["convert", str(bad), str(tmp_path / "o.swf")],
        ["reduce", str(bad), str(tmp_path / "o.swf")],
        ["generate", "nosuchmodel", str(tmp_path / "o.swf")],
    ):
        code, out, err = run(*args)
        assert code == 2, args
        assert err.startswith("error: "), args
        assert err.count("\n") == 1, (args, err)
        assert out == ""
    code, _, err = run("info", str(bad))
    line = SWF_HEADER.count("\n") + 2
    assert err == f"error: {bad}:{line}: field 4 (run time): expected a number, got 'abc'\n"
    assert not (tmp_path / "o.swf").exists()


def test_skip_invalid_warns_and_goes_on(tmp_path: Path) -> None:
    bad = write_swf_text(tmp_path / "bad.swf", [swf_line(1), "junk", swf_line(2)])
    code, out, err = run("info", str(bad), "--skip-invalid", "--json")
    assert code == 0
    assert json.loads(out)["jobs"] == 2
    assert "skipped 1 invalid line" in err
    code, out, err = run("filter", str(bad), str(tmp_path / "f.swf"), "--skip-invalid")
    assert code == 0 and "skipped 1 invalid line" in err


def test_generate_is_deterministic_and_writes_a_header(tmp_path: Path) -> None:
    a, b = tmp_path / "a.swf", tmp_path / "b.swf.gz"
    assert run("generate", "lublin", str(a), "--jobs", "300", "--seed", "4")[0] == 0
    code, out, _ = run("generate", "lublin", str(b), "--jobs", "300", "--seed", "4", "--json")
    assert code == 0
    assert json.loads(out) == {"model": "lublin:jobs=300 (seed 4)", "seed": 4, "jobs": 300, "output": str(b)}
    assert list(iter_swf(a)) == list(iter_swf(b))
    header = read_swf_header(a)
    assert header.max_procs == 32
    assert "seed 4" in (header.get("Conversion") or "")
    assert load_workload(a).jobs[0].submit == 0.0


def test_generate_refuses_a_file_as_model(trace: Path, tmp_path: Path) -> None:
    code, _, err = run("generate", str(trace), str(tmp_path / "x.swf"))
    assert code == 2 and "is a file, not a model" in err


def test_convert_gwf_to_swf(tmp_path: Path) -> None:
    source = write_gwf_text(tmp_path / "g.gwf", [gwf_line(1, 1_200_000_000), gwf_line(2, 1_200_000_050)])
    target = tmp_path / "g.swf"
    code, out, _ = run("convert", str(source), str(target), "--json")
    assert code == 0
    assert json.loads(out)["written"] == 2
    assert [r.submit_time for r in iter_swf(target)] == [0.0, 50.0]
    code, out, _ = run("convert", str(target), str(tmp_path / "again.swf.gz"))
    assert code == 0 and "wrote 2 records" in out
    assert list(iter_swf(tmp_path / "again.swf.gz")) == list(iter_swf(target))


def test_filter(trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "f.swf"
    code, out, _ = run(
        "filter", str(trace), str(target), "--max-size", "8", "--first", "20", "--start", "2m", "--end", "1h",
        "--drop-unknown-runtime", "--json",
    )  # fmt: skip
    assert code == 0
    data = json.loads(out)
    expected = [i for i in range(2, 41) if 60 * i < 3600][:20]
    expected = [i for i in expected if 2 ** (i % 7) <= 8]
    assert [r.job_id for r in iter_swf(target)] == expected
    assert data["written"] == len(expected)
    assert "submit in [120, 3600) s" in data["filters"]


def test_filter_a_model(tmp_path: Path) -> None:
    code, out, _ = run("filter", "uniform", str(tmp_path / "u.swf"), "--first", "10")
    assert code == 0 and "kept 10 of" in out
    assert len(list(iter_swf(tmp_path / "u.swf"))) == 10


def test_reduce_prints_the_ks_report(trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "r.swf"
    code, out, _ = run(
        "reduce", str(trace), str(target), "--keep", "2", "--every", "3", "--arrival-scale", "1/60",
        "--runtime-scale", "0.5",
    )  # fmt: skip
    assert code == 0
    assert "KS distance of processor counts" in out
    reduced = list(iter_swf(target))
    assert len(reduced) == 28
    code, out, _ = run("reduce", str(trace), str(tmp_path / "r2.swf"), "--json", "--seed", "1", "--every", "2")
    assert code == 0
    data = json.loads(out)
    assert data["reduced_jobs"] == 21  # a random 1 of every 2 (keep defaults to 1)
    assert data["seed"] == 1
    assert 0.0 <= data["size_vs_interval"]["statistic"] < 0.5
    code, _, err = run("reduce", str(trace), str(tmp_path / "r3.swf"), "--keep", "3", "--every", "2")
    assert code == 2 and "cannot exceed" in err
    code, _, err = run("reduce", str(trace), str(tmp_path / "r3.swf"), "--arrival-scale", "0")
    assert code == 2 and "positive" in err
    assert not (tmp_path / "r3.swf").exists()


def test_models_lists_every_model() -> None:
    code, out, _ = run("models")
    assert code == 0
    for name in ("lublin", "uniform", "increasing", "bursty", "periodic", "sr25", "sr50", "sr75"):
        assert name in out
    code, out, _ = run("models", "--json")
    assert json.loads(out)["lublin"]["parameters"]["max_size"] == "32"


def test_output_is_not_left_half_written(trace: Path, tmp_path: Path) -> None:
    target = tmp_path / "out.swf"
    target.write_text("previous content\n")
    bad = write_swf_text(tmp_path / "bad.swf", [swf_line(i) for i in range(1, 50)] + ["oops"])
    code, _, _ = run("filter", str(bad), str(target))
    assert code == 2
    assert target.read_text() == "previous content\n"
    assert sorted(os.listdir(tmp_path)) == ["bad.swf", "out.swf", "trace.swf"]


def test_unwritable_output_is_a_clean_error(trace: Path, tmp_path: Path) -> None:
    code, _, err = run("convert", str(trace), str(tmp_path / "no" / "such" / "dir.swf"))
    assert code == 2 and err.startswith("error: ")


def test_time_and_factor_parsing() -> None:
    assert parse_time("90", "x") == 90.0
    assert parse_time("2m", "x") == 120.0
    assert parse_time("1.5h", "x") == 5400.0
    assert parse_time("7d", "x") == 7 * 86400.0
    assert parse_time(None, "x") is None
    assert parse_factor("1/60", "x") == pytest.approx(1 / 60)
    assert parse_factor("0.5", "x") == 0.5
    for bad in ("soon", "1y"):
        with pytest.raises(WorkloadError):
            parse_time(bad, "x")
    for bad in ("0", "-1", "1/0", "x"):
        with pytest.raises(WorkloadError):
            parse_factor(bad, "x")
