"""Issue 27, starvation findings: one owner cannot fill the queue everyone shares, nor the take queue.

A real studio (test model, one CPU worker process) on 127.0.0.1; the attacker is a token holder calling
the HTTP API as a hostile client would (raw `/gradio_api/call/...`, never reading the answers).
"""

from __future__ import annotations

import time

import httpx
import pytest
from studio_helpers import api_client, form, fresh_studio


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    with fresh_studio(tmp_path_factory) as (url, svc):
        yield url, svc


def owner_of(svc, client) -> str:
    return svc.identity.owner_of(client.headers["Authorization"][7:])


def test_follow_flood_from_one_token_leaves_other_users_working(studio) -> None:
    """Finding 5: 80 never-read /follow calls from one token filled Gradio's queue (64, shared by every
    event): other users' events were refused, pages could not load, the attacker's own /cancel too."""
    url, svc = studio
    token = svc.identity.new_token()
    attacker = api_client(url, token=token)
    slow = attacker.predict(form(steps=200, variations=16, formats=["wav"]), "", api_name="/submit")
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(timeout=30) as http:
        for i in range(80):  # joined, never read
            r = http.post(f"{url}/gradio_api/call/follow", headers=auth,
                          json={"data": [slow["takes"][i % len(slow["takes"])]]})
            assert r.status_code in (200, 503), r.text  # past the queue's size a join may be refused
        # A second user, arriving now: the page's first events and a whole song still go through.
        user = api_client(url, token=svc.identity.new_token())
        assert httpx.get(url + "/", timeout=30).status_code == 200
        assert user.predict("", api_name="/sessions") == []
        mine = user.predict(form(steps=4, formats=["wav"]), "", api_name="/submit")
        # The attacker's own cancel is not stuck behind its follows either.
        assert attacker.predict(slow["takes"][0], True, api_name="/cancel")["cancelling"]
        final = list(user.submit(mine["takes"][0], api_name="/follow"))[-1]
        assert final["status"] == "done", final
    assert svc.admission.held(owner_of(svc, attacker), "follow") <= svc.admission.limits.follows_per_owner


def test_follows_over_the_per_owner_limit_are_refused_at_once(studio) -> None:
    """Finding 5: a follow over the owner's limit is refused with a reason instead of holding a slot."""
    url, svc = studio
    c = api_client(url, token=svc.identity.new_token())
    r = c.predict(form(steps=200, variations=16, formats=["wav"]), "", api_name="/submit")
    limit = svc.admission.limits.follows_per_owner
    last = r["takes"][-limit:]  # the last in line: still queued while the first render
    jobs = [c.submit(t, api_name="/follow") for t in last]
    deadline = time.monotonic() + 60
    while svc.admission.held(owner_of(svc, c), "follow") < limit:  # each has started and holds its slot
        assert time.monotonic() < deadline and not any(j.done() for j in jobs)
        time.sleep(0.05)
    with pytest.raises(Exception, match="already follow"):
        c.submit(r["takes"][0], api_name="/follow").result(timeout=60)
    c.predict(r["takes"][0], True, api_name="/cancel")
    for j in jobs:
        j.result(timeout=120)


def test_per_owner_admission_refuses_before_anything_is_stored(studio) -> None:
    """Finding 6: one owner could fill the take queue, and a refused submit still stored a session and
    N failed takes."""
    url, svc = studio
    c = api_client(url, token=svc.identity.new_token())
    owner = owner_of(svc, c)
    limit = svc.admission.limits.takes_per_owner
    first = c.predict(form(steps=200, variations=limit, formats=["wav"]), "", api_name="/submit")
    sessions = svc.store.list_sessions(owner=owner)
    with pytest.raises(Exception, match="limit is 16 per person"):
        c.predict(form(steps=4, formats=["wav"]), "", api_name="/submit")
    with pytest.raises(Exception, match="limit is 16 per person"):
        c.predict(form(steps=4, formats=["wav"]), first["session_id"], api_name="/submit")
    assert svc.store.list_sessions(owner=owner) == sessions  # no new session
    assert len(svc.store.list_takes(first["session_id"])) == limit  # no failed takes
    other = api_client(url, token=svc.identity.new_token())  # another owner is not held back by it
    assert other.predict(form(steps=4, formats=["wav"]), "", api_name="/submit")["takes"]
    c.predict(first["takes"][0], True, api_name="/cancel")
