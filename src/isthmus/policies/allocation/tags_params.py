"""Parameters of TAGS-chain and TAGS-sets (isthmus.policies.allocation.tags).

Apart from the policies: tags.py is compiled with mypyc (setup.py), whose classes hold their
attributes natively, and a pydantic model's class body (`Field(...)` defaults) is not
compilable as such; this module stays pure Python.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


def one_or_many(value: object) -> object:
    """Let a single number stand for a one-element list of limits (`limits=1500`)."""
    return (value,) if isinstance(value, int | float) and not isinstance(value, bool) else value


class TagsChainParams(BaseModel):
    """Parameters of TAGS-chain."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    limits: tuple[float, ...] = Field(
        (1500.0,), min_length=1, description="runtime limit (s) of each site of a chain but the last"
    )
    dispatch: Literal["rr", "rnd"] = Field("rr", description="how arrivals pick a chain")
    seed: int = Field(0, description="seed of the RND dispatcher")

    _one_limit = field_validator("limits", mode="before")(one_or_many)


class TagsSetsParams(BaseModel):
    """Parameters of TAGS-sets."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    limits: tuple[float, ...] | None = Field(
        None, description="runtime limits (s) of all sets but the last, overriding the environment's"
    )

    _one_limit = field_validator("limits", mode="before")(one_or_many)
