"""SWF header layouts of the Parallel Workloads Archive: keys after any amount of blank space."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner
from workloads_helpers import swf_line, write_swf_text

from isthmus.cli.main import app
from isthmus.workloads import SwfConversion, load_workload, read_swf_header
from isthmus.workloads.swf import SwfHeader

# The layout of the archive's LPC-EGEE-2004-1.2-cln.swf (keys indented by many blanks) and of
# other PWA files (one blank, no blank, a tab), each with its machine size.
LPC_EGEE_LAYOUT = """; Version: 2.2
; Computer: LPC cluster
;        MaxJobs: 244821
;        MaxRecords: 244821
;        UnixStartTime: 1093903200
;        TimeZoneString: Europe/Paris
;        MaxNodes: 70
;        MaxProcs: 140
;        Note: the nodes are dual-processor machines
;              continued on a second line
"""


def test_lpc_egee_indented_keys_are_keys(tmp_path: Path) -> None:
    path = write_swf_text(tmp_path / "lpc.swf", [swf_line(1)], header=LPC_EGEE_LAYOUT)
    header = read_swf_header(path)
    assert header.max_procs == 140
    assert header.max_nodes == 70
    assert header.machine_size == 140
    assert header.max_jobs == 244_821
    assert header.max_records == 244_821
    assert header.unix_start_time == 1_093_903_200
    assert header.get("TimeZoneString") == "Europe/Paris"
    assert header.get("Note") == "the nodes are dual-processor machines"
    # the indented continuation has no key: free text, kept verbatim
    assert header.lines[-1].key is None
    assert header.lines[-1].value == "              continued on a second line"
    assert len(header) == 10


@pytest.mark.parametrize(
    "line",
    [
        ";MaxProcs: 140",
        "; MaxProcs: 140",
        ";  MaxProcs: 140",
        ";   MaxProcs: 140",
        ";        MaxProcs: 140",
        ";\tMaxProcs:\t140",
        ";  \t  MaxProcs :   140   ",
        ";        maxprocs: 140 (dual nodes)",
    ],
)
def test_every_indentation_reads_the_key(line: str) -> None:
    header = SwfHeader()
    header.add_comment_line(line)
    assert header.max_procs == 140


@pytest.mark.parametrize(
    "key",
    ["Version", "Computer", "Installation", "Acknowledge", "Information", "Conversion", "MaxJobs", "MaxRecords",
     "Preemption", "UnixStartTime", "TimeZone", "TimeZoneString", "StartTime", "EndTime", "MaxNodes", "MaxProcs",
     "MaxRuntime", "MaxMemory", "AllowOveruse", "MaxQueues", "Queues", "Queue", "MaxPartitions", "Partitions",
     "Partition", "Note"],
)  # fmt: skip
def test_every_swf_key_is_read_when_indented(key: str) -> None:
    header = SwfHeader()
    header.add_comment_line(f";          {key}: some value")
    assert header.get(key) == "some value"


def test_indented_free_text_that_looks_like_a_key_stays_text() -> None:
    header = SwfHeader()
    for line in (";        Remark: not an SWF key", ";      http://example.org/", ";        Queue 1: batch"):
        header.add_comment_line(line)
    assert [ln.key for ln in header.lines] == [None, None, None]
    assert header.lines[0].value == "        Remark: not an SWF key"
    # close to ';' any key is read, as before
    header.add_comment_line("; Remark: a key")
    assert header.get("Remark") == "a key"


def test_oversize_clip_uses_an_indented_maxprocs(tmp_path: Path) -> None:
    lines = [swf_line(1, alloc=200), swf_line(2, submit=10, alloc=100)]
    path = write_swf_text(tmp_path / "lpc.swf", lines, header=LPC_EGEE_LAYOUT)
    workload = load_workload(path, conversion=SwfConversion(oversize="clip"))
    assert workload.max_procs == 140
    assert [j.size for j in workload.jobs] == [140, 100]
    assert workload.conversion is not None and workload.conversion.clipped == 1
    result = CliRunner().invoke(app, ["workload", "info", str(path), "--oversize", "clip", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["max_procs"] == 140
    assert data["size"]["max"] == 140
    assert data["conversion"]["clipped_to_machine"] == 1
