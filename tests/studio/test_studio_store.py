"""The studio's SQLite store on a real file: WAL, migrations, recovery, share links, search, copies."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from studio.store import DONE, INTERRUPTED, RUNNING, Store, StoreError
from studio.store.db import alembic_config, current_revision, head_revision, make_engine, migrate
from studio.store.runner_id import process_alive, this_runner
from studio.store.tables import Base, SessionRow, utcnow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "data")
    yield s
    s.close()


def test_real_file_in_wal_mode_with_foreign_keys(store: Store) -> None:
    assert store.path.is_file() and store.path.name == "studio.db"
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    # Another process's view (plain sqlite3) sees WAL too: it is a property of the file.
    assert sqlite3.connect(store.path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_migrated_schema_equals_models(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "m.db")
    migrate(engine)
    assert current_revision(engine) == head_revision() == "0003"
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"models and migrations disagree: {diff}"
    names = set(inspect(engine).get_table_names())
    assert {"sessions", "takes", "styles", "share_links", "runners", "alembic_version"} <= names


def test_downgrade_and_upgrade_again(tmp_path: Path) -> None:
    engine = make_engine(tmp_path / "m.db")
    migrate(engine)
    with engine.begin() as conn:
        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "base")
    assert "takes" not in inspect(engine).get_table_names()
    migrate(engine)
    assert "takes" in inspect(engine).get_table_names()


def test_a_file_of_the_first_schema_is_upgraded_in_place(tmp_path: Path) -> None:
    """Existing studio.db files (schema 0001) gain the runners table on open and keep their sessions."""
    path = tmp_path / "data" / "studio.db"
    path.parent.mkdir()
    engine = make_engine(path)
    migrate(engine, "0001")
    with engine.begin() as conn:
        conn.execute(SessionRow.__table__.insert().values(
            id="old-session", title="Before leases", created_at=utcnow(), updated_at=utcnow(), inputs={},
            lyrics="", style=""))
    engine.dispose()
    store = Store(path)
    assert current_revision(store.engine) == head_revision() and "runners" in inspect(store.engine).get_table_names()
    assert store.get_session("old-session").title == "Before leases"
    assert store.check_integrity() == [] and not store.leases  # SQLite: the pid check, no lease rows
    store.close()


def test_styles_saved_before_owners_become_shared_and_owners_get_their_own(tmp_path: Path) -> None:
    """Schema 0002 styles were global; on upgrade they stay, shared (no owner): every owner uses them, an
    owner's save of the same name makes its own, and a downgrade that would merge two owners' names is
    refused rather than losing one."""
    path = tmp_path / "data" / "studio.db"
    path.parent.mkdir()
    engine = make_engine(path)
    migrate(engine, "0002")
    with engine.begin() as conn:
        conn.exec_driver_sql("INSERT INTO styles (name, prompt, embedding_path, source, created_at) "
                             "VALUES ('Warm tape', 'warm lofi tape', NULL, 'text', '2026-12-01 10:00:00')")
    engine.dispose()
    store = Store(path)
    try:
        assert current_revision(store.engine) == head_revision()
        old = store.get_style("Warm tape", "owner-a")
        assert old is not None and old.owner is None and old.prompt == "warm lofi tape"
        store.save_style("Warm tape", owner="owner-a", prompt="owner a's tape")
        store.save_style("Warm tape", owner="owner-b", prompt="owner b's tape")
        assert store.get_style("Warm tape", "owner-a").prompt == "owner a's tape"
        assert store.get_style("Warm tape", "owner-c").prompt == "warm lofi tape"  # the shared one
        assert store.get_style("Warm tape").prompt == "warm lofi tape"
        assert [(x.name, x.owner) for x in store.list_styles("owner-b")] == [("Warm tape", "owner-b")]
        with store.engine.begin() as conn:
            cfg = alembic_config(store.engine)
            cfg.attributes["connection"] = conn
            with pytest.raises(RuntimeError, match="several owners have a style named 'Warm tape'"):
                command.downgrade(cfg, "0002")
        assert current_revision(store.engine) == head_revision()
        store.delete_style("Warm tape", "owner-a")
        store.delete_style("Warm tape", "owner-b")
        with store.engine.begin() as conn:
            cfg = alembic_config(store.engine)
            cfg.attributes["connection"] = conn
            command.downgrade(cfg, "0002")
        assert current_revision(store.engine) == "0002"
    finally:
        store.close()


def test_sessions_ids_titles_and_reopen(store: Store) -> None:
    s = store.create_session(inputs={"lyrics": "[00:05.00]Neon rain on the window\n", "style": "synthwave"})
    assert len(s.id) >= 22 and s.title == "Neon rain on the window"
    again = Store(store.path)  # a second handle on the same file, as after a restart
    got = again.get_session(s.id)
    assert got is not None and got.inputs["style"] == "synthwave"
    store.update_session(s.id, title="Rainy", inputs={"lyrics": "", "style": "lofi"})
    assert again.get_session(s.id).title == "Rainy" and again.get_session(s.id).style == "lofi"
    assert store.get_session("nope") is None
    again.close()


def test_list_and_search_by_title_lyrics_style_and_owner(store: Store) -> None:
    a = store.create_session("Night drive", owner="alice", inputs={"lyrics": "city lights", "style": "synth"})
    b = store.create_session("Morning", owner="bob", inputs={"lyrics": "coffee 100%", "style": "acoustic folk"})
    c = store.create_session("Batch", owner=None, inputs={})
    store.add_take(c.id, {"lyrics": "", "style": "dark techno"})
    assert [x.id for x in store.search("NIGHT")] == [a.id]
    assert [x.id for x in store.search("lights")] == [a.id]
    assert [x.id for x in store.search("folk")] == [b.id]
    assert [x.id for x in store.search("techno")] == [c.id]  # found through a take's request
    assert [x.id for x in store.search("100%")] == [b.id]  # LIKE wildcards are escaped
    assert store.search("0%x") == []
    alice = {x.id for x in store.list_sessions(owner="alice")}
    assert alice == {a.id}  # her own only: never another owner's, never ownerless ones
    assert [x.id for x in store.search("techno", owner="alice")] == []
    assert {x.id for x in store.list_sessions()} == {a.id, b.id, c.id}  # operators (no owner) see all
    assert store.adopt_ownerless("machine") == 1  # what the studio does with pre-owner sessions
    assert {x.id for x in store.list_sessions(owner="machine")} == {c.id}
    assert next(x for x in store.list_sessions() if x.id == c.id).take_count == 1


def test_takes_update_files_relative_and_soft_delete(store: Store) -> None:
    s = store.create_session("t")
    t = store.add_take(s.id, {"lyrics": "x"}, seed=None)
    wav = store.data_dir / "takes" / "a.wav"
    store.update_take(t.id, status=DONE, progress=1.0, files={"wav": wav}, seed=123, timings={"decode": 1.5})
    with store.engine.connect() as conn:
        raw = conn.exec_driver_sql("SELECT files FROM takes").scalar()
    assert "takes/a.wav" in raw and str(store.data_dir) not in raw  # survives moving the data dir
    got = store.get_take(t.id)
    assert got.files["wav"] == str(wav) and got.seed == 123 and got.timings == {"decode": 1.5}
    with pytest.raises(StoreError, match="unknown field"):
        store.update_take(t.id, sneaky=1)
    with pytest.raises(StoreError):
        store.add_take(s.id, {}, parent_id="missing")
    child = store.add_take(s.id, {"edit": True}, parent_id=t.id)
    assert child.parent_id == t.id
    store.delete_take(t.id)
    assert [x.id for x in store.list_takes(s.id)] == [child.id]
    assert len(store.list_takes(s.id, include_deleted=True)) == 2
    store.undelete_take(t.id)
    assert [x.id for x in store.list_takes(s.id)] == [t.id, child.id]
    store.rename_take(t.id, "  keeper ")
    store.star_take(t.id)
    assert store.get_take(t.id).name == "keeper" and store.get_take(t.id).starred


def test_restart_recovery_marks_dead_process_takes_interrupted(tmp_path: Path) -> None:
    data = tmp_path / "data"
    store = Store(data)
    s = store.create_session("crash")
    mine = store.add_take(s.id, {"n": 0}, status=RUNNING)  # this live process: must survive recovery
    # A studio process that dies with one take running and one queued.
    code = (
        "import sys; from studio.store import Store; st = Store(sys.argv[1]);"
        "a = st.add_take(sys.argv[2], {'n': 1}, status='running'); st.update_take(a.id, phase='step 3/32');"
        "st.add_take(sys.argv[2], {'n': 2}); st.add_take(sys.argv[2], {'n': 3, 'render_id': 'album'})"
    )
    subprocess.run([sys.executable, "-c", code, str(data), s.id], check=True, cwd=ROOT)
    restarted = Store(data)
    recovered = restarted.recover_interrupted()
    assert sorted(t.request["n"] for t in recovered) == [1, 2, 3]
    by_n = {t.request["n"]: t for t in restarted.list_takes(s.id)}
    assert by_n[1].status == INTERRUPTED and "step 3/32" in by_n[1].phase
    assert by_n[2].status == INTERRUPTED and by_n[2].phase.endswith("the studio stopped")
    assert by_n[3].phase.endswith("studio render stopped")  # says which program stopped
    assert by_n[0].status == RUNNING and by_n[0].id == mine.id
    assert restarted.recover_interrupted() == []  # idempotent


def test_process_alive() -> None:
    assert process_alive(this_runner())
    assert not process_alive(None) and not process_alive("garbage")
    host, pid, _ = this_runner().rsplit(":", 2)
    assert not process_alive(f"{host}:{pid}:999999999")  # same PID, different start: a reused PID
    assert not process_alive(f"{host}:2147483000:1")


def test_share_resolve_revoke_and_copy(store: Store) -> None:
    s = store.create_session("Shared", owner="alice", inputs={"lyrics": "la la", "style": "pop"})
    t1 = store.add_take(s.id, {"lyrics": "la la"})
    store.update_take(t1.id, status=DONE, files={"wav": store.data_dir / "x.wav"}, seed=7)
    t2 = store.add_take(s.id, {"edit": 1}, parent_id=t1.id)
    store.update_take(t2.id, status=DONE)
    store.add_take(s.id, {"running": 1}, status=RUNNING)  # not copied: it is not a finished take
    link = store.share(s.id)
    assert len(link.token) >= 22 and link.url_path == f"/?s={link.token}"
    assert store.share(s.id).token == link.token  # one live link per session
    reopened = Store(store.path)  # links outlive the process
    assert reopened.resolve_share(link.token).id == s.id
    assert reopened.resolve_share("x" * 22) is None and reopened.resolve_share("") is None
    copy = store.copy_session(s.id, owner="bob")
    assert copy.id != s.id and copy.owner == "bob" and copy.copied_from == s.id and copy.take_count == 2
    takes = store.list_takes(copy.id)
    assert [t.seed for t in takes] == [7, None]
    assert takes[1].parent_id == takes[0].id  # lineage re-pointed inside the copy
    assert store.revoke(link.token).revoked
    assert reopened.resolve_share(link.token) is None
    assert store.share(s.id).token != link.token  # a revoked token never comes back
    with pytest.raises(StoreError):
        store.revoke("unknown")
    reopened.close()


def test_saved_styles(store: Store) -> None:
    emb = store.data_dir / "styles" / "a.npy"
    store.save_style("Warm tape", prompt="warm lofi tape", embedding_path=emb, source="ref.wav")
    store.save_style("Warm tape", prompt="warmer")  # same name: replaced, not duplicated
    store.save_style("Bright", prompt="bright pop")
    assert [x.name for x in store.list_styles()] == ["Bright", "Warm tape"]
    assert store.get_style("Warm tape").prompt == "warmer"
    store.delete_style("Bright")
    assert store.get_style("Bright") is None
    with pytest.raises(StoreError):
        store.save_style("  ")


def test_reader_not_blocked_by_open_write(store: Store) -> None:
    s = store.create_session("w")
    errors: list[BaseException] = []
    with store.engine.connect() as writer:
        writer.exec_driver_sql("BEGIN IMMEDIATE")
        writer.exec_driver_sql("UPDATE sessions SET title='held'")

        def read() -> None:
            try:
                assert store.get_session(s.id).title == "w"  # WAL: the old committed value, no wait
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        th = threading.Thread(target=read)
        th.start()
        th.join(5)
        writer.exec_driver_sql("ROLLBACK")
    assert not th.is_alive() and not errors
