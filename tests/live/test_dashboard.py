"""The web dashboard in a real headless Chromium (Debian's, driven by Playwright): log in with a
token, see the sites and a submitted job appear and finish, cancel a job from the page, and a
user who sees only their own jobs. Screenshots of the pages are kept in ISTHMUS_TEST_ARTIFACTS
(default: the test's temporary directory)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from livekit import LiveServer, bag_env, wait_for, wait_state, write_env
from peerkit import federation

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser() -> Iterator[Any]:
    if not os.path.exists(CHROMIUM):
        pytest.skip("no chromium: scripts/test installs Debian's chromium (apt-get install chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield b
        finally:
            b.close()


def _artifacts(tmp_path: Path) -> Path:
    out = Path(os.environ.get("ISTHMUS_TEST_ARTIFACTS", tmp_path)) / "dashboard"
    out.mkdir(parents=True, exist_ok=True)
    return out


def test_dashboard_login_jobs_cancel_and_own_jobs_only(tmp_path: Path, tag: str, browser: Any) -> None:
    live = LiveServer(write_env(tmp_path / "env.toml"), tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    shots = _artifacts(tmp_path)
    try:
        c = live.client()
        page = browser.new_page()
        page.goto(live.url + "/")  # redirects to /ui/
        page.fill("#token", "not-a-token")
        page.click("#login-form button")
        page.wait_for_selector("#login-error:has-text('token refused')")
        page.fill("#token", live.admin_token)
        page.click("#login-form button")
        page.wait_for_selector("#sites tbody tr")
        assert "(admin)" in page.inner_text("#who")
        site_names = page.locator("#sites tbody tr td:first-child").all_inner_texts()
        assert site_names == [s["name"] for s in c.request("GET", "/sites")]

        quick = c.submit(command="sh", args=["-c", "sleep 4"], name="quick")
        page.wait_for_selector(f"#jobs tbody tr[data-job='{quick}']")  # appears while active
        assert page.inner_text("#error") == "", page.inner_text("#error")
        wait_state(c, quick, ("completed",), timeout=30)
        page.select_option("#state-filter", "all")
        row = page.locator(f"#jobs tbody tr[data-job='{quick}']")
        row.locator("td:nth-child(4):has-text('completed')").wait_for()
        queue = page.locator("#queues tbody tr td:first-child").all_inner_texts()
        assert queue == ["all sites"], queue
        assert page.is_visible("#no-peers") and not page.is_visible("#peers")
        # both charts drawn from GET /timeseries (the event log), not from samples of this page
        for chart in ("#chart", "#spend-chart"):
            page.wait_for_selector(f"{chart}[data-points]")
            assert int(page.get_attribute(chart, "data-points") or 0) > 1
        assert page.inner_text("#spend-now").startswith("$")
        row.locator("button:has-text('history')").click()
        page.wait_for_selector("#history tbody tr:has-text('completed')")
        page.screenshot(path=str(shots / "admin.png"), full_page=True)

        # cancel from the page
        page.select_option("#state-filter", "")
        long = c.submit(command="sleep", args=["60"], name="long")
        wait_state(c, long, ("running",), timeout=30)
        page.locator(f"#jobs tbody tr[data-job='{long}'] button:has-text('cancel')").click()
        wait_for(lambda: c.job(long)["state"] == "cancelled", timeout=20, what="the job cancelled from the page")

        # a user sees their own jobs only
        user_token = c.create_token("alice")["token"]
        mine = live.client(user_token).submit(command="sleep", args=["30"], name="alices")
        other = browser.new_page()
        other.goto(live.url + "/ui/")
        other.fill("#token", user_token)
        other.click("#login-form button")
        other.wait_for_selector(f"#jobs tbody tr[data-job='{mine}']")
        other.select_option("#state-filter", "all")
        other.wait_for_timeout(2500)  # one refresh with every state
        shown = other.locator("#jobs tbody tr").evaluate_all("rows => rows.map(r => r.dataset.job)")
        assert shown == [str(mine)], shown
        assert other.inner_text("#who") == "alice"
        other.screenshot(path=str(shots / "user.png"), full_page=True)
        c.cancel(mine)
    finally:
        live.stop()
    assert (shots / "admin.png").stat().st_size > 0 and (shots / "user.png").stat().st_size > 0


def test_dashboard_shows_peers_up_with_their_resources_then_down(tmp_path: Path, tag: str, browser: Any) -> None:
    # A, B and C connected as peers (the peers panel): A's page shows B and C up with
    # the resource data they sent, and B down once it is stopped
    shots = _artifacts(tmp_path)
    with federation(tmp_path, tag, names=("A", "B", "C"), nodes=(1, 2, 3)) as fed:
        page = browser.new_page()
        page.goto(fed["A"].url + "/ui/")
        page.fill("#token", fed["A"].admin_token)
        page.click("#login-form button")
        page.wait_for_selector("#peers tbody tr[data-peer='C'] td:nth-child(4):has-text('up')")
        rows = page.locator("#peers tbody tr").evaluate_all(
            "rows => rows.map(r => Array.from(r.children).map(td => td.textContent))"
        )
        by_name = {r[0]: r for r in rows}
        assert sorted(by_name) == ["B", "C"]
        assert by_name["B"][2] == "both" and by_name["B"][3] == "up"
        # idle / processors from each peer's resource data: B has 2 one-core nodes, C has 3
        wait_for(
            lambda: page.inner_text("#peers tbody tr[data-peer='C'] td:nth-child(8)") == "3 / 3",
            timeout=20,
            what="C's resource data on the page",
        )
        assert page.inner_text("#peers tbody tr[data-peer='B'] td:nth-child(8)") == "2 / 2"
        assert not page.is_visible("#no-peers")
        page.screenshot(path=str(shots / "peers.png"), full_page=True)
        fed["B"].stop()
        page.wait_for_selector("#peers tbody tr[data-peer='B'] td:nth-child(4):has-text('down')", timeout=30_000)
    assert (shots / "peers.png").stat().st_size > 0


def test_dashboard_shows_bags_with_their_progress_to_their_owner(tmp_path: Path, tag: str, browser: Any) -> None:
    env = bag_env(tmp_path / "env.toml")
    live = LiveServer(env, tmp_path / "state", f"sqlite:///{tmp_path / 'db'}", tag).start()
    shots = _artifacts(tmp_path)
    try:
        c = live.client()
        page = browser.new_page()
        page.goto(live.url + "/ui/")
        page.fill("#token", live.admin_token)
        page.click("#login-form button")
        page.wait_for_selector("#no-bags", state="visible")
        # 60 tasks of 0.3 s on 4 processors: a few seconds, long enough to be seen running
        bag = c.submit_bag(sweep={"template": "sleep 0.3; echo {x}", "params": ["x=0..59"]}, name="sweep")
        row = page.locator(f"#bags tbody tr[data-bag='{bag}']")
        row.wait_for()
        assert row.locator("td:nth-child(3)").inner_text() == "sweep"
        assert "c1: " in row.locator("td:nth-child(11)").inner_text() or c.job(bag)["state"] != "running"
        page.screenshot(path=str(shots / "bags-running.png"), full_page=True)
        wait_state(c, bag, ("completed",), timeout=90)
        page.select_option("#state-filter", "all")
        row.locator("td:nth-child(6):has-text('60 / 60')").wait_for(timeout=10_000)
        assert row.locator("td:nth-child(4)").inner_text() == "completed"
        assert row.locator("progress").get_attribute("value") == "60"
        page.screenshot(path=str(shots / "bags-done.png"), full_page=True)
        # another user sees none of the admin's bags
        other = browser.new_page()
        other.goto(live.url + "/ui/")
        other.fill("#token", c.create_token("bob")["token"])
        other.click("#login-form button")
        other.wait_for_selector("#sites tbody tr")
        other.select_option("#state-filter", "all")
        other.wait_for_timeout(2500)
        assert other.is_visible("#no-bags") and other.locator("#bags tbody tr").count() == 0
    finally:
        live.stop()
    assert (shots / "bags-done.png").stat().st_size > 0
