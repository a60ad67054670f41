"""Issue 27, finding 8 and the live-URL Low items: the listener cap holds under concurrency, an owner
holds a bounded number of streams, a finished or deleted take's live URL is a 404.

A real studio (test model, one CPU worker) on 127.0.0.1; listeners are raw sockets that never read.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
from studio_helpers import api_client, form, fresh_studio


@pytest.fixture(scope="module")
def studio(tmp_path_factory: pytest.TempPathFactory):
    with fresh_studio(tmp_path_factory) as (url, svc):
        yield url, svc


def queued_live_url(client, n: int = 16) -> tuple[dict, str]:
    """The live URL of the last of `n` takes (still queued for a while: its stream stays open)."""
    r = client.predict(form(steps=200, variations=n, formats=["wav"]), "", api_name="/submit")
    for snap in client.submit(r["takes"][-1], api_name="/follow"):
        if snap.get("live_url"):
            return r, snap["live_url"]
    raise AssertionError("no live URL while queued")


def open_listener(url: str, path: str) -> socket.socket:
    """A listener that sends its request and never reads the answer."""
    u = urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: {u.hostname}\r\n\r\n".encode())
    return s


def status_of(s: socket.socket) -> int:
    return int(s.recv(64).split(b" ", 2)[1])


def test_live_listener_cap_is_enforced_under_concurrency(studio, monkeypatch) -> None:
    """Finding 8: the 32-listener cap was counted only once a body started, so concurrent requests all
    passed it. Here: the cap is 5, 12 listeners arrive together, at most 5 get 200."""
    from studio import admission, live

    url, svc = studio
    monkeypatch.setattr(live, "MAX_STREAMS", 5)
    monkeypatch.setattr(svc.admission, "limits", admission.Limits(streams_per_owner=100))
    c = api_client(url, token=svc.identity.new_token())
    r, path = queued_live_url(c)
    socks = [open_listener(url, path) for _ in range(12)]
    codes = sorted(status_of(s) for s in socks)
    assert codes.count(200) == 5 and codes.count(503) == 7, codes
    for s in socks:
        s.close()
    c.predict(r["takes"][0], True, api_name="/cancel")


def test_live_streams_per_owner_are_limited_and_given_back(studio) -> None:
    """Finding 8: listener slots were held for ever; one owner could take them all."""
    url, svc = studio
    c = api_client(url, token=svc.identity.new_token())
    owner = svc.identity.owner_of(c.headers["Authorization"][7:])
    r, path = queued_live_url(c)
    limit = svc.admission.limits.streams_per_owner
    socks = [open_listener(url, path) for _ in range(limit)]
    assert [status_of(s) for s in socks] == [200] * limit
    extra = httpx.get(url + path, timeout=10)
    assert extra.status_code == 429 and "close one first" in extra.text
    for s in socks:
        s.close()
    deadline = time.monotonic() + 30
    while svc.admission.held(owner, "stream"):  # closed listeners give their places back
        assert time.monotonic() < deadline
        time.sleep(0.1)
    c.predict(r["takes"][0], True, api_name="/cancel")


def test_live_url_of_a_finished_or_deleted_take_is_404(studio) -> None:
    """Low (4): a finished take's live URL gave 200 and no bytes (the docs say 404); a deleted take's
    live URL kept streaming."""
    url, svc = studio
    c = api_client(url, token=svc.identity.new_token())
    r = c.predict(form(steps=4, formats=["wav"]), "", api_name="/submit")
    snaps = list(c.submit(r["takes"][0], api_name="/follow"))
    path = next(s["live_url"] for s in snaps if s.get("live_url"))
    assert snaps[-1]["status"] == "done"
    assert httpx.get(url + path, timeout=10).status_code == 404
    r2, path2 = queued_live_url(c, 8)
    c.predict(r2["session_id"], r2["takes"][-1], "", "", "true", api_name="/set_take")
    assert httpx.get(url + path2, timeout=10).status_code == 404
    c.predict(r2["takes"][0], True, api_name="/cancel")
