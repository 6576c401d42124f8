"""Impossible option values end every command when its line is read (exit 2, the option named);
a request the manager refuses (4xx) exits 2, one that fails at run time exits 1 (docs/live.md,
"Exit status")."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from isthmus.cli import bounds
from isthmus.cli.main import app
from isthmus.live.client import ApiError

runner = CliRunner()

AGENT = ["agent", "--url", "http://127.0.0.1:1", "--node", "0/n0"]

IMPOSSIBLE = [
    (["simulate", "--round-interval", "-10"], "--round-interval"),
    (["simulate", "--round-interval", "0"], "--round-interval"),
    (["simulate", "--round-interval", "soon"], "--round-interval"),
    (["simulate", "-n", "-5"], "--jobs"),
    (["simulate", "--jobs", "0"], "--jobs"),
    (["simulate", "--max-size", "-3"], "--max-size"),
    (["simulate", "--cluster", "0"], "--cluster"),
    (["simulate", "--seed", "-1"], "--seed"),
    (["experiment", "koala-c-limits", "--workers", "0"], "--workers"),
    (["experiment", "villegas-pairs", "--seeds", "0"], "--seeds"),
    (["experiment", "villegas-fcbf", "--week", "-1"], "--week"),
    (["experiment", "koala-c-realworld", "--repeat", "0"], "--repeat"),
    (["experiment", "koala-c-realworld", "--jobs", "-2"], "--jobs"),
    (["server", "--round-interval", "-1"], "--round-interval"),
    (["server", "--pilot-timeout", "0"], "--pilot-timeout"),
    (["server", "--heartbeat-timeout", "-1"], "--heartbeat-timeout"),
    (["server", "--reattach-timeout", "0"], "--reattach-timeout"),
    (["server", "--poll-wait", "nan"], "--poll-wait"),
    (["server", "--max-body-bytes", "10"], "--max-body-bytes"),
    (["server", "--max-batch-jobs", "0"], "--max-batch-jobs"),
    (["server", "--preemption-time", "-1"], "--preemption-time"),
    (["server", "--bag-prefetch", "101"], "--bag-prefetch"),
    (["server", "--max-lost-runs", "0"], "--max-lost-runs"),
    (["server", "--budget", "-1"], "--budget"),
    ([*AGENT, "--slots", "0"], "--slots"),
    ([*AGENT, "--timeout", "0"], "--timeout"),
    ([*AGENT, "--lifetime", "-5"], "--lifetime"),
    (["submit", "-n", "-5", "--", "true"], "--size"),
    (["submit", "--retries", "-1", "--", "true"], "--retries"),
    (["submit", "--vm-cores", "0", "--", "true"], "--vm-cores"),
    (["submit", "--vm-memory", "-1", "--", "true"], "--vm-memory"),
    (["submit", "--vm-storage", "0", "--", "true"], "--vm-storage"),
    (["show", "0"], "JOB_ID"),
    (["logs", "1", "--run", "0"], "--run"),
    (["logs", "1", "--task", "-1"], "--task"),
    (["cancel", "--", "1", "-2"], "JOB_IDS"),
    (["results", "0"], "BAG_ID"),
    (["forecast", "--horizon", "0"], "--horizon"),
    (["forecast", "--budget", "-1"], "--budget"),
    (["budget", "--", "cloud", "-1"], "LIMIT"),
    (["validate", "--scale", "0"], "--scale"),
    (["validate", "--timeout", "-5"], "--timeout"),
    (["validate", "--seed", "-1"], "--seed"),
    (["validate", "-n", "0"], "--jobs"),
    (["workload", "generate", "lublin", "out.swf", "--seed", "-1"], "--seed"),
    (["workload", "info", "lublin", "--max-size", "0"], "--max-size"),
    (["workload", "reduce", "in.swf", "out.swf", "--every", "0"], "--every"),
]


@pytest.mark.parametrize(("argv", "option"), IMPOSSIBLE, ids=[" ".join(a) for a, _ in IMPOSSIBLE])
def test_an_impossible_value_exits_2_naming_the_option(argv: list[str], option: str) -> None:
    result = runner.invoke(app, argv, env={"COLUMNS": "200", "ISTHMUS_URL": "http://127.0.0.1:1"})
    assert result.exit_code == 2, result.output
    # Typer's bounds say "Invalid value for '--x'"; the experiment checks its sweep options itself
    [line] = [ln for ln in result.output.splitlines() if "Invalid value" in ln or ln.startswith("error:")]
    assert option.lower() in line.lower(), result.output


def test_possible_values_pass_the_bounds() -> None:
    assert bounds.positive(0.5) == 0.5 and bounds.positive(None) is None
    assert bounds.round_interval("30") == "30" and bounds.round_interval(None) is None
    assert bounds.round_interval(" Event ") == "event" and bounds.round_interval("none") == "event"
    for bad in ("inf", "-0.1", "0"):
        with pytest.raises(typer.BadParameter):
            bounds.round_interval(bad)
    with pytest.raises(typer.BadParameter):
        bounds.positive(float("inf"))


class _Refusing:
    """A client whose every request is answered with `status`."""

    status = 0

    def __init__(self, *_: Any, **__: Any) -> None:
        pass

    def __enter__(self) -> _Refusing:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        def request(*_: Any, **__: Any) -> Any:
            raise ApiError(self.status, f"{self.status}: answered to {name}")

        return request


@pytest.mark.parametrize(("status", "code"), [(422, 2), (401, 2), (404, 2), (409, 2), (503, 1), (500, 1), (0, 1)])
def test_a_refused_request_exits_2_a_failed_one_1(status: int, code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_Refusing, "status", status)
    monkeypatch.setattr("isthmus.cli.live.common.Client", _Refusing)
    for argv in (["jobs", "--token", "t"], ["show", "7", "--token", "t"], ["cancel", "7", "8", "--token", "t"]):
        result = runner.invoke(app, argv)
        assert result.exit_code == code, (argv, result.output)
        assert "error: " in result.output and str(status) in result.output
