"""The `predictor` parameter of the allocation policies that order jobs by predicted runtimes
(SJF, HSDF): which runtime predictor of the `prediction` family they use."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator


class PredictorParams(BaseModel):
    """Parameters of a policy that uses a runtime predictor."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    predictor: str | None = Field(
        None,
        description=(
            "runtime predictor by name (`isthmus policies -f prediction`: user-last-two, requested, exact, knn); "
            "default: the environment's [policies] predictor, else user-last-two"
        ),
    )

    @field_validator("predictor")
    @classmethod
    def _known(cls, value: str | None) -> str | None:
        if value is None:
            return value
        from isthmus.policies import registry

        try:
            registry.info("prediction", value)
        except registry.PolicyError:
            valid = ", ".join(registry.names("prediction"))
            raise ValueError(f"one of the predictors {valid}") from None
        return value
