"""docs/deploy.md: its environment file loads as written, and every `isthmus` command it shows
exists with the options it gives."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from isthmus.cli import main
from isthmus.config import environment_from_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "deploy.md"
TEXT = DOC.read_text(encoding="utf-8")

#: Words that end an `isthmus` command on a shell line.
SHELL_ENDS = {">", ">>", "<", "|", "||", "&&", ";", "--"}


def test_the_environment_file_loads() -> None:
    (toml_text,) = re.findall(r"```toml\n(.*?)```", TEXT, flags=re.S)
    env = environment_from_text(toml_text, "toml", file="docs/deploy.md")
    assert [s.name for s in env.sites] == ["alpha", "beta", "aws"]
    for site in env.sites[:2]:
        lrm = site.lrm
        assert lrm is not None and (lrm.driver, lrm.mode) == ("slurm", "direct")
        assert lrm.driver_options.known_hosts == "/etc/isthmus/known_hosts"
        assert lrm.driver_options.ssh.startswith("root@login.")
    p = env.site("aws").provider
    assert p is not None and p.driver == "ec2"
    assert p.release_on_stop and p.lease_patience == 600.0
    assert env.users is not None and env.users.run_as == "isthmus-jobs"
    assert dict(env.users.accounts) == {"alice": "alice", "bob": "bob"}


def commands() -> list[list[str]]:
    """Each `isthmus` command of the guide (shell lines of its code blocks and inline code), as
    words up to a redirection, a pipe or `--`, comments left out."""
    blocks = [re.sub(r"\\\n", " ", b) for b in re.findall(r"```sh\n(.*?)```", TEXT, flags=re.S)]
    lines = [line for block in blocks for line in block.splitlines()]
    lines += re.findall(r"`(isthmus [^`]+)`", TEXT)
    found = []
    for line in lines:
        words = shlex.split(line, comments=True)
        if not words or Path(words[0]).name != "isthmus":
            continue
        end = next((i for i, w in enumerate(words) if w in SHELL_ENDS), len(words))
        found.append(words[1:end])
    return found


def resolve(words: list[str]) -> tuple[Any, list[str]]:
    """The click command the words name, and the words after its name."""
    cmd: Any = typer.main.get_command(main.app)
    ctx = typer.Context(cmd)
    while hasattr(cmd, "get_command") and words and not words[0].startswith("-"):
        sub = cmd.get_command(ctx, words[0])
        assert sub is not None, f"no command {words[0]!r}"
        cmd, words = sub, words[1:]
        ctx = typer.Context(cmd, parent=ctx)
    return cmd, words


def test_every_command_exists_with_its_options() -> None:
    found = commands()
    assert len(found) >= 15, found
    named = {" ".join(w for w in words if not w.startswith("-"))[:20] for words in found}
    assert any(n.startswith("cloud cleanup") for n in named) and any(n.startswith("stop") for n in named)
    for words in found:
        cmd, rest = resolve(words)
        options = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for word in rest:
            if word.startswith("-"):
                assert word.split("=")[0] in options, f"isthmus {' '.join(words)}: {word} is not an option"


def test_the_check_finds_what_does_not_exist() -> None:
    cmd, rest = resolve(["cloud", "cleanup", "--dry-run"])
    assert rest == ["--dry-run"] and "--dry-run" in {o for p in cmd.params for o in p.opts}
    assert "--relase" not in {o for p in resolve(["stop"])[0].params for o in p.opts}
    with pytest.raises(AssertionError, match="no command 'clod'"):
        resolve(["clod", "cleanup"])
