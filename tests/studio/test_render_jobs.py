"""`studio render` without workers: the jobs file's validation report, identities for --resume, folders
committed by rename, progress output, Ctrl-C handling, and the command line refusing before any device
time is spent (--strict, usage errors)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from engine.request import Problem
from studio.render.identity import RunSettings, identity, identity_hash
from studio.render.jobs import parse_jobs
from studio.render.outdir import Manifest, OutDir, OutDirBusy, write_json
from studio.render.progress import Progress
from studio.render.runner import Interrupts

SETTINGS = RunSettings(models={"kind": "release", "base": "cfm_model.pt:1:abc"}, workers=("torch/float32",))


def lines(*objs: object) -> str:
    return "\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs)


def test_report_names_line_field_and_problem_for_every_bad_job(tmp_path: Path) -> None:
    (tmp_path / "lyr").mkdir()
    (tmp_path / "lyr" / "one.lrc").write_text("[00:01.00]hi\n[00:02.00]\n", encoding="utf-16")
    text = lines(
        {"id": "ok", "lyrics": "lyr/one.lrc", "style": "jazz", "duration": 95},
        {"id": "x", "style": "jazz", "duration": 95, "zeta": 1, "alpha": 2},
        {"style": "jazz", "duration": "long", "steps": 2.5},
        "",
        "{not json",
        '["a", "list"]',
        {"id": "../up", "style": {"audio": "missing.wav"}, "duration": 95, "lyrics": "nope.txt"},
        {"id": "dup", "style": {"voice": "x"}, "duration": 95},
        {"id": "dup", "style": "pop", "duration": 95, "edit": {"song": "s.wav", "segments": [[1]], "x": 0}},
        {"id": "inst", "style": "pop", "duration": 95, "lyrics": "", "formats": "wav"},
    )
    parsed = parse_jobs(text, tmp_path)
    assert [j.id for j in parsed.jobs] == ["ok"]
    assert parsed.jobs[0].request.lyrics == "[00:01.00]hi\n[00:02.00]\n"  # read from the file, UTF-16
    assert parsed.jobs[0].files["lyrics"] == str(tmp_path / "lyr" / "one.lrc")
    got = [(p.line, p.field) for p in parsed.problems]
    assert got == [(2, "keys"), (3, "id"), (3, "duration"), (3, "steps"), (5, "json"), (6, "json"),
                   (7, "id"), (7, "lyrics"), (7, "style.audio"), (8, "id"), (8, "style"), (9, "id"),
                   (9, "edit"), (9, "edit.segments"), (10, "formats")]
    by = {(p.line, p.field): p for p in parsed.problems}
    assert "unknown key(s) ['alpha', 'zeta']" in by[(2, "keys")].message  # sorted, with what is allowed
    assert by[(3, "id")].message == "missing (required)"
    assert "'dup' is used on lines 8, 9" in by[(9, "id")].message and by[(8, "id")].job_id == "dup"
    assert str(by[(7, "lyrics")]).startswith("line 7 (id '../up'): lyrics: ") and "no such file" in str(by[(7, "lyrics")])
    assert parsed.invalid_lines == [2, 3, 5, 6, 7, 8, 9, 10]
    assert parsed.lines[4 + 1] is None and 4 not in parsed.lines  # blank lines are not jobs


def test_engine_problems_keep_the_lyric_line_and_unknown_keys_do_not_hide_them(tmp_path: Path) -> None:
    seen = []

    def validate(request):  # stands in for Engine.validate: duration and one lyric line
        seen.append(request)
        return [Problem("duration", "use 95 or 96-285"), Problem("lyrics", "dropped: too late", line=3),
                Problem("style.text", "the style prompt is empty")]

    parsed = parse_jobs(lines({"id": "a", "style": " ", "duration": 20, "lyrics": "x", "extra": 1}), tmp_path,
                        validate=validate)
    assert [str(p) for p in parsed.problems] == [
        "line 1 (id 'a'): keys: unknown key(s) ['extra']; allowed: ['best_of', 'cfg', 'duration', 'edit', 'formats', 'id', "
        "'lyrics', 'seed', 'steps', 'style', 'variations']",
        "line 1 (id 'a'): duration: use 95 or 96-285",
        "line 1 (id 'a'): lyrics line 3: dropped: too late",
        "line 1 (id 'a'): style: the style prompt is empty"]
    assert seen[0].title == "a" and not parsed.jobs


def test_empty_file_is_one_problem(tmp_path: Path) -> None:
    parsed = parse_jobs("\n\n", tmp_path)
    assert not parsed.jobs and [p.field for p in parsed.problems] == ["file"]


def test_identity_follows_content_not_paths(tmp_path: Path) -> None:
    for d in ("one", "two"):
        (tmp_path / d).mkdir()
        (tmp_path / d / "song.lrc").write_text("[00:01.00]hi\n[00:02.00]\n")
        (tmp_path / d / "ref.wav").write_bytes(b"RIFF....same")

    def ident(folder: str, **extra: object) -> str:
        job = {"id": "a", "lyrics": f"{folder}/song.lrc", "style": {"audio": f"{folder}/ref.wav"}, "duration": 95,
               **extra}
        (parsed,) = parse_jobs(json.dumps(job), tmp_path).jobs
        return identity_hash(identity(parsed, SETTINGS))

    base = ident("one")
    assert ident("two") == base  # the same bytes elsewhere: the same song
    assert ident("one", seed=3) != base and ident("one", steps=8) != base and ident("one", formats=["flac"]) != base
    (tmp_path / "two" / "ref.wav").write_bytes(b"RIFF....other")
    assert ident("two") != base  # a re-recorded reference under the same name is a change
    (tmp_path / "one" / "song.lrc").write_text("[00:01.00]bye\n[00:02.00]\n")
    assert ident("one") != base
    (job,) = parse_jobs(json.dumps({"id": "a", "style": "s", "duration": 95}), tmp_path).jobs
    other = RunSettings(models={**SETTINGS.models, "base": "cfm_model.pt:2:def"}, workers=SETTINGS.workers)
    assert identity_hash(identity(job, SETTINGS)) != identity_hash(identity(job, other))
    assert identity(job, SETTINGS)["effective"]["seed"] is None  # random seed: kept once rendered


def test_outdir_commit_replaces_by_rename_and_completed_checks_identity_and_files(tmp_path: Path) -> None:
    od = OutDir(tmp_path / "out")
    od.prepare()
    old = od.new_partial("a")
    (old / "old.wav").write_bytes(b"x")
    write_json(old / "render.json", {"status": "done", "identity_hash": "h1",
                                     "takes": [{"files": {"wav": "old.wav"}}]})
    od.commit(old, "a")
    assert od.completed("a", "h1") is not None and od.completed("a", "h2") is None
    new = od.new_partial("a")
    (new / "new.wav").write_bytes(b"y")
    write_json(new / "render.json", {"status": "done", "identity_hash": "h2",
                                     "takes": [{"files": {"wav": "new.wav"}}]})
    od.commit(new, "a")
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == ["a"]
    assert sorted(p.name for p in (tmp_path / "out" / "a").iterdir()) == ["new.wav", "render.json"]
    (tmp_path / "out" / "a" / "new.wav").write_bytes(b"")  # an empty file is not a finished song
    assert od.completed("a", "h2") is None
    debris = od.new_partial("b")
    (tmp_path / "out" / ".old-a-1234").mkdir()
    with pytest.raises(OutDirBusy, match=rf"another studio render \(pid {os.getpid()}\) is writing"):
        OutDir(tmp_path / "out").prepare()  # a second run would take our temporaries for debris
    assert debris.is_dir()
    od.release()
    later = OutDir(tmp_path / "out")
    assert sorted(later.prepare()) == [".old-a-1234", debris.name]
    od.write_failure("c", {"error": "E: x"})
    assert json.loads((tmp_path / "out" / "c" / "failure.json").read_text()) == {"error": "E: x"}
    m = Manifest(tmp_path / "out", {"jobs_file": "j"})
    m.set(2, id="b", outcome="done")
    m.set(1, id="a", outcome="invalid")
    data = m.write("complete")
    assert [j["line"] for j in data["jobs"]] == [1, 2] and data["counts"] == {"done": 1, "invalid": 1}
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["status"] == "complete"


def test_progress_plain_lines_and_terminal_bars() -> None:
    from engine import events as ev

    plain = io.StringIO()
    p = Progress(2, stream=plain, tty=False, every_s=0.0)
    p.start("a", 1)
    p.event("a", ev.Running("j", take=0, seed=1, worker="w0"))
    p.event("a", ev.Step("j", take=0, k=3, total=8, step_s=0.1, eta_s=65.0))
    p.end("a", "done")
    p.end("b", "failed", "ValueError: nope")
    text = plain.getvalue()
    assert "[1/2] a: started" in text and "a: step 3/8  ETA 1:05" in text
    assert "[1/2] a: ok (0:00)" in text and "[2/2] b: FAILED: ValueError: nope" in text
    pipelined = io.StringIO()  # three jobs started before any ended: each has its own number
    p = Progress(3, stream=pipelined, tty=False)
    for job in "xyz":
        p.start(job, 1)
    assert [line.split()[0] for line in pipelined.getvalue().splitlines()] == ["[1/3]", "[2/3]", "[3/3]"]
    term = io.StringIO()
    p = Progress(4, stream=term, tty=True, draw_s=0.0)
    p.start("a", 2)
    p.event("a", ev.Decoding("j", take=1, j=2, total=4, window_s=0.1, eta_s=5.0))
    out = term.getvalue()
    assert "all  [" in out and "job  [" in out and "a take 2/2: decode window 2/4  ETA 0:05" in out
    assert "\x1b[J" in out  # redrawn in place
    busy = io.StringIO()
    p = Progress(1, stream=busy, tty=True)
    p.start("a", 1)
    for k in range(1, 200):
        p.event("a", ev.Step("j", take=0, k=k, total=200, step_s=0.001, eta_s=1.0))
    assert busy.getvalue().count("all  [") <= 3  # ~10 frames a second, not one per step
    quiet = io.StringIO()
    p = Progress(1, stream=quiet, quiet=True, tty=False)
    p.start("a", 1)
    p.end("a", "done")
    assert quiet.getvalue() == ""


def test_first_ctrl_c_stops_second_kills_our_workers_and_exits_130() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    calls: list[object] = []
    said: list[str] = []
    irq = Interrupts(lambda: calls.append("stop"), said.append, exit_now=lambda code: calls.append(code))
    irq.worker_pids = [child.pid]
    irq.handle(signal.SIGINT)
    assert calls == ["stop"] and child.poll() is None and "Ctrl-C again" in said[0]
    irq.handle(signal.SIGINT)
    assert calls == ["stop", 130]
    assert child.wait(10) == -signal.SIGKILL


def run_cli(args: list[str], tmp: Path) -> object:
    from studio.cli import main

    return CliRunner().invoke(main, ["render", *args], catch_exceptions=False,
                              env={"DRS_LOCK_DIR": str(tmp / "locks"), "STUDIO_DATA_DIR": str(tmp / "data")})


def test_strict_stops_before_any_worker_starts(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(lines({"id": "good", "style": "jazz", "duration": 95},
                          {"id": "long", "style": "jazz", "duration": 400},
                          {"id": "sung", "style": "jazz", "duration": 95,
                           "lyrics": "[00:01.00]la\n[02:00.00]la, past the song end\n"}))
    res = run_cli([str(jobs), "-o", str(tmp_path / "out"), "--model", "test", "--strict", "--json"], tmp_path)
    assert res.exit_code == 2
    summary = json.loads(res.stdout)
    assert summary["status"] == "refused" and summary["counts"] == {"invalid": 2}
    assert {(p["line"], p["field"]) for p in summary["problems"]} >= {(2, "duration")}
    assert "2 of 3 job(s) invalid; they stop the run (--strict)" in res.stderr
    assert "error: --strict: nothing was rendered" in res.stderr and "starting" not in res.stderr
    assert res.stderr.count("line 2 (id 'long'): duration:") == 1  # request and model checks agree: once
    assert "line 3 (id 'sung'): lyrics line 2:" in res.stderr  # the engine's lyric layout, line by line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("args", "message"), [
    ([], "give a jobs file"),
    (["jobs.jsonl", "--style", "x"], "not both"),
    (["--style", "x", "--duration", "95"], "needs --style, --duration and -o FILE"),
    (["--style", "x", "--duration", "95", "-o", "song.aiff"], "must end in one of .wav, .flac, .mp3, .ogg"),
    (["jobs.jsonl", "--seed", "3"], "per-line keys"),
    (["missing.jsonl"], "missing.jsonl: no such file"),
    (["--style", "x", "--duration", "20", "-o", "s.wav", "--model", "test"], "error: duration: duration 20.0 s"),
])
def test_usage_errors_are_one_line_and_exit_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str],
                                             message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.jsonl").write_text("{}\n")
    res = run_cli(args, tmp_path)
    assert res.exit_code == 2 and res.stderr.startswith("error: ") and message in res.stderr
    assert res.stderr.count("\n") == 1


# ---- hostile jobs files (issue 14): each is that line's problem, never a traceback or a hang ----------------


def test_a_deeply_nested_line_is_that_lines_problem(tmp_path: Path) -> None:
    deep = "[" * 100_000 + "]" * 100_000  # RecursionError inside json.loads
    under_the_limit = {"id": "b", "style": "jazz", "duration": 95, "lyrics": json.loads("[" * 500 + "]" * 500)}
    parsed = parse_jobs(lines({"id": "ok", "style": "jazz", "duration": 95}, deep, '{"id": "a", "x": ' + deep + "}",
                              under_the_limit), tmp_path)
    assert [j.id for j in parsed.jobs] == ["ok"]
    by = {p.line: p for p in parsed.problems}
    assert sorted(by) == [2, 3, 4] and {p.field for p in parsed.problems} == {"json"}
    assert by[2].message == "not valid JSON: nested too deeply (a job line nests at most 8 levels)"
    assert by[3].message == by[2].message and parsed.lines[3] is None
    assert by[4].message == "nested more than 8 levels deep; a job line needs at most 4"


def test_lines_end_at_newline_only_never_at_unicode_separators(tmp_path: Path) -> None:
    text = ('{"id": "a", "style": "jazz\u2028pop", "duration": 95}\r\n'
            '{"id": "b", "style": "x\u2029y\x85z\u2028", "duration": 95, "lyrics": "one\u2028two"}\n'
            "\r\n"
            '{"id": "c", "style": "folk", "duration": 95}')
    parsed = parse_jobs(text, tmp_path)
    assert parsed.problems == []
    assert [(j.id, j.line) for j in parsed.jobs] == [("a", 1), ("b", 2), ("c", 4)]
    assert parsed.jobs[0].request.style.text == "jazz\u2028pop"
    assert parsed.jobs[1].request.style.text == "x\u2029y\x85z\u2028" and parsed.jobs[1].request.lyrics == "one\u2028two"
    assert sorted(parsed.lines) == [1, 2, 4]  # no phantom line
    # A line holding only a separator is not blank: JSON's whitespace is space, tab, CR and LF.
    (problem,) = parse_jobs('{"id": "a", "style": "s", "duration": 95}\n\u2028\n', tmp_path).problems
    assert (problem.line, problem.field) == (2, "json")


@pytest.mark.parametrize(("job_id", "rule"), [
    ("x\n", "holds the control character U+000A"),
    ("x\ty", "holds the control character U+0009"),
    ("x\r", "holds the control character U+000D"),
    ("a\u200bb", "holds the invisible character U+200B"),
    ("a\x7f", "holds the control character U+007F"),
    ("", "is empty"),
    ("a" * 101, "is 101 characters long"),
    ("-a", "starts with '-'"),
    (".hidden", "starts with '.'"),
    ("a/b", "holds '/', which is not allowed"),
    ("café", "holds 'é', which is not allowed"),
    (7, "a string of"),
])
def test_ids_name_the_rule_they_break(tmp_path: Path, job_id: object, rule: str) -> None:
    parsed = parse_jobs(lines({"id": job_id, "style": "jazz", "duration": 95}), tmp_path)
    assert not parsed.jobs
    (problem,) = [p for p in parsed.problems if p.field == "id"]
    assert rule in problem.message, problem.message
    assert "1-100 of letters, digits, '.', '_', '-', starting with a letter or digit" in problem.message


def test_non_finite_numbers_are_refused_wherever_they_are(tmp_path: Path) -> None:
    (tmp_path / "s.wav").write_bytes(b"RIFF")
    seen: list[object] = []
    text = lines(
        '{"id": "a", "style": "jazz", "duration": NaN}',
        '{"id": "b", "style": "jazz", "duration": 95, "cfg": Infinity}',
        '{"id": "c", "style": "jazz", "duration": 1e999}',
        '{"id": "d", "style": "jazz", "duration": 95, "edit": {"song": "s.wav", "segments": [[NaN, 10]]}}',
        '{"id": "e", "style": "jazz", "duration": 95, "edit": {"song": "s.wav", "segments": [[0, 1], [5, -Infinity]]}}',
        '{"id": "f", "style": "jazz", "duration": 95, "seed": NaN, "steps": Infinity}',
        '{"id": "g", "style": "jazz", "duration": 95, "edit": {"song": "s.wav", "segments": [[1, 2]]}}',
    )
    parsed = parse_jobs(text, tmp_path, validate=lambda r: seen.append(r) or [])
    assert [j.id for j in parsed.jobs] == ["g"] and len(seen) == 1  # the engine only sees finite numbers
    got = [(p.line, p.job_id, p.field) for p in parsed.problems]
    assert got == [(1, "a", "duration"), (2, "b", "cfg"), (3, "c", "duration"), (4, "d", "edit.segments[0][0]"),
                   (5, "e", "edit.segments[1][1]"), (6, "f", "seed"), (6, "f", "steps")]
    assert all("is not a finite number" in p.message for p in parsed.problems)
    assert parsed.problems[0].message.startswith("nan is not a finite number")


def test_fifos_and_devices_named_as_inputs_are_refused_without_opening(tmp_path: Path) -> None:
    for name in ("lyrics.lrc", "ref.wav", "song.wav", "style.npy"):
        os.mkfifo(tmp_path / name)  # nobody ever writes: opening one for reading would block for good
    text = lines({"id": "a", "style": "jazz", "duration": 95, "lyrics": "lyrics.lrc"},
                 {"id": "b", "style": {"audio": "ref.wav"}, "duration": 95},
                 {"id": "c", "style": {"embedding": "style.npy"}, "duration": 95},
                 {"id": "d", "style": "jazz", "duration": 95, "edit": {"song": "song.wav", "segments": [[1, 2]]}},
                 {"id": "e", "style": "jazz", "duration": 95, "lyrics": "/dev/null.lrc"},
                 {"id": "f", "style": {"audio": "/dev/zero"}, "duration": 95})
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(parse_jobs(text, tmp_path)), daemon=True)
    t.start()
    t.join(20)
    assert result, "parse_jobs blocked on a FIFO"
    parsed = result[0]
    got = {(p.line, p.field): p.message for p in parsed.problems}
    assert sorted(got) == [(1, "lyrics"), (2, "style.audio"), (3, "style.embedding"), (4, "edit.song"),
                           (5, "lyrics"), (6, "style.audio")]
    fifo = "is a FIFO (named pipe), not a regular file"
    assert got[(1, "lyrics")] == f"{tmp_path / 'lyrics.lrc'}: {fifo}; give the path of a text file"
    assert got[(2, "style.audio")] == f"{tmp_path / 'ref.wav'}: {fifo}"
    assert got[(3, "style.embedding")] == f"{tmp_path / 'style.npy'}: {fifo}"
    assert got[(4, "edit.song")] == f"{tmp_path / 'song.wav'}: {fifo}"
    assert "no such file" in got[(5, "lyrics")]
    assert got[(6, "style.audio")] == "/dev/zero: is a character device, not a regular file"


def test_strict_render_of_a_hostile_jobs_file_exits_2_with_every_problem(tmp_path: Path) -> None:
    """A real `studio render --strict` process: a FIFO lyric file, deep nesting, NaN, an id with a newline
    and a raw U+2028 give one report and exit code 2 within seconds (it used to hang on the FIFO, or end
    in a RecursionError traceback with exit code 1)."""
    os.mkfifo(tmp_path / "fifo.lrc")
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(lines({"id": "fifo", "style": "jazz", "duration": 95, "lyrics": "fifo.lrc"},
                          "[" * 50_000 + "]" * 50_000,
                          '{"id": "nan", "style": "jazz", "duration": 95, "cfg": NaN}',
                          {"id": "x\n", "style": "jazz", "duration": 95},
                          '{"id": "sep", "style": "jazz\u2028pop", "duration": 95}'), encoding="utf-8")
    env = {**os.environ, "DRS_LOCK_DIR": str(tmp_path / "locks"), "STUDIO_DATA_DIR": str(tmp_path / "data"),
           "GRADIO_ANALYTICS_ENABLED": "False"}
    proc = subprocess.run([sys.executable, "-m", "studio.cli", "render", str(jobs), "-o", str(tmp_path / "out"),
                           "--model", "test", "--strict", "--json"], capture_output=True, text=True, timeout=120,
                          env=env, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    summary = json.loads(proc.stdout)
    assert {(p["line"], p["field"]) for p in summary["problems"]} == {(1, "lyrics"), (2, "json"), (3, "cfg"),
                                                                       (4, "id")}
    assert summary["counts"] == {"invalid": 4}
    assert "4 of 5 job(s) invalid; they stop the run (--strict)" in proc.stderr


def test_a_run_whose_every_job_is_invalid_still_writes_its_manifest(tmp_path: Path) -> None:
    """Left overnight without --strict, a file of only bad lines used to leave no `manifest.json`: the
    morning reader found an empty folder. The manifest now lists every line as invalid, with its problems."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(lines({"id": "long", "style": "jazz", "duration": 400}, {"id": "nostyle", "duration": 95}))
    res = run_cli([str(jobs), "-o", str(tmp_path / "out"), "--model", "test", "--json"], tmp_path)
    assert res.exit_code == 2
    assert "no valid job: nothing was rendered" in res.stderr
    summary = json.loads(res.stdout)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert summary["manifest"] == str(tmp_path / "out" / "manifest.json")
    assert manifest["status"] == "refused" and manifest["counts"] == {"invalid": 2}
    assert [(j["line"], j["id"], j["outcome"]) for j in manifest["jobs"]] == [(1, "long", "invalid"),
                                                                            (2, "nostyle", "invalid")]
    assert manifest["jobs"][0]["problems"][0]["field"] == "duration"
    assert not (tmp_path / "out" / ".render.lock").exists()  # released, as after any run
