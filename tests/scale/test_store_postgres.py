"""The studio's store on PostgreSQL: the same API as on SQLite, migrations equal to the models, several
processes on one database (migrating at once, recovering each other's takes by lease), and `studio serve
--db` / `studio render --db` writing there.

A throwaway server (tests/pg_server.py: initdb in a temp folder, a unix socket, no TCP port) runs for the
module; each test gets a fresh database. Without the PostgreSQL binaries or psycopg these tests skip,
saying which is missing (`.ci/run` installs both).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from pg_server import PgServer, running_server
from sqlalchemy import create_engine, inspect, select, text

from studio.store import DONE, INTERRUPTED, RUNNING, Store, StoreError
from studio.store.db import alembic_config, current_revision, db_now, head_revision, make_engine, migrate
from studio.store.runner_id import this_runner
from studio.store.tables import Base, RunnerRow

ROOT = Path(__file__).resolve().parents[2]
OTHER = "host-b.example:4242:1234"  # a runner id of another host: judged by its lease, never by a pid check



@pytest.fixture(scope="module")
def pg() -> PgServer:
    with running_server() as server:
        yield server


@pytest.fixture
def pg_url(pg: PgServer) -> str:
    with pg.database() as url:
        yield url


@pytest.fixture
def store(tmp_path: Path, pg_url: str) -> Store:
    s = Store(tmp_path / "data", db_url=pg_url)
    yield s
    s.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def either(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    """The same store on both databases: what the tests below hold for SQLite holds for PostgreSQL."""
    url = request.getfixturevalue("pg_url") if request.param == "postgresql" else None
    s = Store(tmp_path / "data", db_url=url)
    yield s
    s.close()


def add_lease(store: Store, runner: str, *, age_s: float, lease_s: float = 30.0, ns: str = "") -> None:
    """A `runners` row as another process would have left it, `age_s` seconds after its last beat."""
    with store.engine.begin() as conn:
        now = db_now(conn, store.engine)
        conn.execute(RunnerRow.__table__.insert().values(
            id=runner, host=runner.rsplit(":", 2)[0], pid_namespace=ns, started_at=now - timedelta(seconds=age_s),
            heartbeat_at=now - timedelta(seconds=age_s), lease_s=lease_s))


def lease_ids(store: Store) -> set[str]:
    with store.engine.connect() as conn:
        return set(conn.scalars(select(RunnerRow.id)))


# ---------------------------------------------------------------- the API, the same on both databases
def test_round_trip_sessions_takes_styles_links_and_search(either: Store) -> None:
    store = either
    s = store.create_session(inputs={"lyrics": "[00:05.00]Neon rain on the window\n", "style": "synthwave"})
    assert s.title == "Neon rain on the window"
    b = store.create_session("Morning", owner="bob", inputs={"lyrics": "coffee 100%", "style": "acoustic folk"})
    store.update_session(s.id, title="Rainy", inputs={"lyrics": "city lights", "style": "lofi"})
    again = Store(store.data_dir, db_url=None if store.sqlite else store.url)  # another handle, as after a restart
    assert again.get_session(s.id).title == "Rainy" and again.get_session(s.id).style == "lofi"
    again.close()
    t = store.add_take(s.id, {"lyrics": "x", "style": "dark techno"})
    wav = store.data_dir / "takes" / "a.wav"
    store.update_take(t.id, status=DONE, progress=1.0, files={"wav": wav}, seed=123, timings={"decode": 1.5})
    with store.engine.connect() as conn:
        raw = conn.execute(text("SELECT CAST(files AS TEXT) FROM takes")).scalar()
    assert "takes/a.wav" in raw and str(store.data_dir) not in raw  # relative: the data folder may move
    got = store.get_take(t.id)
    assert got.files["wav"] == str(wav) and got.seed == 123 and got.timings == {"decode": 1.5}
    child = store.add_take(s.id, {"edit": True}, parent_id=t.id)
    store.update_take(child.id, status=DONE)
    store.delete_take(child.id)
    assert [x.id for x in store.list_takes(s.id)] == [t.id]
    store.undelete_take(child.id)
    assert [x.id for x in store.list_takes(s.id)] == [t.id, child.id]
    store.star_take(t.id)  # the parent written last: PostgreSQL's heap now holds it after its child
    store.rename_take(t.id, "  keeper ")
    assert store.get_take(t.id).name == "keeper" and store.get_take(t.id).starred
    with pytest.raises(StoreError, match="unknown field"):
        store.update_take(t.id, sneaky=1)
    with pytest.raises(StoreError):
        store.add_take(s.id, {}, parent_id="missing")

    assert [x.id for x in store.search("CITY")] == [s.id]  # case-insensitive on both
    assert [x.id for x in store.search("techno")] == [s.id]  # through a take's request
    assert [x.id for x in store.search("100%")] == [b.id] and store.search("0%x") == []  # LIKE escaped
    assert [x.id for x in store.list_sessions(owner="bob")] == [b.id]
    assert next(x for x in store.list_sessions() if x.id == s.id).take_count == 2

    link = store.share(s.id)
    assert store.share(s.id).token == link.token and store.resolve_share(link.token).id == s.id
    copy = store.copy_session(s.id, owner="carol")
    takes = store.list_takes(copy.id)
    assert copy.copied_from == s.id and copy.take_count == 2 and [x.seed for x in takes] == [123, None]
    assert takes[1].parent_id == takes[0].id  # lineage re-pointed inside the copy, whatever the row order
    assert store.revoke(link.token).revoked and store.resolve_share(link.token) is None
    assert store.share(s.id).token != link.token

    store.save_style("Warm tape", prompt="warm lofi tape", embedding_path=store.data_dir / "styles" / "a.npy",
                     source="ref.wav")
    store.save_style("Warm tape", prompt="warmer")
    store.save_style("Bright", prompt="bright pop")
    assert [x.name for x in store.list_styles()] == ["Bright", "Warm tape"]
    assert store.get_style("Warm tape").prompt == "warmer"
    store.delete_style("Bright")
    assert store.get_style("Bright") is None
    assert store.check_integrity() == []


def test_seeds_up_to_2_32_minus_1(either: Store) -> None:
    s = either.create_session("seeds")
    top = either.add_take(s.id, {}, seed=2**32 - 1)
    assert either.get_take(top.id).seed == 2**32 - 1
    either.update_take(top.id, seed=2**31)  # past a 32-bit signed INTEGER
    assert either.get_take(top.id).seed == 2**31
    if not either.sqlite:
        cols = {c["name"]: c["type"] for c in inspect(either.engine).get_columns("takes")}
        assert str(cols["seed"]) == "BIGINT"


def test_nul_characters_and_long_text_are_cleaned_the_same_on_both(either: Store) -> None:
    store = either
    s = store.create_session("Night\x00 drive " + "x" * 300, inputs={"lyrics": "la\x00la", "style": "a\x00b"})
    assert "\x00" not in s.title and len(s.title) == 200 and s.lyrics == "lala" and s.style == "ab"
    assert store.get_session(s.id).inputs["lyrics"] == "la\x00la"  # the form's JSON keeps what was typed
    t = store.add_take(s.id, {"lyrics": "nul \x00 inside"})
    store.update_take(t.id, phase="p" * 500, error="bad\x00news", name="n\x00" * 300)
    got = store.get_take(t.id)
    assert len(got.phase) == 200 and got.error == "badnews" and got.name == "n" * 200
    assert got.request["lyrics"] == "nul \x00 inside"
    store.save_style("nul", prompt="warm\x00tape", source="s" * 900)
    assert store.get_style("nul").prompt == "warmtape" and len(store.get_style("nul").source) == 500
    with pytest.raises(StoreError, match="200 characters"):
        store.save_style("n" * 201)
    # Ids and tokens with a NUL find nothing (PostgreSQL would refuse the query itself).
    assert store.get_session(s.id + "\x00") is None and store.get_take("x\x00") is None
    assert store.resolve_share("x\x00") is None and store.get_style("a\x00") is None
    with pytest.raises(StoreError):
        store.revoke("x\x00")
    assert [x.id for x in store.search("night\x00")] == [s.id]
    assert store.check_integrity() == []


# ---------------------------------------------------------------- schema
def test_migrated_schema_equals_models_on_postgresql(pg_url: str) -> None:
    engine = make_engine(pg_url)
    try:
        migrate(engine)
        assert current_revision(engine) == head_revision() == "0003"
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], f"models and migrations disagree on PostgreSQL: {diff}"
        with engine.begin() as conn:
            cfg = alembic_config(engine)
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "base")
        assert "takes" not in inspect(engine).get_table_names()
        migrate(engine, "0001")
        migrate(engine)  # 0001 -> 0002 in place: the seed column widens, the runners table appears
        assert {"takes", "runners"} <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_a_bare_postgresql_url_uses_psycopg_and_the_password_is_never_shown(tmp_path: Path, pg_url: str) -> None:
    bare = pg_url.replace("postgresql+psycopg://postgres@", "postgresql://postgres:s3cr%23t@")
    store = Store(tmp_path / "data", db_url=bare)  # trust authentication: the password is not checked
    try:
        assert store.engine.url.drivername == "postgresql+psycopg" and store.path is None
        assert "s3cr" not in store.database and "***" in store.database
    finally:
        store.close()


# ---------------------------------------------------------------- several processes, one database
def test_processes_starting_together_on_an_empty_database_migrate_one_after_the_other(
        tmp_path: Path, pg_url: str) -> None:
    go = time.time() + 3.0  # every process opens the store at the same moment
    code = ("import sys, time; import alembic.command, psycopg; from studio.store import Store;"  # imports first
            "time.sleep(max(0, float(sys.argv[3]) - time.time()));"
            "st = Store(sys.argv[1], db_url=sys.argv[2]); s = st.create_session('from ' + sys.argv[4]);"
            "print(s.id); st.close()")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "data"), pg_url, str(go), str(i)],
                              cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    results = [p.communicate(timeout=120) for p in procs]
    for p, (_, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err[-3000:]
    store = Store(tmp_path / "data", db_url=pg_url)
    try:
        assert {x.title for x in store.list_sessions()} == {f"from {i}" for i in range(4)}
        with store.engine.connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalars().all() == ["0003"]
        assert store.check_integrity() == []
    finally:
        store.close()


def test_another_hosts_take_is_interrupted_once_its_lease_ran_out_and_not_before(store: Store) -> None:
    s = store.create_session("leases")
    live, dead, never, here = "host-b:1:1", "host-c:2:2", "host-d:3:3", this_runner()
    add_lease(store, live, age_s=5)
    add_lease(store, dead, age_s=60)
    t_live = store.add_take(s.id, {"n": "live"}, status=RUNNING, runner=live)
    t_dead = store.add_take(s.id, {"n": "dead"}, status=RUNNING, runner=dead)
    store.update_take(t_dead.id, phase="step 3/32")
    t_never = store.add_take(s.id, {"n": "never"}, runner=never)  # an older studio: no lease at all
    t_here = store.add_take(s.id, {"n": "here"}, status=RUNNING)  # this process: alive
    problems = store.check_integrity()
    assert len(problems) == 1 and "1 take(s) queued/running for a process that is gone" in problems[0]

    recovered = store.recover_interrupted()
    assert [t.id for t in recovered] == [t_dead.id]
    got = store.get_take(t_dead.id)
    assert got.status == INTERRUPTED and "step 3/32" in got.phase and got.phase.endswith("the studio stopped")
    assert {store.get_take(t.id).status for t in (t_live, t_never, t_here)} == {RUNNING, "queued"}
    assert lease_ids(store) == {live, here}  # the run-out lease goes once no active take names it
    assert store.recover_interrupted() == [] and store.check_integrity() == []

    # The slow runner comes back and reports its take finished: too late, the studio offers a retry.
    store.update_take(t_dead.id, status=DONE, progress=1.0, files={"wav": store.data_dir / "late.wav"}, seed=5)
    got = store.get_take(t_dead.id)
    assert got.status == INTERRUPTED and got.files == {} and got.seed is None and got.progress < 1.0
    store.rename_take(t_dead.id, "kept")  # the musician's own edits still land
    assert store.get_take(t_dead.id).name == "kept"


def test_a_lease_of_this_host_in_another_pid_namespace_is_judged_by_the_lease(store: Store) -> None:
    """Two containers may share a host name, never their pids: a pid check across them would be wrong."""
    host = this_runner().rsplit(":", 2)[0]
    other_ns = f"{host}:999999:1"  # no such pid here: a pid check would call it gone at once
    add_lease(store, other_ns, age_s=1, ns="pid:[1]")
    s = store.create_session("ns")
    t = store.add_take(s.id, {}, status=RUNNING, runner=other_ns)
    assert store.recover_interrupted() == []
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE runners SET heartbeat_at = heartbeat_at - interval '1 hour'"))
    assert [x.id for x in store.recover_interrupted()] == [t.id]


def test_two_recoveries_at_once_claim_each_take_exactly_once(tmp_path: Path, pg_url: str) -> None:
    a = Store(tmp_path / "data", db_url=pg_url)
    b = Store(tmp_path / "data", db_url=pg_url)
    try:
        add_lease(a, OTHER, age_s=120)
        s = a.create_session("many")
        ids = {a.add_take(s.id, {"i": i}, status=RUNNING, runner=OTHER).id for i in range(40)}
        barrier = threading.Barrier(2)
        found: dict[str, list[str]] = {}

        def recover(name: str, st: Store) -> None:
            barrier.wait()
            found[name] = [t.id for t in st.recover_interrupted()]

        threads = [threading.Thread(target=recover, args=(n, st)) for n, st in (("a", a), ("b", b))]
        for th in threads:
            th.start()
        for th in threads:
            th.join(60)
        assert sorted(found["a"] + found["b"]) == sorted(ids)  # every take once, none twice
        assert {t.status for t in a.list_takes(s.id)} == {INTERRUPTED}
        assert OTHER not in lease_ids(a)
    finally:
        a.close()
        b.close()


RUNNER = """
import socket, sys
socket.gethostname = lambda: "host-b"  # this process plays a studio on another host
from studio.store import Store
st = Store(sys.argv[1], db_url=sys.argv[2], lease_s=1.5, heartbeat_s=0.3)
s = st.create_session("far away")
t = st.add_take(s.id, {"n": 1}, status="running")
st.update_take(t.id, phase="step 7/32", seed=99)
print(t.id, flush=True)
sys.stdin.readline()  # "finish": the take's result arrives (late, if this process was stopped meanwhile)
st.update_take(t.id, status="done", progress=1.0, files={"wav": "takes/far.wav"})
print(st.get_take(t.id).status, flush=True)
st.close()
"""


def test_a_stopped_process_on_another_host_loses_its_take_and_its_late_result_is_dropped(
        tmp_path: Path, pg_url: str) -> None:
    """A real second process (on "another host") drives a take; while it beats, recovery leaves it alone;
    SIGSTOP it (a hung host) and its lease runs out, the take becomes interrupted; SIGCONT it and its
    "done" is dropped, while it takes its lease back."""
    child = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path / "data"), pg_url], cwd=ROOT,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = Store(tmp_path / "data", db_url=pg_url)
    try:
        take_id = child.stdout.readline().strip()
        assert take_id, child.stderr.read()
        time.sleep(2.5)  # past the lease's 1.5 s: only its beats keep it
        assert store.recover_interrupted() == [] and store.get_take(take_id).status == RUNNING
        _stop_outside_a_transaction(child, store)
        deadline = time.monotonic() + 30
        while not (recovered := store.recover_interrupted()):
            assert time.monotonic() < deadline, "the stopped process's lease never ran out"
            time.sleep(0.2)
        assert [t.id for t in recovered] == [take_id]
        os.kill(child.pid, signal.SIGCONT)
        out, err = child.communicate("finish\n", timeout=60)
        assert child.returncode == 0, err[-3000:]
        assert out.split() == [INTERRUPTED]  # the late "done" was dropped
        got = store.get_take(take_id)
        assert got.status == INTERRUPTED and got.seed == 99 and "step 7/32" in got.phase and got.files == {}
        assert "dropped late write" in err
        assert store.check_integrity() == []
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait(10)
        store.close()


def _stop_outside_a_transaction(child: subprocess.Popen, store: Store) -> None:
    """SIGSTOP the child at a moment it holds no open transaction (a stopped transaction would hold its
    row locks and stall recovery, which is the database's business, not this test's)."""
    for _ in range(100):
        os.kill(child.pid, signal.SIGSTOP)
        time.sleep(0.05)
        with store.engine.connect() as conn:
            busy = conn.execute(text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state <> 'idle'")).scalar()
        if not busy:
            return
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.05)
    raise AssertionError("the child never stopped outside a transaction")


def test_check_integrity_is_empty_on_a_good_database_and_names_what_is_wrong(store: Store) -> None:
    s = store.create_session("ok")
    store.update_take(store.add_take(s.id, {}).id, status=DONE, progress=1.0)
    with store.engine.begin() as conn:
        have_amcheck = conn.execute(text(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'amcheck'")).first() is not None
        if have_amcheck:
            conn.execute(text("CREATE EXTENSION amcheck"))
    assert store.check_integrity() == []
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE takes SET status = 'weird', progress = 2"))
    problems = store.check_integrity()
    assert "1 takes with an unknown status" in problems and "1 takes with progress outside 0..1" in problems


# ---------------------------------------------------------------- the command line on PostgreSQL
def test_studio_serve_with_db_keeps_its_takes_in_postgresql(tmp_path: Path, pg_url: str) -> None:
    from studio_helpers import ServeProcess, form

    data = tmp_path / "data"
    serve = ServeProcess(data, tmp_path, "--db", pg_url, "--test-crop-frames", "64")
    try:
        c = serve.wait_ready()
        r = c.predict(form(title="On the server"), "", api_name="/submit")
        final = list(c.submit(r["takes"][0], api_name="/follow"))[-1]
        assert final["status"] == "done", final
        log = Path(serve.log.name).read_text()
    finally:
        serve.stop()
    assert "database: postgresql+psycopg://postgres@/" in log
    assert not (data / "studio.db").exists()  # nothing went to the SQLite file
    engine = create_engine(pg_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT t.status, t.seed, CAST(t.files AS TEXT) FROM takes t "
                                     "JOIN sessions s ON s.id = t.session_id WHERE s.title = 'On the server'")).all()
    finally:
        engine.dispose()
    assert [(status, seed) for status, seed, _ in rows] == [(DONE, r["seeds"][0])]
    files = json.loads(rows[0][2])
    assert files and all(not Path(p).is_absolute() and (data / p).is_file() for p in files.values())


def test_studio_render_session_with_db_records_its_take_in_postgresql(tmp_path: Path, pg_url: str) -> None:
    song = tmp_path / "songs" / "night.wav"
    env = {**os.environ, "DRS_LOCK_DIR": str(tmp_path / "locks"), "STUDIO_LOG_LEVEL": "WARNING",
           "STUDIO_DB_URL": pg_url}  # the --db default
    argv = [sys.executable, "-m", "studio.cli", "render", "--style", "lofi, rain", "--duration", "95", "--steps", "4",
            "--seed", "3", "-o", str(song), "--model", "test", "--test-crop-frames", "64", "--threads", "1",
            "--data-dir", str(tmp_path / "data"), "--session", "Singles", "--quiet", "--json"]
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "data" / "studio.db").exists()
    store = Store(tmp_path / "data", db_url=pg_url)
    try:
        session = next(s for s in store.list_sessions() if s.title == "Singles")
        (take,) = store.list_takes(session.id)
        assert take.status == DONE and take.seed == 3 and take.file("wav") == song
    finally:
        store.close()
    bad = subprocess.run([*argv[:-6], "--data-dir", str(tmp_path / "d2"), "--session", "x",
                          "--db", "postgresql://nobody@/nope?host=/nonexistent"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "the store's database did not open" in bad.stderr, bad.stderr[-2000:]
