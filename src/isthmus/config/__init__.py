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
from isthmus.config.loader import (
    dump_environment,
    environment_from_text,
    is_file_spec,
    load_environment,
    load_file,
    parse_text,
)
from isthmus.config.schema import environment_to_dict, validate_document, validate_environment

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
