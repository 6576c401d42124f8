"""`isthmus experiment NAME --check DIR` and the published results in docs/experiments."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from isthmus.cli.main import app
from isthmus.experiments.catalog import EXPERIMENTS
from isthmus.experiments.recheck import Difference, compare_rows, read_published, recheck, same_value

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "experiments"
SHARED_TRACES = ROOT.parent / "shared" / "traces"
CTC = SHARED_TRACES / "CTC-SP2-1996-3.1-cln.swf.gz"


def test_same_value_reads_cells_as_csv_wrote_them():
    assert same_value("54456", 54456)
    assert same_value("0.1", 0.1)
    assert same_value("1e-05", 1e-05)
    assert same_value("0.30000000000000004", 0.1 + 0.2)
    assert same_value("0.3", 0.1 + 0.2)  # another summation order: within 1e-9
    assert same_value("", None) and not same_value("0", None)
    assert same_value("drop", "drop") and not same_value("keep", "drop")
    assert not same_value("54456", 49943)
    assert not same_value("1.0001", 1.0)
    assert same_value("True", True) and not same_value("1", True)
    assert same_value("nan", float("nan"))


def test_compare_rows_names_the_label_and_the_column_that_differ():
    published = [{"trace": "A", "k": "1", "wait": "10.5", "simulation_seconds": "3.0"}]
    labels = (("trace", "A"), ("k", 1))
    computed = {"trace": "A", "k": 1, "wait": 10.5, "simulation_seconds": 9, "new": 1}
    assert compare_rows(labels, computed, published) == ([], 1)  # only `wait` compared
    (d,), compared = compare_rows(labels, {"trace": "A", "k": 1, "wait": 11.0}, published)
    assert compared == 1
    assert d == Difference(labels, "wait", "10.5", 11.0)
    assert str(d) == "trace=A, k=1: wait published 10.5, computed 11.0"
    (missing,), _ = compare_rows((("trace", "A"), ("k", 2)), {"wait": 10.5}, published)
    assert str(missing) == "no published row with trace=A, k=2"
    with pytest.raises(ValueError, match="no column seed"):
        compare_rows((("trace", "A"), ("seed", 0)), {"wait": 10.5}, published)


def _published_experiments() -> list[str]:
    """Every simulated experiment with a results directory in docs/experiments."""
    return [name for name in EXPERIMENTS if (DOCS / name / f"{name}.csv").is_file()]


def test_every_simulated_experiment_has_its_published_results():
    assert len(_published_experiments()) == len(EXPERIMENTS)


@pytest.mark.parametrize("name", _published_experiments())
def test_the_published_results_are_what_this_version_computes(name):
    """docs/experiments/NAME holds what `isthmus experiment NAME` computes today (its lightest
    point of each trace simulated again): a change of the simulator's results regenerates them."""
    spec = EXPERIMENTS[name]
    traces = None
    if spec.traces is not None:
        traces = [str(SHARED_TRACES / t) for t in spec.traces if (SHARED_TRACES / t).exists()]
        assert traces, f"none of {name}'s traces in {SHARED_TRACES}"
    result = recheck(name, DOCS / name / f"{name}.csv", traces=traces)
    assert result.sampled and result.compared >= 3 * len(result.sampled)
    assert not result.differences, "\n".join(map(str, result.differences))


def _write_rows(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _ibm_check(directory: Path) -> Result:
    return CliRunner().invoke(app, ["experiment", "ibm-cloud", "-t", str(CTC), "--check", str(directory)])


def test_check_of_a_tampered_results_directory_fails_naming_the_value(tmp_path):
    rows = list(csv.DictReader((DOCS / "ibm-cloud" / "ibm-cloud.csv").open()))
    lightest = next(r for r in rows if r["config"] == "450")
    lightest["delay_mean"] = str(float(lightest["delay_mean"]) + 1.0)
    _write_rows(tmp_path / "ibm-cloud.csv", rows)
    bad = _ibm_check(tmp_path)
    assert bad.exit_code == 1, bad.output
    assert "differs:" in bad.output and "delay_mean published" in bad.output
    assert "is not what this version computes" in bad.output
    good = _ibm_check(DOCS / "ibm-cloud")
    assert good.exit_code == 0 and "agrees" in good.output, good.output


def test_check_refuses_what_it_cannot_do(tmp_path):
    runner = CliRunner()
    missing = runner.invoke(app, ["experiment", "ibm-cloud", "--check", str(tmp_path)])
    assert missing.exit_code != 0 and "no " in missing.output and "ibm-cloud.csv" in missing.output
    with_out = runner.invoke(app, ["experiment", "ibm-cloud", "--check", str(DOCS / "ibm-cloud"), "-o", str(tmp_path)])
    assert with_out.exit_code != 0 and "--out does not apply with --check" in with_out.output
    (tmp_path / "koala-c-sets.csv").write_text("trace,wait_mean\nKTH-SP2,1\n")
    other = runner.invoke(app, ["experiment", "koala-c-sets", "--check", str(tmp_path)])
    assert other.exit_code != 0 and "no column limit_min" in other.output
    assert "koala-c-sets.csv" in other.output.replace("\n", "")


def test_a_published_file_that_is_not_csv_text_is_named(tmp_path):
    published = tmp_path / "ibm-cloud.csv"
    published.write_bytes(b"trace,config\n\xff\xfe bad\n")
    with pytest.raises(ValueError, match=r"ibm-cloud.csv: not UTF-8 text"):
        read_published(published)
    published.write_text('trace,config\n"A,1\n')  # a quote never closed
    with pytest.raises(ValueError, match=r"ibm-cloud.csv:\d+: not a CSV row"):
        read_published(published)
    result = CliRunner().invoke(app, ["experiment", "ibm-cloud", "-t", str(CTC), "--check", str(tmp_path)])
    assert result.exit_code != 0 and "not a CSV row" in result.output and "Traceback" not in result.output


def test_every_part_of_an_experiment_is_sampled_and_a_tampered_later_part_fails(tmp_path):
    """koala-cs-unobtrusive's delay rows come after its probes in one sweep: both parts are
    simulated, and a changed delay value is found."""
    name = "koala-cs-unobtrusive"
    published = DOCS / name / f"{name}.csv"
    result = recheck(name, published)
    parts = [dict(labels)["part"] for labels in result.sampled]
    assert sorted(parts) == ["delay", "probe"]
    assert not result.differences and not result.unpublished
    rows = list(csv.DictReader(published.open()))
    (sampled_delay,) = [dict(labels) for labels in result.sampled if dict(labels)["part"] == "delay"]
    row = next(r for r in rows if r["part"] == "delay" and all(same_value(r[k], v) for k, v in sampled_delay.items()))
    row["delay_mean"] = str(float(row["delay_mean"]) + 1.0)
    tampered = tmp_path / f"{name}.csv"
    _write_rows(tampered, rows)
    (d,) = recheck(name, tampered).differences
    assert d.column == "delay_mean" and dict(d.labels)["part"] == "delay"


def test_columns_the_published_csv_lacks_are_named_not_compared(tmp_path):
    rows = list(csv.DictReader((DOCS / "ibm-cloud" / "ibm-cloud.csv").open()))
    for r in rows:
        del r["delay_mean"]
    _write_rows(tmp_path / "ibm-cloud.csv", rows)
    older = _ibm_check(tmp_path)
    assert older.exit_code == 0, older.output
    out = " ".join(older.output.split())
    assert "not in ibm-cloud.csv, not compared (written by a version with fewer columns): delay_mean" in out
    assert "agrees" in out
    assert "not compared" not in _ibm_check(DOCS / "ibm-cloud").output
