"""Errors raised for bad workload input, and the report kept when bad lines are skipped."""

from __future__ import annotations

from dataclasses import dataclass, field

#: How many problems a SkipReport keeps verbatim (the rest are only counted).
MAX_EXAMPLES = 5


class WorkloadError(ValueError):
    """Bad workload input: a malformed trace line, an unknown model, an impossible option.

    The message starts with ``source:line:`` when a line of a file is at fault, e.g.
    ``trace.swf:1234: field 4 (run time): expected a number, got 'abc'``. The attributes keep
    the parts apart for programs: `source` (file name or model spec), `line` (1-based line
    number or None), `detail` (the message without the location).
    """

    def __init__(self, detail: str, *, source: str | None = None, line: int | None = None) -> None:
        self.detail = detail
        self.source = source
        self.line = line
        super().__init__(self._compose())

    def _compose(self) -> str:
        if self.source is not None and self.line is not None:
            return f"{self.source}:{self.line}: {self.detail}"
        if self.source is not None:
            return f"{self.source}: {self.detail}"
        return self.detail


@dataclass(slots=True)
class SkipReport:
    """What was skipped while reading with ``skip_invalid=True``.

    `count` is the number of skipped lines (or jobs); `examples` keeps the first few error
    messages (each naming ``file:line``) so the user can see what kind of problem it was.
    """

    count: int = 0
    examples: list[str] = field(default_factory=list)

    def add(self, error: WorkloadError) -> None:
        """Count one skipped line, keeping its message if it is among the first few."""
        self.count += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(str(error))

    def reject(self, message: str, *, source: str, line: int | None, skip: bool) -> None:
        """A bad line (or job): raise it as a WorkloadError naming `source` and `line`, or, when
        invalid lines are skipped (`skip`), count it here instead."""
        error = WorkloadError(message, source=source, line=line)
        if not skip:
            raise error from None
        self.add(error)

    def merge(self, other: SkipReport) -> None:
        """Add the counts and examples of `other` to this report."""
        self.count += other.count
        room = MAX_EXAMPLES - len(self.examples)
        if room > 0:
            self.examples.extend(other.examples[:room])

    def summary(self) -> str:
        """One line plus the first problems, e.g. 'skipped 3 invalid lines; first: ...'."""
        if self.count == 0:
            return "no invalid lines"
        noun = "line" if self.count == 1 else "lines"
        text = f"skipped {self.count} invalid {noun}"
        if self.examples:
            text += "; first: " + "; ".join(self.examples)
        return text

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready view: {'count': n, 'examples': [...]}."""
        return {"count": self.count, "examples": list(self.examples)}
