"""Errors raised while reading environment files and bundled environment names.

Every problem names the file, the key path inside it (``sites[2].max_vms``; list indices count
from 0) and what was expected. One `ConfigError` carries all the problems found in one file, so
a user fixes a file in one pass instead of one error at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from isthmus.model.text import show_value

__all__ = ["ConfigError", "Problem", "format_path", "show_value"]


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with an environment description.

    `path` is the key path (``sites[2].max_vms``), empty for the file as a whole. `line` is the
    1-based line in the file when known (syntax errors; YAML files). `context` names the item the
    path points into (``site 'public'``) to help readers who count ``[[sites]]`` by eye.
    """

    path: str
    message: str
    line: int | None = None
    context: str | None = None

    def describe(self) -> str:
        """The problem without the file name: ``path (context): message``."""
        where = self.path
        if self.context:
            where = f"{where} ({self.context})" if where else f"({self.context})"
        return f"{where}: {self.message}" if where else self.message

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view of the problem."""
        return {"path": self.path, "message": self.message, "line": self.line, "context": self.context}


class ConfigError(ValueError):
    """An environment file, document or name that cannot be used, with every problem found.

    `file` is the file (or bundled name, or ``<string>``) the problems are in; `path` and
    `message` are those of the first problem, `problems` holds them all. ``str()`` is one line
    for a single problem (``file:line: path: message``) and one line per problem otherwise.
    """

    def __init__(self, file: str | None, problems: Sequence[Problem] | str, path: str = "") -> None:
        if isinstance(problems, str):
            problems = [Problem(path, problems)]
        if not problems:
            raise ValueError("ConfigError needs at least one problem")
        self.file: str | None = file
        self.problems: tuple[Problem, ...] = tuple(problems)
        first = self.problems[0]
        self.path: str = first.path
        self.message: str = first.message
        self.line: int | None = first.line
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.problems) == 1:
            return self._prefix(self.problems[0].line) + self.problems[0].describe()
        head = f"{self.file}: " if self.file else ""
        lines = [f"{head}{len(self.problems)} problems:"]
        for p in self.problems:
            at = f"line {p.line}: " if p.line is not None else ""
            lines.append(f"  {at}{p.describe()}")
        return "\n".join(lines)

    def _prefix(self, line: int | None) -> str:
        if not self.file:
            return ""
        return f"{self.file}:{line}: " if line is not None else f"{self.file}: "

    def __str__(self) -> str:
        return self._render()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view: the file and the list of problems."""
        return {"file": self.file, "problems": [p.to_dict() for p in self.problems]}


def format_path(loc: Sequence[str | int]) -> str:
    """Render a location tuple as a key path: ``("sites", 2, "max_vms")`` → ``sites[2].max_vms``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out
