"""The command runner: real processes, timeouts and typed errors carrying return code and output."""

from __future__ import annotations

import sys
import time

import pytest

from isthmus.backends.runner import (
    CommandFailedError,
    CommandNotFoundError,
    CommandTimeoutError,
    run_command,
)


def test_success_returns_output_and_return_code():
    r = run_command([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr)"], timeout=10)
    assert (r.returncode, r.stdout, r.stderr) == (0, "out\n", "err\n")
    assert r.seconds >= 0


def test_failure_carries_return_code_stdout_and_stderr():
    with pytest.raises(CommandFailedError) as info:
        run_command(
            [sys.executable, "-c", "import sys; print('o'); sys.exit('sbatch: error: invalid partition')"], timeout=10
        )
    err = info.value
    assert err.returncode == 1 and err.stdout == "o\n" and "invalid partition" in err.stderr
    assert "invalid partition" in str(err)


def test_failure_unchecked_is_a_result():
    r = run_command([sys.executable, "-c", "raise SystemExit(3)"], timeout=10, check=False)
    assert r.returncode == 3


def test_timeout_kills_the_command():
    t0 = time.monotonic()
    with pytest.raises(CommandTimeoutError) as info:
        run_command([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(30)"], timeout=0.5)
    assert time.monotonic() - t0 < 10
    assert info.value.returncode == -1 and "no answer within 0.5 s" in str(info.value)


def test_missing_program_is_reported_by_name():
    with pytest.raises(CommandNotFoundError, match="sbatch-does-not-exist: command not found"):
        run_command(["sbatch-does-not-exist"], timeout=5)


def test_input_is_passed_on_stdin():
    r = run_command([sys.executable, "-c", "import sys; print(sys.stdin.read().upper())"], timeout=10, input_text="abc")
    assert r.stdout == "ABC\n"
