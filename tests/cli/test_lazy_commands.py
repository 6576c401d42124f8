"""The main command loads a sub-command's module only when that command runs (issue 11: start-up
time and memory count in the whole `isthmus simulate` command)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import typer
from typer.testing import CliRunner

from isthmus.cli import main


def test_commands_name_exactly_what_each_module_registers() -> None:
    """`COMMANDS` lists every command each module adds, and no other (a new command fails here)."""
    for module_name in set(main.COMMANDS.values()):
        listed = sorted(name for name, mod in main.COMMANDS.items() if mod == module_name)
        assert sorted(main.load_commands(module_name)) == listed, module_name


def test_help_lists_every_command_and_each_runs() -> None:
    runner = CliRunner()
    result = runner.invoke(main.app, ["--help"], env={"COLUMNS": "150"})
    assert result.exit_code == 0, result.output
    for name in main.COMMANDS:
        assert f" {name} " in result.output
    group = typer.main.get_command(main.app)
    assert isinstance(group, main.LazyGroup)
    assert group.get_command(typer.Context(group), "no-such-command") is None
    sub = runner.invoke(main.app, ["policies", "--family", "fairshare", "--json"])
    assert sub.exit_code == 0, sub.output
    assert '"sep"' in sub.output
    unknown = runner.invoke(main.app, ["no-such-command"])
    assert unknown.exit_code == 2
    typo = runner.invoke(main.app, ["simulat"])
    assert typo.exit_code == 2 and "Did you mean 'simulate'?" in typo.output


def test_simulate_imports_neither_server_live_nor_plots(tmp_path: Path) -> None:
    """A simulate run without plots imports no HTTP client/server, live manager, store or matplotlib."""
    code = (
        "import sys\n"
        "from isthmus.cli.main import app\n"
        "try:\n"
        f"    app(['simulate', '--cluster', '8', '-w', 'lublin:jobs=30', '-p', 'fcfs', '-o', {str(tmp_path)!r},"
        " '--no-plots', '--json'])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "heavy = {'httpx', 'fastapi', 'starlette', 'uvicorn', 'sqlalchemy', 'matplotlib'}\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & heavy), file=sys.stderr)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[:2] in (['isthmus', 'live'], ['isthmus', 'server'],"
        " ['isthmus', 'store'], ['isthmus', 'experiments'])), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stderr.splitlines()[-2:] == ["[]", "[]"], proc.stderr
    assert (tmp_path / "fcfs.jobs.csv").exists() and not list(tmp_path.glob("*.png"))


def test_simulate_loads_pyarrow_only_to_write_records() -> None:
    """Everything `isthmus simulate` imports before it writes the records leaves pyarrow out
    (about 30 MB): the records module imports it when it writes or reads files."""
    code = (
        "import sys\n"
        "from isthmus.cli import main\n"
        "main.load_commands('simulate_cmd')\n"
        "import isthmus.metrics.run, isthmus.sim.runner, isthmus.workloads, isthmus.config\n"
        "print('pyarrow' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["False"], proc.stdout
