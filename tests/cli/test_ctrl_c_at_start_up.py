"""A Ctrl-C while `isthmus` starts (before any command can handle it) ends it like an
interrupted command: exit status 130, no Python traceback."""

from __future__ import annotations

import builtins
import importlib.metadata
import signal
import subprocess
import sys
import time
from typing import Any

import pytest

from isthmus.cli import run


def test_the_installed_command_starts_at_run():
    (script,) = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "isthmus"]
    assert script.value == "isthmus.cli:run"


def test_a_ctrl_c_while_the_command_line_is_imported_exits_130(monkeypatch):
    real_import = builtins.__import__

    def interrupted(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "isthmus.cli.main":
            raise KeyboardInterrupt
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "isthmus.cli.main", raising=False)
    monkeypatch.setattr(builtins, "__import__", interrupted)
    with pytest.raises(SystemExit) as stopped:
        run()
    assert stopped.value.code == 130


def test_ctrl_c_at_any_moment_once_the_program_runs_prints_no_traceback():
    """The program's entry point interrupted 0 to 190 ms after it was entered (importing the
    command line, Typer and Rich, then the command: about 0.3 s here): every run ends with 130
    (or 0 when the command was already done) and prints no traceback. The interpreter's own
    start-up before that (a few ms; its site imports) is Python's, as for any Python program."""
    code = (
        "import sys\n"
        "from isthmus.cli import run\n"
        "sys.argv = ['isthmus', 'policies', '--json']\n"
        "sys.stderr.write('entered\\n'); sys.stderr.flush()\n"
        "run()\n"
    )
    for k in range(20):
        proc = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
        )
        assert proc.stderr is not None
        assert proc.stderr.readline() == b"entered\n"
        time.sleep(k * 0.01)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=60)
        said = stderr.decode()
        assert proc.returncode in (0, 130), (k, proc.returncode, said)
        assert "Traceback" not in said, (k, said)
