"""Model specs as text (``lublin:jobs=5000,max_size=64``) and typed parameter objects.

Each model's parameters are a frozen dataclass with defaults; :func:`parse_params` turns the
``key=value`` pairs of a spec into one, converting each value to the field's type (int,
float, bool, str, a Literal choice, or None for optional fields) and naming the valid keys
when a key is unknown.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

P = TypeVar("P")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """Split ``name:k=v,k=v`` into the lower-cased name and the raw key → value texts.

    Raises ValueError for a pair without '=' or a key given twice.
    """
    name, _, rest = spec.partition(":")
    pairs: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or not key:
            raise ValueError(f"parameter {item!r} is not of the form key=value")
        if key in pairs:
            raise ValueError(f"parameter {key!r} is given twice")
        pairs[key] = value.strip()
    return name.strip().lower(), pairs


def _convert(text: str, hint: Any, key: str) -> Any:
    origin = get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        options = [a for a in get_args(hint) if a is not type(None)]
        if text.lower() in {"none", "null", ""} and len(options) < len(get_args(hint)):
            return None
        errors = []
        for option in options:
            try:
                return _convert(text, option, key)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(errors[0] if errors else f"{key}: cannot read {text!r}")
    if origin is Literal:
        choices = [str(c) for c in get_args(hint)]
        if text not in choices:
            raise ValueError(f"{key} must be one of {', '.join(choices)}, got {text!r}")
        return text
    if hint is bool:
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise ValueError(f"{key} must be true or false, got {text!r}")
    if hint is int:
        try:
            return int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise ValueError(f"{key} must be an integer, got {text!r}") from None
            if not value.is_integer():
                raise ValueError(f"{key} must be an integer, got {text!r}") from None
            return int(value)
    if hint is float:
        try:
            return float(_fraction(text))
        except ValueError:
            raise ValueError(f"{key} must be a number, got {text!r}") from None
    if hint is str:
        return text
    raise ValueError(f"{key}: unsupported parameter type {hint!r}")  # pragma: no cover


def _fraction(text: str) -> float:
    """A float from '0.5', '1e-3' or a fraction '1/60'."""
    if "/" in text:
        top, _, bottom = text.partition("/")
        return float(top) / float(bottom)
    return float(text)


def parse_params(cls: type[P], raw: dict[str, str], base: P | None = None) -> P:
    """A `cls` instance: `base` (or the class defaults) with the raw key=value texts applied.

    Raises ValueError naming the valid keys for an unknown key, or the expected type.
    """
    hints = get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    for key, text in raw.items():
        if key not in names:
            raise ValueError(f"unknown parameter {key!r}; valid parameters: {', '.join(names)}")
        values[key] = _convert(text, hints[key], key)
    start = base if base is not None else cls()
    return dataclasses.replace(start, **values)  # type: ignore[type-var]


def describe_params(params: object) -> list[tuple[str, str]]:
    """(name, value) pairs of a parameter object, for help texts and headers."""
    return [(f.name, _show(getattr(params, f.name))) for f in dataclasses.fields(params)]  # type: ignore[arg-type]


def _show(value: object) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def spec_string(name: str, params: object, defaults: object) -> str:
    """``name:k=v,...`` listing only the parameters that differ from `defaults`."""
    changed = [
        f"{f.name}={_show(getattr(params, f.name))}"
        for f in dataclasses.fields(params)  # type: ignore[arg-type]
        if getattr(params, f.name) != getattr(defaults, f.name)
    ]
    return name + (":" + ",".join(changed) if changed else "")
