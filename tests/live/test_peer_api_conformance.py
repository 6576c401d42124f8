"""schemathesis against the peer routes a live manager with a peer serves (docs/federation.md):
every answer to a generated request (valid and invalid, with the peer's secret) is documented,
no 5xx, every response matches its schema, schema-violating requests are refused. The general
pass over the other routes is tests/live/test_api_conformance.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from livekit import LiveServer
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from test_api_conformance import CHECKS, EXAMPLES, NOTHING_RUNS_ENV

SECRET = "conformance-peer-secret"

PEER = """
selection = "lowest-qlen"
[[peers]]
name = "P"
address = "http://127.0.0.1:9"
token_env = "ISTHMUS_CONFORMANCE_PEER"
"""


@pytest.mark.slow
def test_peer_routes_conform_to_their_openapi(tmp_path: Path, tag: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISTHMUS_CONFORMANCE_PEER", SECRET)
    env_file = tmp_path / "env.toml"
    env_file.write_text(NOTHING_RUNS_ENV.replace('provisioning = "on-demand"\n', 'provisioning = "on-demand"\n' + PEER))
    server = LiveServer(env_file, tmp_path / "state", f"sqlite:///{tmp_path / 'isthmus.db'}", tag).start()
    try:
        config = SchemathesisConfig.from_dict(
            {"checks": {"negative_data_rejection": {"expected-statuses": [400, 401, 403, 404, 405, 409, 413, 422]}}}
        )
        schema = schemathesis.openapi.from_url(server.url + "/openapi.json", config=config)
        headers = {"Authorization": f"Bearer {SECRET}", "X-Isthmus-Peer": "P"}
        failures: list[str] = []
        seen: dict[str, set[int]] = {}
        operations = [r.ok() for r in schema.get_all_operations()]
        operations = [op for op in operations if op.label.split()[1].startswith("/peer/")]
        assert len(operations) == 9, [op.label for op in operations]
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
                    seen.setdefault(case.operation.label, set()).add(response.status_code)
                    case.validate_response(response, checks=CHECKS)

                try:
                    exercise()
                except Unsatisfiable:
                    assert mode is GenerationMode.NEGATIVE, op.label  # GET /peer/resources
                except Exception as exc:
                    failures.append(f"{op.label} ({mode.value}): {exc}")
        assert not failures, "\n\n".join(failures)
        # the secret worked: every operation's generated requests got past authentication (a
        # generated submitJob rarely satisfies the chain rules: 422 then, checked elsewhere)
        assert all(codes - {401} for codes in seen.values()), seen
        # (queryJob and cancelJob of a job the peer never sent: the documented 404)
        assert 404 in seen["POST /peer/jobs/query"] and 404 in seen["POST /peer/jobs/cancel"], seen
    finally:
        server.stop()
