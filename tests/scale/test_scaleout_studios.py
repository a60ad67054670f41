"""Two `studio serve` processes on one PostgreSQL database and one data folder, driven by 20 API clients
at once; one studio is killed (SIGKILL, studio and workers) while it renders.

What this pins (issue 17): the takes the dead studio had not finished come back "interrupted" through
the other studio's lease recovery, while that one keeps running, and can be retried there with their
seeds; the live studio's takes all finish untouched; no take is lost or duplicated, no two takes share a
file, and the database passes `Store.check_integrity()` afterwards. Real processes, real sockets, a real
PostgreSQL server (tests/pg_server.py), the test model on CPU workers.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from pg_server import PgServer, running_server
from studio_helpers import ServeProcess, api_client, form

from studio.store import DONE, INTERRUPTED, Store

CLIENTS = 20


@pytest.fixture(scope="module")
def pg() -> PgServer:
    with running_server() as server:
        yield server


def test_two_studios_on_one_database_one_killed_mid_generation(tmp_path: Path, pg: PgServer) -> None:
    data = tmp_path / "data"
    with pg.database() as url:
        # --test-crop-frames keeps each take short. The studio that is killed gets the most steps a take may
        # have (200) and is killed the moment one of its takes runs, so it dies mid-take with takes waiting
        # behind it on any machine (at 100 steps, and ten status calls before the kill, a fast machine had
        # finished all ten). B's takes, which all run to the end, keep 100.
        # All 20 clients hold the machine's token (one owner): lift the per-owner limit above them.
        args = ("--db", url, "--test-crop-frames", "64", "--takes-per-owner", str(2 * CLIENTS))
        a = ServeProcess(data, tmp_path, *args)
        b = ServeProcess(data, tmp_path, *args)
        try:
            watch = {a.url: a.wait_ready(), b.url: b.wait_ready()}  # one polling client per studio

            def status(studio_url: str, take_id: str) -> str:
                return watch[studio_url].predict(take_id, "", api_name="/take")["status"]

            def submit(i: int) -> tuple[str, str, str]:
                studio = a if i % 2 == 0 else b
                c = api_client(studio.url, data)  # one client (connection, queue) per musician
                steps = 200 if studio is a else 100
                r = c.predict(form(title=f"client {i}", steps=steps, formats=["wav"]), "", api_name="/submit")
                return studio.url, r["session_id"], r["takes"][0]

            with ThreadPoolExecutor(CLIENTS) as pool:
                submitted = list(pool.map(submit, range(CLIENTS)))
            mine = {u: [(s, t) for uu, s, t in submitted if uu == u] for u in (a.url, b.url)}
            assert len({t for _, _, t in submitted}) == CLIENTS

            # Kill studio A as soon as one of its takes is being rendered (the others wait behind it).
            deadline = time.monotonic() + 120
            while not any(status(a.url, t) == "running" for _, t in mine[a.url]):
                assert time.monotonic() < deadline, a.read_log()
                time.sleep(0.2)
            a.kill()  # at once: each status call is an HTTP round trip, and A goes on rendering meanwhile
            # What A finished is in the database, read through B before its lease renewal (every 5 s) can
            # interrupt anything: finished there, it must stay finished.
            done_before_kill = {t for _, t in mine[a.url] if status(b.url, t) == DONE}

            # B's lease renewal (every 5 s) finds A's pid gone and interrupts what A left unfinished.
            deadline = time.monotonic() + 90
            while True:
                a_states = {t: status(b.url, t) for _, t in mine[a.url]}
                if all(s in (DONE, INTERRUPTED) for s in a_states.values()):
                    break
                assert time.monotonic() < deadline, (a_states, b.read_log())
                time.sleep(1.0)
            interrupted = [t for t, s in a_states.items() if s == INTERRUPTED]
            assert interrupted, "A was killed while rendering: at least its running take is interrupted"
            assert all(a_states[t] == DONE for t in done_before_kill), a_states  # finished stays finished

            # B's own takes finish untouched.
            def finish(session_take: tuple[str, str]) -> dict[str, Any]:
                return list(api_client(b.url, data).submit(session_take[1], api_name="/follow"))[-1]

            # One owner may follow 4 takes at once (studio.admission): follow them 4 at a time.
            with ThreadPoolExecutor(4) as pool:
                finals = list(pool.map(finish, mine[b.url]))
            assert [f["status"] for f in finals] == [DONE] * len(finals), finals

            # An interrupted take of the dead studio is retried on the live one with its recorded seed.
            session_id = next(s for s, t in mine[a.url] if t == interrupted[0])
            old = watch[b.url].predict(interrupted[0], "", api_name="/take")
            again = api_client(b.url, data).predict(session_id, interrupted[0], api_name="/retry")
            assert again["seed"] == old["seed"] and again["retry_of"] == interrupted[0]
            retried = list(api_client(b.url, data).submit(again["take_id"], api_name="/follow"))[-1]
            assert retried["status"] == DONE, retried
            log_b = b.read_log(tail=None)  # all of it: an error early on counts
        finally:
            a.kill()
            b.stop()
            a.log.close()

        store = Store(data, db_url=url)
        try:
            takes = [t for s in store.list_sessions() for t in store.list_takes(s.id)]
            problems = store.check_integrity()
        finally:
            store.close()
    # (Tracebacks of refused API calls are Gradio's logging of gr.Error: wait_ready's probe makes one.)
    assert "mirror failed" not in log_b and "Exception in thread" not in log_b, log_b[-3000:]
    # Nothing lost, nothing duplicated: the 20 submitted takes plus the one retry, each once.
    ids = [t.id for t in takes]
    assert sorted(ids) == sorted([t for _, _, t in submitted] + [again["take_id"]])
    by_id = {t.id: t for t in takes}
    assert all(by_id[t].status in (DONE, INTERRUPTED) for t in ids)
    assert {t for t in ids if by_id[t].status == INTERRUPTED} == set(interrupted)
    files = [by_id[t].file("wav") for t in ids if by_id[t].status == DONE]
    assert len(files) == len(set(files)) and all(f.is_file() and f.stat().st_size > 1000 for f in files)
    assert problems == [], problems
