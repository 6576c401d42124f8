"""A long fault-injection campaign against a real manager (not in CI; the suite runs a short one).

    .venv/bin/python scripts/fault_campaign.py --jobs 600 --cycles 60 --seed 1
    .venv/bin/python scripts/fault_campaign.py --db "$ISTHMUS_TEST_PG" ...   # a PostgreSQL server

Faults, checks and figures are described in tests/live/faultkit.py; the figures go to
docs/reliability.md. Exit status 0 when nothing was lost, 1 otherwise (the problems printed).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "live"))

from faultkit import FAULTS, run_campaign

from isthmus.live.launch import tagged_pids


def _database(dsn: str | None, workdir: Path) -> tuple[str, str | None]:
    """The campaign's database URL, and the PostgreSQL database to drop afterwards."""
    if not dsn:
        return f"sqlite:///{workdir / 'isthmus.db'}", None
    import psycopg

    name = "isthmus_campaign_" + uuid.uuid4().hex[:12]
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{dsn.rpartition('/')[0]}/{name}", name


def main() -> int:
    """Run one campaign; print its figures and any problem."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=600, help="jobs submitted (default 600)")
    p.add_argument("--cycles", type=int, default=60, help="faults injected (default 60)")
    p.add_argument("--seed", type=int, default=1, help="random seed of the fault schedule (default 1)")
    p.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated subset of {','.join(FAULTS)}")
    p.add_argument(
        "--submit-every",
        type=float,
        default=None,
        help="seconds between submissions (default: spread the jobs over the campaign, cycles * 4 / jobs)",
    )
    p.add_argument("--db", default=None, help="a PostgreSQL server DSN (default: an SQLite file)")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, database, ledger)")
    args = p.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    workdir = Path(tempfile.mkdtemp(prefix="isthmus-campaign."))
    db_url, pg_name = _database(args.db, workdir)
    tag = uuid.uuid4().hex
    try:
        report = run_campaign(
            workdir / "run",
            db_url,
            tag,
            jobs=args.jobs,
            cycles=args.cycles,
            seed=args.seed,
            faults=faults,
            submit_every=args.submit_every if args.submit_every is not None else args.cycles * 4 / args.jobs,
            log=lambda line: print(line, flush=True),
        )
    finally:
        for pid in tagged_pids(tag):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if pg_name and args.db:
            import psycopg

            with psycopg.connect(args.db, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{pg_name}" WITH (FORCE)')
        if not args.keep:
            time.sleep(0.2)

            shutil.rmtree(workdir, ignore_errors=True)
    print(report.summary())
    for problem in report.problems:
        print("problem:", problem)
    if args.keep:
        print("work directory:", workdir)
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
