"""The bundled `local` environment runs live: two clusters, a free private cloud, a paid public cloud."""

from __future__ import annotations

from pathlib import Path

import pytest
from livekit import LiveServer, wait_for

from isthmus.config.loader import load_environment


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_bundled_local_environment_spills_to_both_clouds_and_bills(tmp_path: Path, db_url: str, tag: str) -> None:
    env = load_environment("local")
    public = env.site("local-public")
    server = LiveServer(Path("local"), tmp_path / "state", db_url, tag).start()
    try:
        c = server.client()
        ids = [c.submit(command="sleep", args=["5"]) for _ in range(14)]

        def done() -> list[dict] | None:  # type: ignore[type-arg]
            jobs = [c.job(i) for i in ids]
            return jobs if all(j["state"] == "completed" for j in jobs) else None

        jobs = wait_for(done, timeout=60, interval=0.5, what="all 14 jobs completed")
        used = {j["site"] for j in jobs}
        assert {"local-a", "local-b", "local-private", "local-public"} <= used, used
        vms = c.vms(all_=True)
        paid = [v for v in vms if v["site_name"] == "local-public"]
        assert paid and all(v["ready_at"] - v["leased_at"] >= public.boot_time - 0.05 for v in paid)
        for v in vms:
            site = env.site(v["site_name"])
            # billing exactly as the simulated cloud: per started increment, from lease to release
            assert v["charged_cost"] == pytest.approx(site.charged_cost(v["lease_seconds"]))
            if site.is_paid:
                assert v["charged_cost"] >= public.price_per_increment
            else:
                assert v["charged_cost"] == 0.0
    finally:
        server.stop()
