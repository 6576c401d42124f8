"""How values are shown to users in error messages."""

from __future__ import annotations

import json
from typing import Any


def show_value(value: Any, limit: int = 60) -> str:
    """Show a value as a user wrote it in TOML/YAML (strings quoted, ``true``, ``null``), briefly."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif isinstance(value, int | float):
        text = repr(value)
    elif isinstance(value, dict):
        text = "a table" if not value else "a table {" + ", ".join(str(k) for k in list(value)[:5]) + "}"
    elif isinstance(value, list | tuple):
        text = f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    else:
        text = f"{type(value).__name__} {value!s}"
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
