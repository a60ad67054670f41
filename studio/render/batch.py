"""One `studio render` run: validate every job, decide what --resume skips, start the workers, render,
write the manifest, and summarise (exit status included).

The engine is built before validation but its workers start only after it (`Engine(start=False)`), so
the lyric layout is checked with the engine's own tokenizer and `--strict` stops a bad file before any
device time is spent.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from studio.render.identity import RunSettings, identity, identity_hash
from studio.render.jobs import ParsedJobs, parse_jobs
from studio.render.outdir import Manifest, OutDir, OutDirBusy, now_iso
from studio.render.progress import Progress
from studio.render.runner import EXIT_INTERRUPTED, BatchRunner, Interrupts, Pending

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass
class BatchOptions:
    source: str  # the jobs file as the user named it
    text: str
    base_dir: Path
    outdir: Path
    data_dir: Path
    models: Any  # engine.config.Models
    plan: Any  # studio.cli.options.WorkerPlan
    policy: str = "fifo"
    crop_frames: int | None = None
    resume: bool = False
    strict: bool = False
    quiet: bool = False
    session: str | None = None
    single: bool = False  # the one-song form: problems without jobs-file line numbers
    db_url: str | None = None  # --session: the store's database (None: studio.db in the data folder)
    stream: Any = None  # stderr
    best_of: int | None = None  # --best-of N: for the lines without their own "best_of"


@dataclass
class Result:
    code: int
    summary: dict[str, Any] = field(default_factory=dict)


class Batch:
    def __init__(self, opts: BatchOptions) -> None:
        self.opts = opts
        self.err = opts.stream or sys.stderr

    def say(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()

    def run(self) -> Result:
        from engine.config import EngineConfig
        from engine.engine import Engine

        o = self.opts
        specs = o.plan.specs()
        config = EngineConfig(o.data_dir, o.models, workers=specs, policy=o.policy, crop_frames=o.crop_frames,
                           **o.plan.engine_options())
        engine = Engine(config, start=False)
        try:
            return self._run(engine, config, specs)
        finally:
            engine.close()

    def _run(self, engine: Any, config: Any, specs: list[Any]) -> Result:
        o = self.opts
        parsed = parse_jobs(o.text, o.base_dir, validate=lambda r: engine.validate(r).problems, best_of=o.best_of)
        self._report(parsed)
        problems = [p.to_dict() for p in parsed.problems]
        if parsed.problems and (o.strict or not parsed.jobs):
            summary = {"ok": False, "status": "refused", "problems": problems,
                       "counts": {"invalid": len(parsed.invalid_lines)}}
            if not o.single:
                why = "--strict: nothing was rendered" if o.strict else "no valid job: nothing was rendered"
                self.say(f"error: {why}")
            if not o.single and not o.strict:
                # The morning reader looks in the manifest: a run where every line was bad says so there too
                # (--strict stops before touching the output folder, as documented).
                summary["manifest"] = self._refused_manifest(engine, specs, parsed)
            return Result(EXIT_USAGE, summary)
        outdir = OutDir(o.outdir)
        try:
            outdir.prepare()
        except OutDirBusy as exc:
            self.say(f"error: {exc}")
            return Result(EXIT_USAGE, {"ok": False, "status": "refused", "error": str(exc), "problems": problems})
        try:
            return self._run_jobs(engine, specs, parsed, problems, outdir)
        finally:
            outdir.release()

    def _manifest(self, engine: Any, specs: list[Any], parsed: ParsedJobs) -> Manifest:
        """The run's manifest with every invalid line already in it."""
        o = self.opts
        manifest = Manifest(o.outdir, {
            "manifest_version": 1, "jobs_file": o.source, "outdir": str(o.outdir), "started": now_iso(),
            "models": engine.model_ids,
            "settings": {"policy": o.policy, "workers": [s.name for s in specs], "crop_frames": o.crop_frames,
                         "resume": o.resume},
            "pid": os.getpid(),
        })
        for p in parsed.problems:
            entry = manifest.jobs.get(p.line, {"problems": []})
            manifest.set(p.line, id=parsed.lines.get(p.line), outcome="invalid",
                         problems=entry.get("problems", []) + [p.to_dict()])
        return manifest

    def _refused_manifest(self, engine: Any, specs: list[Any], parsed: ParsedJobs) -> str | None:
        """`OUTDIR/manifest.json` for a run with no valid job (status "refused"); its path, or None when
        the folder is busy or cannot be written (the summary on stderr says the same)."""
        outdir = OutDir(self.opts.outdir)
        try:
            outdir.prepare()
        except (OutDirBusy, OSError) as exc:
            self.say(f"error: {exc}")
            return None
        try:
            self._manifest(engine, specs, parsed).write("refused")
        finally:
            outdir.release()
        return str(Path(self.opts.outdir) / "manifest.json")

    def _run_jobs(self, engine: Any, specs: list[Any], parsed: ParsedJobs, problems: list[dict[str, Any]],
                  outdir: OutDir) -> Result:
        o = self.opts
        settings = RunSettings(models=engine.model_ids, crop_frames=o.crop_frames,
                               workers=tuple(sorted({f"{s.backend}/{s.precision}" for s in specs})))
        manifest = self._manifest(engine, specs, parsed)
        todo: list[Pending] = []
        for job in parsed.jobs:
            ident = identity(job, settings)
            h = identity_hash(ident)
            done = outdir.completed(job.id, h) if o.resume else None
            if done is not None:
                manifest.set(job.line, id=job.id, outcome="skipped", identity_hash=h, folder=job.id,
                             seeds=[t["seed"] for t in done["takes"]],
                             files=[{k: f"{job.id}/{v}" for k, v in t["files"].items()} for t in done["takes"]])
            else:
                manifest.set(job.line, id=job.id, outcome="pending", identity_hash=h)
                todo.append(Pending(job, ident, h))
        if o.resume and len(todo) < len(parsed.jobs):
            self.say(f"--resume: {len(parsed.jobs) - len(todo)} job(s) complete and unchanged, skipped; "
                     f"{len(todo)} to render")
        status = self._render(engine, manifest, outdir, todo) if todo else "complete"
        data = manifest.write(status)
        return self._result(data, status, problems)

    def _render(self, engine: Any, manifest: Manifest, outdir: OutDir, todo: list[Pending]) -> str:
        from engine.pool import NoWorkerError

        o = self.opts
        manifest.write("starting")
        recorder = None
        if o.session:
            from studio.identity import Identity
            from studio.render.recorder import SessionRecorder
            from studio.store import Store

            # The machine's own owner: a browser sees these sessions once opened with `studio token`'s link.
            recorder = SessionRecorder(Store(o.data_dir, db_url=o.db_url), o.session,
                                       Identity(o.data_dir).cli_owner())
            manifest.header["session"] = {"name": o.session, "id": recorder.session_id,
                                          "database": recorder.store.database}  # no password
        progress = Progress(len(todo), stream=self.err, quiet=o.quiet)
        runner = BatchRunner(engine, outdir, manifest, progress, recorder=recorder)
        interrupts = Interrupts(runner.stop.set, self.say).install()
        try:
            if not o.quiet:
                self.say(f"starting the workers on the {o.plan.describe()} ..." if engine.config.ray
                         else f"starting {len(engine.config.workers)} worker(s) ...")
            try:
                engine.pool.start()
            except NoWorkerError as exc:
                self.say(f"error: the workers did not start: {exc}")
                for p in todo:
                    manifest.set(p.job.line, outcome="not-started", error=f"workers did not start: {exc}")
                return "workers-failed"
            workers = engine.pool.worker_info()
            # Ray workers are no children of ours (their pids are another host's): they end with their
            # actors, which Ray stops when this process is gone.
            interrupts.worker_pids = [] if engine.config.ray else [
                w["pid"] for w, s in zip(workers, engine.config.workers, strict=False)
                if s.address is None and w.get("pid")]
            manifest.header["workers"] = [{k: w.get(k) for k in ("name", "pid", "backend", "device", "precision")}
                                          for w in workers]
            if runner.stop.is_set():  # Ctrl-C while the workers loaded
                for p in todo:
                    manifest.set(p.job.line, outcome="not-started")
                return "interrupted"
            runner.run(todo)
            return "interrupted" if runner.stop.is_set() else "complete"
        finally:
            progress.close()
            interrupts.restore()
            if recorder is not None:
                recorder.close()

    def _result(self, data: dict[str, Any], status: str, problems: list[dict[str, Any]]) -> Result:
        counts = data["counts"]
        if status == "interrupted":
            code = EXIT_INTERRUPTED
        elif status == "workers-failed":
            code = EXIT_USAGE
        else:
            code = EXIT_FAILED if counts.get("failed") or counts.get("invalid") else EXIT_OK
        jobs = [{k: e.get(k) for k in ("line", "id", "outcome", "folder", "seeds", "files", "error",
                                               "store_take_ids")}
                for e in data["jobs"]]
        summary = {"ok": code == EXIT_OK, "status": status, "exit_code": code, "counts": counts,
                   "outdir": data["outdir"], "manifest": str(Path(data["outdir"]) / "manifest.json"),
                   "jobs": jobs, "problems": problems, "session": data.get("session")}
        return Result(code, summary)

    def _report(self, parsed: ParsedJobs) -> None:
        if not parsed.problems:
            return
        if self.opts.single:
            for p in parsed.problems:
                where = f"{p.field} line {p.lyric_line}" if p.lyric_line is not None else p.field
                self.say(f"error: {where}: {p.message}")
            return
        n_bad = len(parsed.invalid_lines)
        total = len(parsed.lines)
        what = "stop the run (--strict)" if self.opts.strict else "will be skipped"
        self.say(f"{self.opts.source}: {n_bad} of {total} job(s) invalid; they {what}:")
        for p in parsed.problems:
            self.say(f"  {p}")
