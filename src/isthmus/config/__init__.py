"""Environments: files (TOML/YAML, validated with pydantic), bundled names and their parameters.

Public API::

    load_environment(spec)        # bundled name[:k=v,...] or path to .toml/.yaml/.yml
    load_file(path)               # one file
    environment_from_text(text, fmt, file=...)
    validate_document(data, file=...)   # a parsed dict
    validate_environment(env)     # an Environment built in code
    environment_to_dict(env)      # normalized file form (for JSON, TOML, YAML)
    dump_environment(env, "toml" | "yaml")
    single_cluster(processors)    # one cluster, event-triggered rounds, FCFS
    bundled_names(), bundled(name), parse_spec(spec)
    ConfigError, Problem

See docs/environments.md for the file format and the bundled environments.
"""

from typing import TYPE_CHECKING

from isthmus import lazy
from isthmus.config.bundled import (
    DEFAULT_ENVIRONMENT,
    EC2_PRICE_PER_HOUR,
    BundledEnvironment,
    Parameter,
    bundled,
    bundled_document,
    bundled_environment,
    bundled_names,
    parse_spec,
    single_cluster,
    sites_summary,
)
from isthmus.config.errors import ConfigError, Problem

if TYPE_CHECKING:
    from isthmus.config.loader import (
        dump_environment,
        environment_from_text,
        is_file_spec,
        load_environment,
        load_file,
        parse_text,
    )
    from isthmus.config.schema import environment_to_dict, validate_document, validate_environment

#: Names loaded on first use (isthmus.lazy): the file reader and the schema load the pydantic
#: models (a tenth of a second), which `single_cluster` (``isthmus simulate --cluster P``) does
#: not need.
_LAZY = {
    **dict.fromkeys(
        ("dump_environment", "environment_from_text", "is_file_spec", "load_environment", "load_file", "parse_text"),
        "loader",
    ),
    **dict.fromkeys(("environment_to_dict", "validate_document", "validate_environment"), "schema"),
}

__all__ = [
    "DEFAULT_ENVIRONMENT",
    "EC2_PRICE_PER_HOUR",
    "BundledEnvironment",
    "ConfigError",
    "Parameter",
    "Problem",
    "bundled",
    "bundled_document",
    "bundled_environment",
    "bundled_names",
    "dump_environment",
    "environment_from_text",
    "environment_to_dict",
    "is_file_spec",
    "load_environment",
    "load_file",
    "parse_spec",
    "parse_text",
    "single_cluster",
    "sites_summary",
    "validate_document",
    "validate_environment",
]


if not TYPE_CHECKING:  # type checkers see the imports above

    def __getattr__(name: str) -> object:
        """A name of `_LAZY`, imported from its submodule on first use."""
        return lazy.load_name(__name__, _LAZY, name)

    def __dir__() -> list[str]:
        """The package's names, the lazily loaded ones included."""
        return lazy.names(__name__, _LAZY)
