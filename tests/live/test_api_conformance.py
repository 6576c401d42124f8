"""schemathesis against the OpenAPI document a live manager serves: every answer is documented.

A bounded pass (a few dozen generated requests per operation, valid and invalid) over every
operation with the admin token; the checks: no 5xx, every status code and content type
documented, every response body matching its schema, and schema-violating requests refused.
The environment has one cloud site whose VMs take a day to boot, so the generated jobs
(random commands) stay queued and never run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from livekit import LiveServer
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

NOTHING_RUNS_ENV = """
name = "conformance"
round_interval = "event"
[[sites]]
name = "cloud"
kind = "cloud"
max_vms = 2
cores_per_node = 2
boot_time = 86400
[policies]
allocation = "ff"
provisioning = "on-demand"
"""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    negative_data_rejection,
]
EXAMPLES = 15  # per operation and generation mode


@pytest.mark.slow
def test_served_openapi_conformance(tmp_path: Path, tag: str) -> None:
    env_file = tmp_path / "env.toml"
    env_file.write_text(NOTHING_RUNS_ENV)
    server = LiveServer(env_file, tmp_path / "state", f"sqlite:///{tmp_path / 'isthmus.db'}", tag).start()
    try:
        # 413 (batch over the limit, stated as maxItems) is how this API rejects an oversized batch
        config = SchemathesisConfig.from_dict(
            {"checks": {"negative_data_rejection": {"expected-statuses": [400, 401, 403, 404, 405, 409, 413, 422]}}}
        )
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json", config=config)
        headers = {"Authorization": f"Bearer {server.admin_token}"}
        failures: list[str] = []
        # POST /admin/stop would stop the server under test (tests/live/test_live_stop.py covers it)
        operations = [r.ok() for r in schema.get_all_operations()]
        operations = [op for op in operations if op.label != "POST /admin/stop"]
        assert len(operations) >= 15, [op.label for op in operations]
        for op in operations:
            for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

                @given(case=op.as_strategy(generation_mode=mode))
                @settings(
                    max_examples=EXAMPLES,
                    deadline=None,
                    database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                def exercise(case: schemathesis.Case) -> None:
                    response = case.call(base_url=server.url, headers=headers, timeout=20)
                    case.validate_response(response, checks=CHECKS)

                try:
                    exercise()
                except Unsatisfiable:
                    # no parameter or body to make invalid (GET /health, GET /sites, ...)
                    assert mode is GenerationMode.NEGATIVE, op.label
                except Exception as exc:
                    failures.append(f"{op.label} ({mode.value}): {exc}")
        assert not failures, "\n\n".join(failures)
    finally:
        server.stop()
