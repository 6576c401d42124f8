"""The jobs and bags routers over a running manager: submit, list, show, cancel, output; and
the method checks every router's paths share (405 listing the methods a path has)."""

from __future__ import annotations

from serverkit import MAX_BATCH, Api


def test_the_jobs_router_creates_and_lists_each_users_jobs(api: Api) -> None:
    alice, bob = api.user("alice"), api.user("bob")
    one = api.client.post("/jobs", json={"command": "sleep", "args": ["60"], "name": "one"}, headers=alice)
    assert one.status_code == 201, one.text
    batch = api.client.post("/jobs/batch", json=[{"command": "true"}, {"command": "true", "size": 2}], headers=alice)
    assert batch.status_code == 201, batch.text
    ids = [one.json()["id"], *(r["id"] for r in batch.json())]
    assert len(set(ids)) == 3

    listed = api.client.get("/jobs", headers=alice).json()
    assert sorted(j["id"] for j in listed) == sorted(ids)
    assert {(j["user"], j["state"]) for j in listed} == {("alice", "queued")}
    assert [j["size"] for j in sorted(listed, key=lambda j: j["id"])] == [1, 1, 2]
    assert all(j["reason"] and j["reason_code"] for j in listed)  # a listing says why each job waits
    # another user sees none of them, and a job of someone else answers as a missing one
    assert api.client.get("/jobs", headers=bob).json() == []
    assert api.client.get(f"/jobs/{ids[0]}", headers=bob).status_code == 404
    assert api.client.post(f"/jobs/{ids[0]}/cancel", headers=bob).status_code == 404
    # the admin sees everyone's, or one user's
    assert sorted(j["id"] for j in api.client.get("/jobs", params={"user": "alice"}, headers=api.admin).json()) == ids
    assert api.client.get("/jobs", params={"user": "bob"}, headers=api.admin).json() == []

    shown = api.client.get(f"/jobs/{ids[0]}", headers=alice).json()
    assert shown["name"] == "one" and shown["spec"]["args"] == ["60"]
    assert shown["history"][0]["state"] == "queued"
    assert shown["reason"] and shown["reason_code"]  # why it waits: its VM boots for a day

    output = api.client.get(f"/jobs/{ids[0]}/output", headers=alice)
    assert (output.status_code, output.text, output.headers["X-Offset"]) == (200, "", "0")  # no run yet

    assert api.client.post(f"/jobs/{ids[0]}/cancel", headers=alice).json() == {"id": ids[0], "state": "cancelled"}
    again = api.client.post(f"/jobs/{ids[0]}/cancel", headers=alice)
    assert again.status_code == 409 and "already ended" in again.json()["detail"]
    assert sorted(j["id"] for j in api.client.get("/jobs", headers=alice).json()) == ids[1:]
    ended = api.client.get("/jobs", params={"state": "cancelled"}, headers=alice).json()
    assert [j["id"] for j in ended] == [ids[0]]


def test_a_batch_over_the_limit_is_refused_before_any_job_is_taken(api: Api) -> None:
    alice = api.user("alice")
    answer = api.client.post("/jobs/batch", json=[{"command": "true"}] * (MAX_BATCH + 1), headers=alice)
    assert answer.status_code == 413 and f"at most {MAX_BATCH}" in answer.json()["detail"]
    half_bad = api.client.post("/jobs/batch", json=[{"command": "true"}, {"command": "true", "size": 0}], headers=alice)
    assert half_bad.status_code == 422, half_bad.text  # all or none: the valid first one is not taken
    assert api.client.get("/jobs", headers=alice).json() == []


def test_a_method_a_path_does_not_have_answers_405_with_the_methods_it_has(api: Api) -> None:
    for method, path, allowed in [
        ("GET", "/jobs/batch", "POST"),  # not GET /jobs/{job_id} with job_id "batch"
        ("DELETE", "/jobs/1", "GET"),
        ("POST", "/sites", "GET"),
        ("GET", "/tokens/abcd", "DELETE"),
        ("GET", "/peer/open", "POST"),
        ("POST", "/health", "GET"),
        ("POST", "/metrics", "GET"),
    ]:
        answer = api.client.request(method, path, headers=api.admin)
        assert (answer.status_code, answer.headers.get("Allow")) == (405, allowed), (method, path)


def test_the_bags_router_takes_and_shows_a_bag(api: Api) -> None:
    alice, bob = api.user("alice"), api.user("bob")
    answer = api.client.post("/bags", json={"tasks": ["true", "false"], "name": "pair"}, headers=alice)
    assert answer.status_code == 201, answer.text
    bag = answer.json()["id"]
    shown = api.client.get(f"/bags/{bag}", headers=alice).json()
    assert (shown["name"], shown["user"], shown["progress"]["tasks"]) == ("pair", "alice", 2)
    assert [b["id"] for b in api.client.get("/bags", headers=alice).json()] == [bag]
    results = api.client.get(f"/bags/{bag}/results", headers=alice).json()
    assert [(r["task"], r["command"], r["state"]) for r in results] == [(0, "true", "queued"), (1, "false", "queued")]
    assert api.client.get(f"/bags/{bag}/tasks/1/output", headers=alice).text == ""
    assert api.client.get(f"/bags/{bag}/tasks/2/output", headers=alice).status_code == 404
    assert api.client.get(f"/bags/{bag}", headers=bob).status_code == 404
    # a job that is no bag is not one here either
    job = api.client.post("/jobs", json={"command": "true"}, headers=alice).json()["id"]
    assert api.client.get(f"/bags/{job}", headers=alice).status_code == 404
