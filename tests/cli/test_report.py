"""`isthmus report RUN_DIR`: one HTML page per simulation or experiment, checked in a headless
Chromium (Debian's, driven by Playwright): the tables are there and every figure loads."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from isthmus.cli.main import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"]


def _open(page_path: Path) -> tuple[Any, Any, Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium: scripts/test installs Debian's chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    pw = sync_api.sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
    page = browser.new_page()
    page.goto(page_path.resolve().as_uri())
    page.wait_for_load_state("load")
    return pw, browser, page


def _check_images(page: Any) -> int:
    sizes = page.locator("img").evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : -1)")
    assert sizes and all(w > 0 for w in sizes), sizes  # every figure found and decoded
    return len(sizes)


def test_a_simulation_report_shows_command_configuration_metrics_and_figures(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["simulate", "--cluster", "16", "-n", "200", "--out", str(out)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["report", str(out)])
    assert result.exit_code == 0, result.output
    page_path = out / "report.html"
    assert str(page_path) in result.output
    pw, browser, page = _open(page_path)
    try:
        assert page.title().startswith("isthmus simulate: single-cluster:processors=16")
        command = page.inner_text("pre")  # the command, every option given
        assert command.startswith("isthmus simulate") and "--cluster 16" in command and "--jobs 200" in command
        policies = page.locator("#metrics tbody tr td:first-child").all_inner_texts()
        assert policies == ["fcfs", "easy"]
        assert _check_images(page) >= 4
    finally:
        browser.close()
        pw.stop()


def test_an_experiment_report_shows_its_summary_tables_and_figures(tmp_path: Path) -> None:
    run = ROOT / "docs" / "experiments" / "koala-c-limits"
    target = tmp_path / "limits.html"
    result = runner.invoke(app, ["report", str(run), "--out", str(target)])
    assert result.exit_code == 0, result.output
    pw, browser, page = _open(target)
    try:
        assert page.title().startswith("isthmus experiment:")
        assert page.locator("#koala-c-limits tbody tr").count() > 10
        assert _check_images(page) >= 4  # relative to the page, wherever it was written
    finally:
        browser.close()
        pw.stop()


def test_a_directory_that_is_no_run_is_refused_clearly(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 2
    assert "no comparison.json (isthmus simulate --out) or summary.md" in result.output


def test_a_report_records_provenance_environment_workload_and_captioned_figures(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["simulate", "--cluster", "8", "-w", "lublin:jobs=60", "-p", "ff", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0
    assert runner.invoke(app, ["report", str(out)]).exit_code == 0
    page = (out / "report.html").read_text()
    from isthmus import __version__

    # the command with every default spelled out, the seed and the versions
    assert "--seed 0" in page and "--rounds batch" in page and "--round-interval event" in page
    assert f"<th>isthmus</th><td>{__version__}</td>" in page and "<th>numpy</th>" in page
    assert '<table id="sites">' in page and '<table id="workload-statistics">' in page
    assert "<th>jobs</th><td>60</td>" in page
    assert "{&quot;" not in page  # no raw JSON cell
    # one format per column: whole seconds with separators, never an exponent
    assert "e+0" not in page.split('<table id="metrics">')[1].split("</table>")[0]
    captions = [part.split("</figcaption>")[0] for part in page.split("<figcaption>")[1:]]
    assert captions[0].startswith("Figure 1. Wait time") and captions[1].startswith("Figure 2. Mean slowdown")
