"""A small TOML writer for environment documents (no third-party dependency).

It writes what environment files contain: top-level scalars, tables of scalars and inline
tables (``[policies]``), and arrays of tables (``[[sites]]``, ``[[sets]]``). Nested tables
inside a table or an array item are written inline. ``None`` values are left out (TOML has no
null; every nullable key of the schema means "absent" when null). The output is parsed back by
`tomllib` in the tests.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps_toml"]

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        items = [f"{_key(str(k))} = {_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    if isinstance(value, list | tuple):
        if any(v is None for v in value):
            raise ValueError("TOML arrays cannot hold null values")
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {type(value).__name__} as TOML")


def _is_table_array(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(v, Mapping) for v in value)


def _body(table: Mapping[str, Any]) -> list[str]:
    return [f"{_key(str(k))} = {_value(v)}" for k, v in table.items() if v is not None]


def dumps_toml(doc: Mapping[str, Any]) -> str:
    """Write `doc` as TOML text: scalars first, then ``[tables]``, then ``[[arrays of tables]]``.

    Key order inside each group follows `doc`. Raises TypeError for values TOML cannot hold.
    """
    lines: list[str] = []
    scalars = {k: v for k, v in doc.items() if not isinstance(v, Mapping) and not _is_table_array(v)}
    lines.extend(_body(scalars))
    for key, value in doc.items():
        if isinstance(value, Mapping):
            if lines:
                lines.append("")
            lines.append(f"[{_key(str(key))}]")
            lines.extend(_body(value))
    for key, value in doc.items():
        if _is_table_array(value):
            for item in value:
                if lines:
                    lines.append("")
                lines.append(f"[[{_key(str(key))}]]")
                lines.extend(_body(item))
    return "\n".join(lines) + "\n"
