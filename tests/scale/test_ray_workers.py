"""Device workers as Ray actors (issue 17): a throwaway Ray cluster of three nodes on this machine.

Every node is a `ray.cluster_utils.Cluster` node on loopback with one `testcard` resource standing for
one card; the workers are CPU workers on the tiny test model. One studio engine (module-scoped, as a
running studio would be) sees the nodes come and go. What this pins: a batch on three nodes completes,
spread over all three; a node removed mid-batch loses its take, which is retried on a healthy worker,
so every song ends done (or clearly failed), none is lost or written twice; the bytes are those of a
one-host run with local workers (retried takes included); a node added mid-batch gets work.
Nothing listens beyond loopback, and no process of the cluster outlives the module.
"""

from __future__ import annotations

import functools
import os

# Ray's own switch for a loopback-only cluster: the driver and the nodes use 127.0.0.1 as the node
# address (otherwise Ray resolves "127.0.0.1" to this host's network address). Read when ray is imported.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason='Ray is not installed (pip install -e ".[cluster]")')
from ray.cluster_utils import Cluster  # noqa: E402
from waiting import wait_until  # noqa: E402

from engine.config import EngineConfig, Models, WorkerSpec  # noqa: E402
from engine.engine import Engine  # noqa: E402
from engine.events import Done, Failed, Retrying, Running, Step  # noqa: E402
from engine.request import SongRequest, Style  # noqa: E402

RESOURCE = "testcard"
STEPS = 24  # a tiny model: 0.3 s (quiet machine) to 1 s (loaded) a take
LONG = 120  # the loaded batch: long enough that the starving spells (14 s of them) all fall inside it
# The batch a node dies under: each take a second or two, so the node dies mid-take with more queued behind
# it (the node goes at its first step). Its bytes are compared with a one-host run of the same songs,
# which costs as much again: at LONG steps the two took 40 s of this module's 107.
MID = 48
NODE = dict(num_cpus=1, resources={RESOURCE: 1}, node_ip_address="127.0.0.1", object_store_memory=80 << 20)


