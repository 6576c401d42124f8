"""The main command loads a sub-command's module only when that command runs (start-up
time and memory count in the whole `isthmus simulate` command)."""

from __future__ import annotations

import gc
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


#: What `isthmus simulate --cluster P -w TRACE.swf` has no use for: the environment file schema
#: (pydantic models) and its YAML/TOML readers, the workload generators, filters, reduction and
#: statistics, the GWF reader, pyplot, and the other commands' packages.
UNNEEDED_FOR_A_TRACE = (
    "isthmus.config.schema",
    "isthmus.config.loader",
    "yaml",
    "tomllib",
    "isthmus.workloads.generators",
    "isthmus.workloads.filters",
    "isthmus.workloads.reduce",
    "isthmus.workloads.stats",
    "isthmus.workloads.pipeline",
    "isthmus.workloads.gwf",
    "isthmus.workloads.vm_requirements",
    "matplotlib.pyplot",
    "isthmus.experiments",
    "isthmus.live",
    "isthmus.server",
    "isthmus.store",
    "httpx",
    "fastapi",
    "sqlalchemy",
    "scipy",
    "pandas",
)


def _modules_after(argv: list[str]) -> tuple[set[str], str]:
    """The modules loaded once `isthmus ARGV` has run as a program (in a fresh interpreter; its
    own ``sys.argv``, as the console script runs it), and what the program printed to stderr."""
    code = (
        "import sys\n"
        "from isthmus.cli.main import app\n"
        "try:\n"
        "    app()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('MODULES', *sorted(sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    last = proc.stderr.splitlines()[-1].split()
    assert last[0] == "MODULES", proc.stderr
    return set(last[1:]), proc.stderr


def _loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_simulate_of_a_trace_on_one_cluster_imports_only_what_it_uses(tmp_path: Path) -> None:
    """The whole command's start-up counts. A trace on `--cluster P` loads neither
    the environment schema nor the generators (nor any module in UNNEEDED_FOR_A_TRACE); with
    the default plots it loads matplotlib's Figure and Agg canvas, still not pyplot."""
    trace = tmp_path / "t.swf"
    trace.write_text(
        "; MaxProcs: 8\n"
        "1 0 -1 10 2 -1 -1 2 20 -1 1 1 1 -1 -1 -1 -1 -1\n"
        "2 5 -1 30 8 -1 -1 8 40 -1 1 2 1 -1 -1 -1 -1 -1\n"
    )
    argv = ["simulate", "--cluster", "8", "-w", str(trace), "-p", "fcfs", "-p", "easy", "-o"]
    bare, _ = _modules_after([*argv, str(tmp_path / "bare"), "--no-plots"])
    plotted, _ = _modules_after([*argv, str(tmp_path / "plots")])
    assert "isthmus.sim.runner" in bare and "isthmus.workloads.swf_columns" in bare  # the run did happen
    assert (tmp_path / "bare" / "easy.jobs.csv").exists() and (tmp_path / "plots" / "wait_cdf.png").exists()
    assert not _loaded(bare, "matplotlib") and "matplotlib.backends.backend_agg" in plotted
    for modules in (bare, plotted):
        assert [name for name in UNNEEDED_FOR_A_TRACE if _loaded(modules, name)] == []


def test_an_environment_name_still_loads_the_schema(tmp_path: Path) -> None:
    """The check above cannot pass vacuously: `--env` validates through the file schema (a
    bundled name still reads no YAML or TOML)."""
    argv = ["simulate", "--env", "single-cluster:processors=4", "-w", "lublin:jobs=20", "-p", "fcfs", "--no-plots"]
    modules, _ = _modules_after([*argv, "-o", str(tmp_path)])
    assert "isthmus.config.schema" in modules and "isthmus.workloads.generators" in modules
    assert not _loaded(modules, "yaml") and not _loaded(modules, "tomllib")


def test_the_program_freezes_its_start_up_objects_a_test_runner_does_not(tmp_path: Path) -> None:
    """Run as the program (no arguments given to `app`), start-up runs without cyclic garbage
    collection and its objects are then frozen out of later collections (collection back on);
    invoked with arguments (a test runner, a library) the process's collector is left alone."""
    code = (
        "import gc, sys\n"
        "from isthmus.cli.main import app\n"
        "try:\n"
        "    app()\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print('GC', gc.isenabled(), gc.get_freeze_count() > 10000, file=sys.stderr)\n"
    )
    argv = ["simulate", "--cluster", "4", "-w", "lublin:jobs=20", "-p", "fcfs", "--no-plots", "-o", str(tmp_path)]
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True)
    assert proc.stderr.splitlines()[-1] == "GC True True", proc.stderr
    frozen = gc.get_freeze_count()
    result = CliRunner().invoke(main.app, argv)
    assert result.exit_code == 0, result.output
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_a_live_command_loads_only_its_own_module() -> None:
    """The live commands are one module a resource: `isthmus vms` loads the sites module (and
    what the live commands share), not the jobs', the server's or the manager."""
    code = (
        "import sys\n"
        "from isthmus.cli import main\n"
        "main.load_commands(main.COMMANDS['vms'])\n"
        "print(*sorted(m for m in sys.modules if m.startswith(('isthmus.cli.live.', 'isthmus.server'))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["isthmus.cli.live.common", "isthmus.cli.live.sites"], proc.stdout


def test_the_live_entry_point_has_every_live_command() -> None:
    """`python -m isthmus.cli.live_entry` registers exactly the live commands of the main command."""
    from isthmus.cli.live import register

    sub = typer.Typer()
    register(sub)
    names = {name for name, module in main.COMMANDS.items() if module.startswith("live.")}
    assert set(typer.main.get_group(sub).commands) == names
