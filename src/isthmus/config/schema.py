"""Validation of an environment document (the parsed TOML or YAML file) into an `Environment`.

One path, whose problems are reported together: the pydantic models (`isthmus.config.models`:
types, ranges, unknown keys with the closest valid key suggested, each driver's own options),
then the rules across keys and items on the validated models (`isthmus.config.checks`), rendered
at their key path and line (`isthmus.config.render`), then converted (`isthmus.config.convert`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from isthmus.config.checks import Parts, PolicyChecker, check, check_structure, registry_check
from isthmus.config.convert import environment_to_dict, spec_to_environment
from isthmus.config.errors import ConfigError, show_value
from isthmus.config.models import (
    BILLING_UNITS,
    CLOUD_ONLY_KEYS,
    EnvironmentSpec,
    Loc,
    PoliciesSpec,
    PolicySpec,
    SiteSetSpec,
    SiteSpec,
)
from isthmus.config.render import LineLocator, pydantic_problems, to_problems
from isthmus.model.environment import Environment

__all__ = [
    "BILLING_UNITS",
    "CLOUD_ONLY_KEYS",
    "EnvironmentSpec",
    "LineLocator",
    "Loc",
    "PoliciesSpec",
    "PolicyChecker",
    "PolicySpec",
    "SiteSetSpec",
    "SiteSpec",
    "environment_to_dict",
    "spec_to_environment",
    "validate_document",
    "validate_environment",
]


def validate_document(
    data: Any,
    *,
    file: str | None = None,
    default_name: str | None = None,
    line_of: LineLocator | None = None,
    check_policy: PolicyChecker | None = None,
) -> Environment:
    """Validate a parsed environment document and build the `Environment` it describes.

    `file` names the source in errors; `default_name` is used when the document has no
    ``name``; `line_of` maps a key path to a line (YAML); `check_policy` replaces the policy
    registry check (tests). Raises `ConfigError` listing every problem found.
    """
    if not isinstance(data, Mapping):
        raise ConfigError(
            file,
            f"expected a table of keys (name, sites, sets, policies, ...) at the top level, got {show_value(data)}",
        )
    if "name" not in data and default_name:
        data = {"name": default_name, **data}
    checker = check_policy or registry_check
    found: list[tuple[Loc, str]] = []
    spec: EnvironmentSpec | None = None
    try:
        spec = EnvironmentSpec.model_validate(data)
    except ValidationError as exc:
        found.extend(pydantic_problems(exc, data))
    found.extend(check(Parts.of_spec(spec) if spec is not None else Parts.of_document(data), checker))
    if found or spec is None:
        raise ConfigError(file, to_problems(found, data, line_of))
    env = spec_to_environment(spec)
    if checker is registry_check:
        check_structure(env, file, line_of)
    return env


def validate_environment(env: Environment, *, check_policy: PolicyChecker | None = None) -> Environment:
    """Check an `Environment` built in code against every file rule; return the normalized copy.

    Raises `ConfigError` (file ``<environment NAME>``) when the environment could not be written
    as a valid file.
    """
    return validate_document(environment_to_dict(env), file=f"<environment {env.name}>", check_policy=check_policy)