def _exposed(pids: set[int]) -> list[str]:
    """tcp listeners of these processes beyond loopback ("address:port pid")."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
    found = []
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 6 or fields[3].startswith(("127.", "[::1]", "[::ffff:127.")):
            continue
        owners = {int(p) for p in re.findall(r"pid=(\d+)", fields[5])}
        if owners & pids:
            found.append(f"{fields[3]} {sorted(owners & pids)}")
    return found


def _pids(temp_dir: str) -> set[int]:
    out = subprocess.run(["ps", "-ewwo", "pid,args"], capture_output=True, text=True).stdout
    return {int(line.split()[0]) for line in out.splitlines()[1:]
            if temp_dir in line or "ray::" in line or "drs-ray-" in line or "/ray/core/src/ray/" in line}


def _ours(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-ewwo", "pid,rss,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines()[1:] if marker in line]


def cluster_rss_mib(temp_dir: str) -> float:
    """Resident memory of the cluster's processes: Ray's (their command lines name its temp folder),
    its actors (ray::) and the device workers they started (drs-ray-)."""
    out = subprocess.run(["ps", "-ewwo", "rss,args"], capture_output=True, text=True).stdout
    lines = [line for line in out.splitlines()[1:]
             if temp_dir in line or "ray::" in line or "drs-ray-" in line or "/ray/core/src/ray/" in line]
    return sum(int(line.split()[0]) for line in lines) / 1024


@pytest.fixture(scope="module")
def cluster():
    secrets_before = set(Path(tempfile.gettempdir()).glob("drs-ray-*"))
    temp_dir = tempfile.mkdtemp(prefix="ray-", dir="/tmp")  # short: Ray's unix sockets live under it
    before_tmp = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp_dir  # Ray's session files and its "current cluster" note, not /tmp/ray
    c = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False,
                                                      "dashboard_host": "127.0.0.1"})
    try:
        c.add_node(**NODE)
        c.add_node(**NODE)
        c.temp_dir = temp_dir
        yield c
        exposed = _exposed(_pids(temp_dir))
        assert not exposed, f"a Ray node or worker listens beyond loopback: {exposed}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()
        # Our device workers (drs-ray-) must leave by themselves. Ray's dashboard agent leaves when it sees its
        # raylet gone, but only once it has finished starting: on a loaded 2-core CI machine one was still
        # there after 20 s, and with the suite in three processes after 60 s (and gone later). What of Ray's
        # own is left at 60 s gets what an operator's `ray stop` gives it, SIGTERM; anything left after that leaked.
        deadline = time.monotonic() + 60
        while (_ours(temp_dir) or _ours("drs-ray-")) and time.monotonic() < deadline:
            time.sleep(0.2)
        workers_left = _ours("drs-ray-")
        for line in [] if workers_left else _ours(temp_dir):
            try:
                os.kill(int(line.split()[0]), signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while _ours(temp_dir) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = workers_left + _ours(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
        if before_tmp is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before_tmp
        assert not left, f"processes outlived the cluster: {left}"
        kept = set(Path(tempfile.gettempdir()).glob("drs-ray-*")) - secrets_before
        assert not kept, f"the workers' secret folders outlived the cluster: {kept}"


def _models(r: Path) -> Models:
    return Models(vae=str(r / "vae-tiny" / "vae_model.pt"), base=str(r / "dit-tiny-base"),
                  full=str(r / "dit-tiny-full"), negative_style=str(r / "vocal.npy"), test=True)


def _config(tmp: Path, reference_dir: Path, **kw) -> EngineConfig:
    return EngineConfig(data_dir=tmp / "data", models=_models(reference_dir), crop_frames=96,
                        workers=[WorkerSpec(threads=1)], worker_max_jobs=1, lock_dir=str(tmp / "locks"),
                        heartbeat_s=0.25, dead_after_s=2.0, restart_backoff_s=(0.2, 0.5, 1.0), ray_poll_s=0.5,
                        max_ready=4, **kw)


@pytest.fixture(scope="module")
def style(tmp_path_factory: pytest.TempPathFactory) -> Style:
    d = tmp_path_factory.mktemp("style")
    v = np.random.default_rng(0).standard_normal(512).astype(np.float32)
    np.save(d / "style.npy", v / np.linalg.norm(v))
    return Style(embedding=str(d / "style.npy"))


@pytest.fixture(scope="module")
def engine(cluster, tmp_path_factory: pytest.TempPathFactory, reference_dir: Path):
    with Engine(_config(tmp_path_factory.mktemp("ray-engine"), reference_dir, ray=cluster.address,
                        ray_resource=RESOURCE)) as e:
        yield e
    assert not ray.is_initialized(), "the engine's Ray connection outlived it"


@pytest.fixture(scope="module")
def local_bytes(tmp_path_factory: pytest.TempPathFactory, reference_dir: Path, style: Style):
    """seed -> the wav of a one-host run (one local worker), computed once per seed."""
    cache: dict[tuple[int, int], bytes] = {}
    local = Engine(_config(tmp_path_factory.mktemp("local-engine"), reference_dir))

    def get(seed: int, steps: int = STEPS) -> bytes:
        if (seed, steps) not in cache:
            done = local.submit(SongRequest(style=style, steps=steps, seed=seed)).result(120)
            cache[seed, steps] = Path(done.takes[0].files["wav"]).read_bytes()
        return cache[seed, steps]

    yield get
    local.close()


def _node_of(engine: Engine, worker_name: str) -> str:
    slot = next(s for s in engine.pool.slots if s.name == worker_name)
    return slot.seat.node_id


_wait = functools.partial(wait_until, timeout_s=90.0, every_s=0.05)


def _ready_nodes(engine: Engine) -> set[str]:
    return {w["name"] for w in engine.pool.worker_info() if w["state"] == "ready"}


def _settle(jobs) -> tuple[list[Done], list[Failed]]:
    finals = [job.wait(180) for job in jobs]
    assert all(f is not None and f.terminal for f in finals), finals
    return [f for f in finals if isinstance(f, Done)], [f for f in finals if isinstance(f, Failed)]


def _check_files(engine: Engine, done: list[Done]) -> None:
    """Each take written once: one folder with one wav per take, nothing else under takes/."""
    wavs = sorted(engine.config.takes_dir.rglob("*.wav"))
    named = sorted(Path(d.takes[0].files["wav"]) for d in done)
    assert wavs == named, (wavs, named)


def test_a_batch_on_three_nodes_spreads_and_matches_one_host(engine: Engine, cluster, style, local_bytes) -> None:
    _wait("three Ray workers ready", lambda: len(_ready_nodes(engine)) == 3)
    print(f"\n[ray] 3 nodes + 3 workers: {cluster_rss_mib(cluster.temp_dir):.0f} MiB resident")
    t0 = time.monotonic()
    jobs = [engine.submit(SongRequest(style=style, steps=STEPS, seed=100 + i)) for i in range(12)]
    done, failed = _settle(jobs)
    print(f"[ray] 12 songs on 3 nodes: {time.monotonic() - t0:.1f} s")
    assert not failed, failed
    assert len({_node_of(engine, d.takes[0].worker) for d in done}) == 3  # every node got work
    for d in done:
        assert Path(d.takes[0].files["wav"]).read_bytes() == local_bytes(d.takes[0].seed)
    _check_files(engine, done)


def test_a_node_removed_mid_batch_loses_no_take(engine: Engine, cluster, style, local_bytes) -> None:
    before = set(engine.config.takes_dir.rglob("*.wav"))
    # The batch: 12 songs on three nodes, one of them lost while it renders.
    jobs = [engine.submit(SongRequest(style=style, steps=MID, seed=200 + i)) for i in range(12)]
    # Not the head (it holds the cluster's state) nor the node this process is attached to as a driver.
    keep = {cluster.head_node.node_id, ray.get_runtime_context().get_node_id()}

    def running_elsewhere():  # a node that may go, with a take that has made a step on its worker
        for job in jobs:
            events = list(job.events)
            runs = [(i, e) for i, e in enumerate(events) if isinstance(e, Running)]
            if runs and any(isinstance(e, Step) for e in events[runs[-1][0]:]):
                node = _node_of(engine, runs[-1][1].worker)
                if node not in keep:
                    return node

    victim = _wait("a take running on a node that may go", running_elsewhere)
    node = next(n for n in cluster.list_all_nodes() if n.node_id == victim)
    cluster.remove_node(node, allow_graceful=False)  # the host dies: its raylet and workers are killed
    done, failed = _settle(jobs)
    assert not failed, [f.error for f in failed]  # every lost take was retried on a healthy worker

    # Which takes the death caught is timing (the one seen running may have finished meanwhile): the
    # victim's worker holds work until the queue drains, so at least one was, and each was retried.
    lost = []  # (job, its Retrying event, the worker the lost attempt ran on)
    for job in jobs:
        events = list(job.events)
        for i, e in enumerate(events):
            if isinstance(e, Retrying):
                lost.append((job, e, [r for r in events[:i] if isinstance(r, Running)][-1].worker))
    assert lost, "the node died with work on it, yet no take was retried"
    for job, retry, worker in lost:
        assert "died" in retry.reason and victim[:6] in worker, (retry, worker)  # lost with the node only
        assert victim[:6] not in job.final.takes[0].worker  # the retry ran on a live node
    for d in done:
        assert Path(d.takes[0].files["wav"]).read_bytes() == local_bytes(d.takes[0].seed, MID)
    new = set(engine.config.takes_dir.rglob("*.wav")) - before
    assert sorted(new) == sorted(Path(d.takes[0].files["wav"]) for d in done)  # each take written once
    _wait("the removed node's worker dropped", lambda: all(s.seat.node_id != victim for s in engine.pool.slots))
    assert len(_ready_nodes(engine)) == 2


def test_a_node_added_mid_batch_receives_work(engine: Engine, cluster, style, local_bytes) -> None:
    """The batch rolls on (a song finishing makes room for the next, four in flight) while a node joins;
    once its worker is up it gets songs, with no restart of the engine. Rolling rather than a fixed
    count: how long a node takes to join depends on this machine's load (5 to 20 s seen)."""
    assert len(_ready_nodes(engine)) == 2
    known = {s.name for s in engine.pool.slots}
    jobs = [engine.submit(SongRequest(style=style, steps=STEPS, seed=300 + i)) for i in range(4)]
    t0 = time.monotonic()
    cluster.add_node(**NODE)  # the songs go on meanwhile

    def on_new_node() -> bool:
        return any(isinstance(e, Running) and e.worker not in known for j in jobs for e in j.events)

    while not on_new_node() and len(jobs) < 80 and time.monotonic() - t0 < 120:
        if sum(j.final is None for j in jobs) < 4:
            jobs.append(engine.submit(SongRequest(style=style, steps=STEPS, seed=300 + len(jobs))))
        time.sleep(0.05)
    print(f"[ray] a node joined; its worker got song {len(jobs)} after {time.monotonic() - t0:.1f} s")
    done, failed = _settle(jobs)
    assert not failed, [f.error for f in failed]
    on_new = [d for d in done if d.takes[0].worker not in known]
    assert on_new, "no take ran on the node that joined mid-batch"
    assert len(_ready_nodes(engine)) == 3
    for d in on_new:
        assert Path(d.takes[0].files["wav"]).read_bytes() == local_bytes(d.takes[0].seed)


