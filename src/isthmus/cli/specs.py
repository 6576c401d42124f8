"""Parse `name:key=value,...` specifications given on the command line."""

from __future__ import annotations

import json
from typing import Any

from isthmus.model.environment import PolicyChoice


def parse_value(text: str) -> Any:
    """A number, boolean, null or JSON list if `text` reads as one; `a;b;c` is a list; else the text."""
    if ";" in text:
        return [parse_value(part) for part in text.split(";") if part]
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_policy(spec: str) -> PolicyChoice:
    """`tags-sets:limits=2400` -> PolicyChoice("tags-sets", {"limits": 2400}).

    ValueError naming the offending part when a parameter is not `key=value`.
    """
    name, _, rest = spec.partition(":")
    name = name.strip()
    if not name:
        raise ValueError(f"policy {spec!r}: expected NAME or NAME:key=value,...")
    params: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"policy {spec!r}: parameter {part!r} is not key=value")
        params[key.strip()] = parse_value(value.strip())
    return PolicyChoice(name, params)
