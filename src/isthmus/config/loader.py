"""Read environments from TOML/YAML files or bundled names, and write them back as files.

The one entry point is `load_environment(spec)`: ``spec`` is a bundled name with optional
parameters (``koala-c-multicluster:k=4``) or a path to a ``.toml``, ``.yaml`` or ``.yml`` file.
Every failure is a `ConfigError` naming the file, the key path and what was expected.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from isthmus.config.errors import ConfigError, Problem
from isthmus.config.schema import LineLocator, Loc, environment_to_dict, validate_document
from isthmus.model.environment import Environment

if TYPE_CHECKING:
    import yaml

# PyYAML, tomllib and the TOML writer are imported by the functions that read or write those
# formats: a bundled name (``isthmus simulate`` without --env) needs none of them

__all__ = [
    "FILE_SUFFIXES",
    "Format",
    "dump_environment",
    "environment_from_text",
    "is_file_spec",
    "load_environment",
    "load_file",
    "parse_text",
]

Format = Literal["toml", "yaml"]
FILE_SUFFIXES: Mapping[str, Format] = {".toml": "toml", ".yaml": "yaml", ".yml": "yaml"}


# ----------------------------------------------------------------------------------------------
# YAML with duplicate-key detection and line numbers.


@cache
def _strict_yaml_loader() -> Any:
    """A SafeLoader that refuses duplicate keys in a mapping (PyYAML keeps the last one silently).
    Built with type() so the module type-checks with and without the PyYAML stubs."""
    import yaml

    loader: Any = type("_StrictYamlLoader", (yaml.SafeLoader,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    return loader


def _construct_mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
    import yaml

    loader.flatten_mapping(node)
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                "found an unhashable key",
                key_node.start_mark,
            ) from None
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (first on line {seen[key].start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node
    mapping: dict[Any, Any] = loader.construct_mapping(node, deep=deep)
    return mapping


def _yaml_line_locator(root: yaml.Node | None) -> LineLocator:
    """Map a key path to the 1-based line of that key (or of the nearest existing parent)."""
    import yaml

    def line_of(loc: Loc) -> int | None:
        node = root
        line = None if node is None else node.start_mark.line + 1
        for part in loc:
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                for key_node, value_node in node.value:
                    if isinstance(key_node, yaml.ScalarNode) and key_node.value == part:
                        line = key_node.start_mark.line + 1
                        node = value_node
                        break
                else:
                    return line
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return line
        return line

    return line_of


_TOML_BARE_KEY = r"[A-Za-z0-9_-]+"
_TOML_KEY = rf"(?:{_TOML_BARE_KEY}|\"(?:[^\"\\]|\\.)*\"|'[^']*')"
_TOML_DOTTED = re.compile(rf"\s*({_TOML_KEY}(?:\s*\.\s*{_TOML_KEY})*)\s*")
_TOML_HEADER = re.compile(rf"^\s*(\[\[?)\s*({_TOML_KEY}(?:\s*\.\s*{_TOML_KEY})*)\s*\]\]?")
_TOML_ASSIGN = re.compile(rf"^\s*({_TOML_KEY}(?:\s*\.\s*{_TOML_KEY})*)\s*=\s*(.*)$")
_TOML_INLINE_KEY = re.compile(rf"[{{,]\s*({_TOML_KEY})\s*=")


def _toml_key_parts(dotted: str) -> tuple[str, ...]:
    parts = re.findall(_TOML_KEY, dotted)
    return tuple(p[1:-1] if p[:1] in ("'", '"') else p for p in parts)


def _toml_line_locator(text: str) -> LineLocator:
    """Map a key path to the 1-based line of that key in TOML `text` (or of the nearest parent).

    tomllib keeps no positions, so the text is scanned: table headers (``[a.b]``), arrays of
    tables (``[[sites]]``, counted per path, so ``sites[1]`` is the second one), ``key = value``
    lines, the keys of one-line inline tables and the items of arrays of inline tables written
    one per line. Multi-line strings are skipped.
    """
    lines: dict[Loc, int] = {}
    counts: dict[tuple[str, ...], int] = {}  # array-of-tables path -> items so far
    table: Loc = ()
    array_key: Loc | None = None  # inside a multi-line array value of this key
    array_items = 0
    in_string: str | None = None

    def resolve(parts: tuple[str, ...]) -> Loc:
        out: list[str | int] = []
        for n in range(len(parts)):
            out.append(parts[n])
            if parts[: n + 1] in counts:
                out.append(counts[parts[: n + 1]] - 1)
        return tuple(out)

    def inline_keys(loc: Loc, value: str, number: int) -> None:
        if value.lstrip().startswith("{"):
            for key in _TOML_INLINE_KEY.findall(value):
                lines.setdefault((*loc, *_toml_key_parts(key)), number)

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if in_string is not None:
            if in_string in line:
                in_string = None
            continue
        if not line or line.startswith("#"):
            continue
        if array_key is not None:
            if line.startswith("{"):
                item: Loc = (*array_key, array_items)
                lines.setdefault(item, number)
                inline_keys(item, line, number)
                array_items += 1
            if line.split("#", 1)[0].rstrip().endswith("]"):
                array_key = None
            continue
        header = _TOML_HEADER.match(line)
        if header:
            parts = _toml_key_parts(header.group(2))
            if header.group(1) == "[[":
                counts[parts] = counts.get(parts, 0) + 1
            table = resolve(parts)
            lines.setdefault(table, number)
            continue
        assign = _TOML_ASSIGN.match(line)
        if not assign:
            continue
        loc = (*table, *_toml_key_parts(assign.group(1)))
        lines.setdefault(loc, number)
        value = assign.group(2).strip()
        bare = value.split("#", 1)[0].rstrip() if '"' not in value and "'" not in value else value
        for quote in ('"""', "'''"):
            if value.startswith(quote) and value.count(quote) == 1:
                in_string = quote
        inline_keys(loc, value, number)
        if bare.startswith("[") and not bare.endswith("]"):
            array_key, array_items = loc, 0
            rest = value[1:].strip()
            if rest.startswith("{"):
                lines.setdefault((*loc, 0), number)
                inline_keys((*loc, 0), rest, number)
                array_items = 1

    def line_of(loc: Loc) -> int | None:
        for n in range(len(loc), 0, -1):
            found = lines.get(tuple(loc[:n]))
            if found is not None:
                return found
        return None

    return line_of


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def parse_text(text: str, fmt: Format, *, file: str = "<string>") -> tuple[Any, LineLocator | None]:
    """Parse TOML or YAML text; ConfigError with the file and line for a syntax error.

    Returns the document and a function mapping key paths to lines.
    """
    if fmt == "toml":
        import tomllib

        try:
            return tomllib.loads(text), _toml_line_locator(text)
        except tomllib.TOMLDecodeError as exc:
            message = str(exc)
            match = _TOML_POSITION.search(message)
            line = int(match.group(1)) if match else getattr(exc, "lineno", None)
            if match:
                message = message[: match.start()].rstrip() + f" (column {match.group(2)})"
            elif "(at end of document)" in message:
                line = text.count("\n") + (0 if text.endswith("\n") else 1)
                message = message.replace("(at end of document)", "(at end of file)").strip()
            raise ConfigError(file, [Problem("", f"TOML syntax error: {message}", line)]) from None
    import yaml

    strict = _strict_yaml_loader()
    try:
        data = yaml.load(text, Loader=strict)
        root = yaml.compose(text, Loader=strict)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        parts = [p for p in (exc.context, exc.problem) if p]
        detail = "; ".join(parts) or "invalid YAML"
        raise ConfigError(file, [Problem("", f"YAML syntax error: {detail}", line)]) from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, [Problem("", f"YAML syntax error: {exc}")]) from None
    return data, _yaml_line_locator(root)