def _starve(engine: Engine, stop: threading.Event, lasted: list[float]) -> None:
    """What a host too busy to schedule the workers does to them, made repeatable: every ready worker
    is stopped (SIGSTOP) for growing spells, 0.5 to 3 s, with short runs in between; `lasted` gets each
    spell's real length. The first is well under the 2 s floor, since on a loaded machine this thread
    wakes late too: a spell longer than the floor before any silence was measured is a death by design."""
    for spell in (0.5, 1.0, 1.5, 2.5, 3.0, 3.0, 3.0):
        pids = [w["pid"] for w in engine.pool.worker_info() if w["state"] == "ready" and w.get("pid")]
        t0 = time.monotonic()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        stop.wait(spell)
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        lasted.append(round(time.monotonic() - t0, 2))
        if stop.wait(0.7):
            return


def test_finding_10_a_batch_on_a_machine_loaded_by_another_process_finishes(engine: Engine, style) -> None:
    """Issue 27 finding 10: with other work on the machine, heartbeats came 6.0-6.4 s apart against a
    fixed 6 s budget; each was a false death, restarts timed out, and songs failed with "no worker can
    run ... restarting" while a node was healthy. Here: CPU-burning background processes (twice as many as CPUs)
    load the machine, and the workers are starved (SIGSTOP) for spells that grow past the 2 s floor, while a
    batch runs on the cluster. The budget grows with the silences measured: no worker is declared dead,
    no take is retried, every song finishes (with a fixed budget the 2.5 s spell killed every worker)."""
    _wait("three Ray workers ready", lambda: len(_ready_nodes(engine)) == 3)
    # At nice 10 the burners take what the machine has spare, as a background job would: run alone, this
    # test's machine is loaded; in the suite they do not stall the other test processes for the batch's
    # 35 s (at nice 0 they held two cores' worth of the suite's time). The silences are the SIGSTOP spells.
    burners = [subprocess.Popen([sys.executable, "-c", "import os; os.nice(10)\nwhile True: pass"])
               for _ in range(2 * (os.cpu_count() or 1))]
    stop = threading.Event()
    lasted: list[float] = []
    starver = threading.Thread(target=_starve, args=(engine, stop, lasted), daemon=True)
    try:
        time.sleep(1.0)  # the load is on before the batch starts
        jobs = [engine.submit(SongRequest(style=style, steps=LONG, seed=400 + i)) for i in range(6)]
        _wait("the batch running", lambda: any(isinstance(e, Step) for j in jobs for e in j.events))
        starver.start()
        done, failed = _settle(jobs)
    finally:
        stop.set()
        if starver.is_alive():
            starver.join(15)
        for b in burners:
            b.kill()
            b.wait()
    assert not failed, [f.error for f in failed]
    assert len(done) == 6
    retried = [e.reason for j in jobs for e in j.events if isinstance(e, Retrying)]
    assert not retried, (retried, f"spells lasted {lasted} s")  # no false death
