"""Written SWF holds whole seconds and a header naming isthmus and the generator's parameters;
`workload convert` gives an archive's file back line for line."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from isthmus import __version__
from isthmus.cli.main import app
from isthmus.model.job import Job
from isthmus.workloads import read_swf_header, record_from_job
from isthmus.workloads.conversion import whole_seconds
from isthmus.workloads.swf import format_swf_record

ARCHIVE_LIKE = """\
; Version: 2.2
; Computer: IBM SP2
; Installation: KTH
;
; MaxJobs: 3
; MaxRecords: 3
;    free text in the header
   1      0   1587   1200  16   -1   -1  16  3600   -1  1  1  1 -1  1 -1 -1 -1
   2     10     -1     -1  -1   -1   -1   4  3600   -1  5  2  1 -1  1 -1 -1 -1
   3     25     12    300   8  12.5  2048   8   600  2048  1  3  2  1  1 -1  2  60
"""


def _jobs(path: Path) -> list[str]:
    return [line.split() for line in path.read_text().splitlines() if not line.startswith(";")]  # type: ignore[misc]


def test_whole_seconds_round_halves_up_and_keep_a_run_above_zero() -> None:
    assert [whole_seconds(v) for v in (0.0, 0.49, 0.5, 1.5, 2.5, 407.363)] == [0, 0, 1, 2, 3, 407]
    assert whole_seconds(0.2, positive=True) == 1
    assert whole_seconds(0.0, positive=True) == 0


def test_a_job_with_fractional_times_is_written_in_whole_seconds() -> None:
    job = Job(id=1, submit=1750.379691102855, size=2, runtime=12.6, requested_runtime=99.5, user="1", group="1")
    assert format_swf_record(record_from_job(job)).split()[:9] == ["1", "1750", "-1", "13", "2", "-1", "-1", "2", "100"]


def test_generate_writes_integers_and_a_header_naming_isthmus_and_every_parameter(tmp_path: Path) -> None:
    out = tmp_path / "g.swf"
    result = CliRunner().invoke(app, ["workload", "generate", "lublin:load=0.7", str(out), "--jobs", "40"])
    assert result.exit_code == 0, result.output
    for fields in _jobs(out):
        assert all("." not in f and "e" not in f for f in fields), fields
    notes = read_swf_header(out).get_all("Note")
    assert any(f"isthmus {__version__}" in n and "model lublin" in n and "load=0.7" in n for n in notes), notes
    assert any("serial_prob=" in n for n in notes)  # defaults are spelled out too
    assert any("rounded to the nearest second" in n for n in notes)
    assert "--seed 0" in (read_swf_header(out).get("Conversion") or "")


def test_convert_round_trips_an_archive_file(tmp_path: Path) -> None:
    source = tmp_path / "archive.swf"
    source.write_text(ARCHIVE_LIKE)
    once, twice = tmp_path / "once.swf", tmp_path / "twice.swf"
    runner = CliRunner()
    assert runner.invoke(app, ["workload", "convert", str(source), str(once)]).exit_code == 0
    assert runner.invoke(app, ["workload", "convert", str(once), str(twice)]).exit_code == 0
    assert _jobs(once) == _jobs(source)  # every field as the archive wrote it (12.5 stays 12.5)
    assert _jobs(twice) == _jobs(once)
    header = [line for line in once.read_text().splitlines() if line.startswith(";")]
    assert header[: len(ARCHIVE_LIKE.splitlines()[:7])] == [line.rstrip() for line in ARCHIVE_LIKE.splitlines()[:7]]
