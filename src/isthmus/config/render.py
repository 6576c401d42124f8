"""Problems as a reader sees them: pydantic errors in plain words, at their key path, in document
order, with the line in the file and the item (``site 'public'``) they are in."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

from isthmus.config.errors import Problem, format_path, show_value
from isthmus.config.models import (
    NAME_RULE,
    EnvironmentSpec,
    Family,
    FederationSpec,
    ImageSpec,
    InstanceTypeSpec,
    Loc,
    LrmSpec,
    PeerSpec,
    PoliciesSpec,
    PolicySpec,
    ProviderSpec,
    SiteSetSpec,
    SiteSpec,
    suggest_key,
)

__all__ = ["LineLocator", "pydantic_problems", "to_problems"]

LineLocator = Callable[[Loc], int | None]
"""Maps a key path to its 1-based line in the file, if known."""

_TOP_ORDER = list(EnvironmentSpec.model_fields)
_FIELD_ORDER: dict[str, int] = {}
for _model in (
    EnvironmentSpec,
    SiteSpec,
    SiteSetSpec,
    PoliciesSpec,
    PolicySpec,
    InstanceTypeSpec,
    ImageSpec,
    PeerSpec,
    FederationSpec,
):
    for _key in _model.model_fields:
        _FIELD_ORDER.setdefault(_key, len(_FIELD_ORDER))


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds directly or as list items, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The model whose keys are valid at `loc` (the parent of a key), or None (free-form)."""
    model: type[BaseModel] = EnvironmentSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        inner = _inner_model(field.annotation)
        if inner is None:
            return None
        model = inner
    return model


def _driver_model(model: type[BaseModel], loc: Loc, data: Any) -> type[BaseModel] | None:
    """The options model of the driver the table at `loc` names (an ``lrm`` or ``provider``)."""
    family: Family | None = "batch" if model is LrmSpec else "cloud" if model is ProviderSpec else None
    for part in loc:
        data = _child(data, part)
    driver = data.get("driver") if isinstance(data, Mapping) else None
    if family is None or not isinstance(driver, str):
        return None
    from isthmus.backends import registry

    try:
        return registry.get(family, driver).options_model()
    except KeyError:
        return None


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, Mapping):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _is_int_field(loc: Loc, data: Any) -> bool:
    if not loc or not isinstance(loc[-1], str):
        return False
    model = _model_at(loc[:-1])
    if model is not None and loc[-1] not in model.model_fields:
        model = _driver_model(model, loc[:-1], data)
    if model is None or loc[-1] not in model.model_fields:
        return False
    annotation = model.model_fields[loc[-1]].annotation
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    return int in args


_COMPARE = {
    "greater_than": (">", "gt"),
    "greater_than_equal": (">=", "ge"),
    "less_than": ("<", "lt"),
    "less_than_equal": ("<=", "le"),
}


#: custom errors whose message already names the value (isthmus.config.models)
_COMPLETE = frozenset({"unknown_key", "driver_name"})


def _describe_pydantic_error(err: Mapping[str, Any], data: Any) -> str:
    kind = err["type"]
    loc: Loc = tuple(err["loc"])
    value = err.get("input")
    got = f", got {show_value(value)}"
    if kind == "missing":
        return "required key is missing"
    if kind in _COMPLETE:
        return str(err.get("msg"))
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        valid = list(parent.model_fields) if parent else []
        return f"unknown key {str(loc[-1])!r}; " + suggest_key(str(loc[-1]), valid)
    if kind in _COMPARE:
        op, ctx_key = _COMPARE[kind]
        limit = (err.get("ctx") or {}).get(ctx_key)
        if isinstance(limit, float) and limit.is_integer():
            limit = int(limit)
        what = "an integer" if _is_int_field(loc, data) else "a number"
        return f"expected {what} {op} {limit}{got}"
    if kind == "string_pattern_mismatch":
        key = loc[-1] if loc else None
        if key == "address":
            return f"expected an http:// or https:// URL (scheme, host[:port], optional path){got}"
        if key == "token_env":
            return f"expected the name of an environment variable (letters, digits, '_'){got}"
        return f"expected {NAME_RULE}{got}"
    if kind == "literal_error":
        expected = (err.get("ctx") or {}).get("expected", "")
        message = f"expected one of {expected}{got}"
        if isinstance(value, str) and loc and isinstance(loc[-1], str) and loc[-1] == "kind":
            close = difflib.get_close_matches(value, ["cluster", "cloud"], n=1)
            if close:
                message += f"; did you mean {close[0]!r}?"
        return message
    if kind == "string_too_short":
        return f"expected a non-empty string{got}"
    if kind == "int_type":
        return f"expected an integer{got}"
    if kind in ("float_type", "finite_number"):
        return f"expected a finite number{got}"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a table{got}"
    msg = str(err.get("msg", "invalid value"))
    if msg.startswith("Input should be "):
        msg = "expected " + msg[len("Input should be ") :]
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    return msg + got


def pydantic_problems(exc: ValidationError, data: Any) -> list[tuple[Loc, str]]:
    """Each error of `exc` (validating the document `data`) as (key path, message in plain words)."""
    out: list[tuple[Loc, str]] = []
    for err in exc.errors(include_url=False):
        out.append((tuple(err["loc"]), _describe_pydantic_error(err, data)))
    return out


def _sort_key(loc: Loc) -> tuple[tuple[int, int], ...]:
    key: list[tuple[int, int]] = []
    for n, part in enumerate(loc):
        if isinstance(part, int):
            key.append((0, part))
        elif n == 0:
            key.append((1, _TOP_ORDER.index(part) if part in _TOP_ORDER else len(_TOP_ORDER)))
        else:
            key.append((1, _FIELD_ORDER.get(part, len(_FIELD_ORDER))))
    return tuple(key)


def _context(data: Mapping[str, Any], loc: Loc) -> str | None:
    if len(loc) >= 2 and loc[0] in ("sites", "sets") and isinstance(loc[1], int):
        items = data.get(str(loc[0]))
        if isinstance(items, list) and loc[1] < len(items) and isinstance(items[loc[1]], Mapping):
            name = items[loc[1]].get("name")
            if isinstance(name, str) and name:
                return f"{'site' if loc[0] == 'sites' else 'set'} {name!r}"
    return None


def to_problems(
    found: Iterable[tuple[Loc, str]], data: Mapping[str, Any], line_of: LineLocator | None
) -> list[Problem]:
    """`found` (key path, message) pairs as problems in document order, with lines and items."""
    ordered = sorted(found, key=lambda item: _sort_key(item[0]))
    return [
        Problem(format_path(loc), message, line_of(loc) if line_of else None, _context(data, loc))
        for loc, message in ordered
    ]
