"""Per-job records from hand-built logs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from metrics_helpers import LogBuilder, cluster_env
from metrics_synthetic import synthetic_run

from isthmus.metrics import JobStatus, compute_records, compute_run_metrics
from isthmus.metrics.records import NOT_SUBMITTED_REASON, UNFINISHED_REASON, JobColumns, JobRecords
from isthmus.model.job import Job


def two_jobs() -> LogBuilder:
    """One 4-processor cluster; job 1 (2 procs) runs 0-100, job 2 (4 procs) arrives at 10, runs 100-300."""
    b = LogBuilder()
    b.submit(0, 1, 2, runtime=100).start(0, 1, 0).end(100, 1, 0)
    b.submit(10, 2, 4, runtime=200).start(100, 2, 0).end(300, 2, 0)
    return b


def test_two_jobs_on_one_cluster() -> None:
    b = two_jobs()
    r = compute_records(b.build(), b.jobs, cluster_env(4))
    assert r.job_id.tolist() == [1, 2]
    assert r.submit.tolist() == [0, 10]
    assert r.start.tolist() == [0, 100]
    assert r.end.tolist() == [100, 300]
    assert r.site_labels().tolist() == ["c0", "c0"]
    assert r.wait.tolist() == [0, 90]
    assert r.response.tolist() == [100, 290]
    assert r.runtime.tolist() == [100, 200]
    assert r.delay.tolist() == [0, 90]
    assert r.slowdown.tolist() == pytest.approx([1.0, 1.45])
    assert r.bounded_slowdown.tolist() == pytest.approx([1.0, 1.45])
    assert r.size.tolist() == [2, 4]
    assert r.requested_runtime.tolist() == [200, 400]
    assert r.user.tolist() == ["u", "u"]
    assert r.status_labels().tolist() == ["completed", "completed"]
    assert r.restarts.tolist() == [0, 0]
    assert r.reason.tolist() == [None, None]


def test_killed_and_restarted_job_counts_wasted_run_in_response() -> None:
    b = LogBuilder()
    b.submit(0, 7, 2, runtime=300).start(10, 7, 0).kill(610, 7, 0).start(700, 7, 1).end(1000, 7, 1)
    r = compute_records(b.build(), b.jobs, cluster_env(4, 4))
    assert r.start[0] == 700
    assert r.end[0] == 1000
    assert r.site_labels()[0] == "c1"  # the site of the completing run
    assert r.wait[0] == 700
    assert r.response[0] == 1000  # includes the killed run
    assert r.runtime[0] == 300
    assert r.slowdown[0] == pytest.approx(1000 / 300)
    assert r.delay[0] == 700
    assert r.restarts[0] == 1
    assert r.wasted_processor_seconds[0] == 2 * 600
    assert r.status[0] == JobStatus.COMPLETED


def test_bounded_slowdown_uses_ten_seconds_for_short_jobs() -> None:
    b = LogBuilder()
    b.submit(0, 1, 1).start(20, 1, 0).end(22, 1, 0)  # runtime 2, response 22
    b.submit(0, 2, 1).start(0, 2, 0).end(3, 2, 0)  # runtime 3, response 3 -> bounded at 1
    b.submit(0, 3, 1).start(5, 3, 0).end(5, 3, 0)  # runtime 0: slowdown undefined
    r = compute_records(b.build(), b.jobs, cluster_env(4))
    assert r.slowdown[0] == 11
    assert r.bounded_slowdown[0] == pytest.approx(2.2)
    assert r.bounded_slowdown[1] == 1.0
    assert math.isnan(r.slowdown[2])
    assert r.bounded_slowdown[2] == 1.0


def test_rejected_unfinished_failed_cancelled() -> None:
    b = LogBuilder()
    b.submit(0, 1, 64).reject(0, 1, "needs 64 processors; largest site has 4")
    b.submit(1, 2, 1).start(2, 2, 0)  # still running at the horizon
    b.submit(1, 3, 4)  # queued forever, with a reason
    b.reasons[3] = "waiting for 4 free processors"
    b.submit(1, 4, 1).start(3, 4, 0).fail(5, 4, 0)
    b.submit(1, 5, 1).cancel(4, 5)
    b.submit(1, 6, 1).start(1, 6, 0).end(2, 6, 0)
    b.reasons[6] = "stale reason of a job that later completed"
    log = b.build()
    jobs = dict(b.jobs)
    jobs[9] = Job(9, 50.0, 1, 10.0)  # in the workload, never submitted before the run ended
    r = compute_records(log, jobs, cluster_env(4), horizon=100)
    labels = dict(zip(r.job_id.tolist(), r.status_labels().tolist(), strict=True))
    assert labels == {
        1: "rejected",
        2: "unfinished",
        3: "unfinished",
        4: "failed",
        5: "cancelled",
        6: "completed",
        9: "unfinished",
    }
    reasons = dict(zip(r.job_id.tolist(), r.reason.tolist(), strict=True))
    assert reasons[1] == "needs 64 processors; largest site has 4"
    assert reasons[2] == UNFINISHED_REASON
    assert reasons[3] == "waiting for 4 free processors"
    assert reasons[4] is None and reasons[5] is None and reasons[6] is None
    assert reasons[9] == NOT_SUBMITTED_REASON
    i = {j: k for k, j in enumerate(r.job_id.tolist())}
    # running job: start and site known, no end
    assert r.start[i[2]] == 2 and r.site_labels()[i[2]] == "c0" and math.isnan(r.end[i[2]])
    assert math.isnan(r.start[i[3]]) and r.site[i[3]] == -1
    # failed job: the failed run's times
    assert (r.start[i[4]], r.end[i[4]]) == (3, 5)
    assert r.submit[i[9]] == 50.0
    assert r.count(JobStatus.UNFINISHED) == 3


def test_jobs_only_in_the_log_and_sparse_ids() -> None:
    b = LogBuilder()
    big = 10**12
    b.submit(0, big, 2).start(0, big, 0).end(10, big, 0)
    b.submit(0, 3, 1).start(0, 3, 0).end(5, 3, 0)
    log = b.build()
    r = compute_records(log, {}, cluster_env(4))  # no workload mapping at all
    assert r.job_id.tolist() == [3, big]
    assert r.runtime.tolist() == [5, 10]
    assert r.size.tolist() == [1, 2]
    assert r.user.tolist() == [None, None]
    assert np.isnan(r.requested_runtime).all()


def test_bad_site_index_and_early_horizon_raise() -> None:
    b = LogBuilder()
    b.submit(0, 1, 1).start(0, 1, 3).end(5, 1, 3)
    with pytest.raises(ValueError, match="site index 3"):
        compute_records(b.build(), b.jobs, cluster_env(4))
    b = two_jobs()
    with pytest.raises(ValueError, match="horizon"):
        compute_records(b.build(), b.jobs, cluster_env(4), horizon=200)


def test_log_can_grow_after_metrics() -> None:
    b = two_jobs()
    log = b.build()
    compute_records(log, b.jobs, cluster_env(4))
    log.append(400, 0, job=3, value=1)  # no numpy view may pin the log's buffers
    assert len(log) == 7


def _same_records(a: JobRecords, b: JobRecords) -> None:
    assert a.to_arrow().equals(b.to_arrow())
    assert a.site_names == b.site_names


def test_job_columns_give_the_hand_computed_records() -> None:
    """Records from `JobColumns` equal the hand-computed ones and those from the Job mapping,
    also for a job the log never saw and a job without a requested runtime."""
    b = two_jobs()
    b.jobs[3] = Job(3, 400, 1, 50.0, requested_runtime=None, user="carol")  # never submitted
    log = b.build()
    by_columns = compute_records(log, JobColumns.from_jobs(b.jobs.values()), cluster_env(4))
    assert by_columns.job_id.tolist() == [1, 2, 3]
    assert by_columns.wait.tolist()[:2] == [0, 90]
    assert by_columns.slowdown.tolist()[:2] == pytest.approx([1.0, 1.45])
    assert by_columns.requested_runtime.tolist()[:2] == [200, 400]
    assert np.isnan(by_columns.requested_runtime[2]) and by_columns.submit[2] == 400
    assert by_columns.user.tolist() == ["u", "u", "carol"]
    assert by_columns.status_labels().tolist() == ["completed", "completed", "unfinished"]
    _same_records(by_columns, compute_records(log, b.jobs, cluster_env(4)))
    # a workload in another order gives the same rows (records are sorted by job id)
    shuffled = JobColumns.from_jobs([b.jobs[3], b.jobs[1], b.jobs[2]])
    _same_records(compute_records(log, shuffled, cluster_env(4)), by_columns)


def test_run_metrics_from_job_columns_equal_those_from_jobs() -> None:
    log, jobs, env = synthetic_run(500, seed=11)
    from_jobs = compute_run_metrics(log, jobs, env)
    from_columns = compute_run_metrics(log, JobColumns.from_jobs(jobs.values()), env)
    _same_records(from_columns.records, from_jobs.records)
    assert json.dumps(from_columns.summary, sort_keys=True, default=str) == json.dumps(
        from_jobs.summary, sort_keys=True, default=str
    )
