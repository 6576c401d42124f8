"""An API client for the CLI tests that records submissions instead of sending them (the live
tests run the real client)."""

from __future__ import annotations

from typing import Any, ClassVar


class FakeClient:
    """Stands in for the API client: records each submission and answers job id 41."""

    specs: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, *_args: Any, **_kwargs: Any) -> None:
        pass

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    def submit(self, **spec: Any) -> int:
        FakeClient.specs.append(spec)
        return 41