def environment_from_text(
    text: str, fmt: Format, *, file: str = "<string>", default_name: str | None = None
) -> Environment:
    """Parse and validate environment text in `fmt`; ConfigError naming `file` on any problem."""
    data, line_of = parse_text(text, fmt, file=file)
    if data is None:
        raise ConfigError(file, "the file is empty; expected name, sites, sets and policies")
    return validate_document(data, file=file, default_name=default_name, line_of=line_of)


def load_file(path: str | Path) -> Environment:
    """Load one environment file (.toml, .yaml or .yml); its name defaults to the file's stem."""
    path = Path(path)
    file = str(path)
    fmt = FILE_SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise ConfigError(file, f"unsupported file type {path.suffix or '(none)'!r}; expected .toml, .yaml or .yml")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(file, "no such file") from None
    except IsADirectoryError:
        raise ConfigError(file, "is a directory, not an environment file") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(file, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(file, f"cannot read: {exc.strerror or exc}") from None
    return environment_from_text(text, fmt, file=file, default_name=path.stem)


def is_file_spec(spec: str | Path) -> bool:
    """True when `spec` should be read as a file: a Path, a known suffix, a separator, or an existing file."""
    if isinstance(spec, Path):
        return True
    if Path(spec).suffix.lower() in FILE_SUFFIXES or "/" in spec or "\\" in spec:
        return True
    from isthmus.config.bundled import bundled_names

    base = spec.split(":", 1)[0].strip()
    return base not in bundled_names() and Path(spec).is_file()


def load_environment(spec: str | Path) -> Environment:
    """Load an environment from a bundled name (``name`` or ``name:key=value,...``) or a file path.

    Unknown names get a ConfigError listing the bundled names; files are validated as described
    in docs/environments.md.
    """
    if is_file_spec(spec):
        return load_file(spec)
    from isthmus.config.bundled import bundled_environment

    return bundled_environment(str(spec))


def dump_environment(env: Environment, fmt: Format) -> str:
    """Write `env` as TOML or YAML text that loads back to an equal Environment."""
    doc = environment_to_dict(env)
    if fmt == "toml":
        from isthmus.config.toml_writer import dumps_toml

        return dumps_toml(doc)
    if fmt == "yaml":
        import yaml

        text: str = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)
        if yaml.safe_load(text) != doc:
            # PyYAML writes some characters (NEL, line/paragraph separators) raw and reads them back
            # as line breaks; escaping everything outside ASCII keeps the text exact.
            text = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=False, width=1000)
        return text
    raise ValueError(f"unknown format {fmt!r}; expected toml or yaml")
