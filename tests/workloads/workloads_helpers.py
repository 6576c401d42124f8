"""Helpers for the workload tests: where the real traces are, and writers of small SWF/GWF files."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

#: The folder ``shared`` beside the project folder holds the real traces (never in the project).
PROJECT_ROOT = Path(__file__).resolve().parents[2]
TRACES_DIR = (PROJECT_ROOT / ".." / "shared" / "traces").resolve()
MANIFEST = TRACES_DIR / "MANIFEST.md"

#: Job-line counts as listed in MANIFEST.md, hard-coded as a cross-check of the parsing.
EXPECTED_JOB_LINES = {
    "CTC-SP2-1996-3.1-cln.swf.gz": 77_222,
    "KTH-SP2-1996-2.1-cln.swf.gz": 28_476,
    "SDSC-SP2-1998-4.2-cln.swf.gz": 59_715,
    "SDSC-Par-1996-3.1-cln.swf.gz": 32_135,
    "LANL-CM5-1994-4.1-cln.swf.gz": 122_060,
    "LCG.swf.gz": 188_041,
    "NASA-iPSC-1993-3.1-cln.swf.gz": 18_239,
}

SWF_HEADER = """; Version: 2.2
; Computer: test machine
; Acknowledge: the isthmus tests
; MaxJobs: 4
; MaxRecords: 4
; UnixStartTime: 1000000000
; MaxNodes: 64 (all of them)
; MaxProcs: 64
;
;   free text line
"""


def manifest_job_lines() -> dict[str, int]:
    """File name → 'Job lines: N' parsed from MANIFEST.md (empty when there is no manifest)."""
    if not MANIFEST.is_file():
        return {}
    counts: dict[str, int] = {}
    current: str | None = None
    for line in MANIFEST.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^###\s+(\S+)\s*$", line)
        if heading:
            current = heading.group(1)
            continue
        count = re.search(r"Job lines:\s*([\d,]+)", line)
        if count and current is not None:
            counts[current] = int(count.group(1).replace(",", ""))
    return counts


def require_traces() -> Path:
    """The traces folder, or skip the test with a clear message when it is absent."""
    if not TRACES_DIR.is_dir() or not any(TRACES_DIR.glob("*.swf*")):
        pytest.skip(f"real traces not found in {TRACES_DIR} (the 'shared/traces' folder beside the project)")
    return TRACES_DIR


def swf_line(
    job_id: int,
    submit: float = 0,
    run: float = 100,
    alloc: int = 1,
    *,
    wait: float = -1,
    req_procs: int = -1,
    req_time: float = -1,
    req_mem: float = -1,
    user: int = 1,
    group: int = 1,
    status: int = 1,
) -> str:
    """One SWF job line with the usual fields settable."""
    fields = [job_id, submit, wait, run, alloc, -1, -1, req_procs, req_time, req_mem, status, user, group]
    fields += [1, 1, -1, -1, -1]
    return " ".join(str(f) for f in fields)


def write_swf_text(path: Path, lines: Iterable[str], header: str = SWF_HEADER) -> Path:
    """Write an SWF file made of `header` and the job `lines`."""
    path.write_text(header + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path


GWF_HEADER = """# Version: 1.0
# 1 JobID 2 SubmitTime 3 WaitTime ... 29 ProjectID
#
"""


def gwf_line(
    job_id: int,
    submit: float = 1_136_070_000,
    run: float = 100,
    nprocs: int = 1,
    *,
    wait: float = 5,
    req_procs: int = -1,
    req_time: float = -1,
    req_mem: float = -1,
    user: str = "U1",
    group: str = "G1",
    status: int = 1,
    extra: Sequence[str] = (),
) -> str:
    """One GWF job line (29 fields); `extra` replaces fields 14..29 when given."""
    tail = list(extra) or [
        "app1", "queue1", "-1", "site1", "site2", "UNITARY", "-1", "-1", "-1", "-1",
        "x86,Linux,2.6", "-1", "-1", "-1", "vo1", "-1",
    ]  # fmt: skip
    head = [job_id, submit, wait, run, nprocs, 10.5, 2048, req_procs, req_time, req_mem, status, user, group]
    fields = [str(f) for f in head] + tail
    assert len(fields) == 29
    return "\t".join(fields)


def write_gwf_text(path: Path, lines: Iterable[str], header: str = GWF_HEADER) -> Path:
    """Write a GWF file made of `header` and the job `lines`."""
    path.write_text(header + "".join(line + "\n" for line in lines), encoding="utf-8")
    return path
