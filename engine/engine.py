"""`Engine`: song requests in, progress and finished takes out, across one or many device workers.

    with Engine(EngineConfig(data_dir, models)) as engine:
        job = engine.submit(SongRequest(lyrics=lrc, style="jazz", duration=95))
        for event in job:
            ...

`submit` validates (every problem at once, lyric report included) and fixes the seed before anything is
queued; it raises `ValidationError` or `BusyError` at once. The rest happens in the pipeline
(`engine.pipeline`) over the worker pool (`engine.pool`); finished takes land in `data_dir/takes/`
(`engine.outputs`).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.events import LyricsChecked, TakeResult
from engine.inputs import DeviceOps, HostInputs
from engine.jobs import EngineJob
from engine.outputs import TakeRecord, new_take_dir, write_take
from engine.pipeline import Pipeline
from engine.request import Problem, SongRequest, ValidationError
from engine.units import DeviceStage, JobContext, Unit

logger = logging.getLogger(__name__)

TEST_MODEL_NOTE = "TEST MODEL: tiny random weights; this take is noise, not music"


class Engine:
    def __init__(self, config: EngineConfig, *, device: DeviceStage | None = None, ops: DeviceOps | None = None,
                 start: bool = True):
        """`device`/`ops` replace the worker pool (tests of the host stages); by default a `Pool` of
        `config.workers` is started (blocking until at least one worker is ready)."""
        from engine.style import load_negative_style

        self.config = config
        self.pool = None
        if device is None:
            from engine.pool import Pool  # imports pyzmq and the worker client only when needed

            self.pool = Pool(config)
            device = ops = self.pool
        models = config.models
        self.model_ids = models.ids()
        self._tokenizer: Any = None
        self._vocab_note: str | None = None
        self.inputs = HostInputs(ops, negative_style=load_negative_style(models.negative_style),
                                 cache_dir=str(config.cache_dir / "styles"),
                                 style_model_id=self.model_ids.get("style", "no-style-model"),
                                 crop_frames=config.crop_frames)
        self.checker = self._make_checker(ops)
        self.pipeline = Pipeline(prepare=self.inputs, device=device, write=self._write,
                                 max_ready=config.ready_limit, queue_limit=config.queue_limit,
                                 input_threads=config.input_threads, output_threads=config.output_threads,
                                 after_write=self._check_lyrics if self.checker else None)
        self._closed = False
        if start and self.pool is not None:
            try:
                self.pool.start()
            except BaseException:
                self.pipeline.close()
                raise

    # -- requests ---------------------------------------------------------------------------------
    def validate(self, request: SongRequest) -> Any:
        """Every problem with `request` (and its lyric layout) as this engine would run it."""
        tokenizer = self.tokenizer()
        if tokenizer is None and not request.instrumental:
            # TEST MODEL without the downloaded g2p vocabulary: sing nothing, and say so in the record.
            request = replace(request, lyrics="")
        validation = request.validate(tokenizer=tokenizer)
        if not any(p.field == "duration" for p in validation.problems):  # each problem named once
            try:
                self.config.models.dit(request.model_variant)
            except ValueError as exc:
                validation.problems.append(Problem("duration", str(exc)))
        return validation

    def submit(self, request: SongRequest, *, interactive: bool = False, out_dir: str | Path | None = None,
               validation: Any = None) -> EngineJob:
        """Validate, fix the seed, queue. `interactive`: cancel the job when its last subscriber leaves.
        `out_dir`: write the takes into this folder (the batch renderer's per-id folders) instead of a
        fresh folder per take under `data_dir/takes/`. `validation`: what `validate(request)` returned for
        this request (the seed aside), so a caller that showed the musician its report does not pay for
        the lyric layout twice."""
        if self._closed:
            raise RuntimeError("the engine is closed")
        request = request.with_seed()
        if validation is None:
            validation = self.validate(request)
        validation.raise_if_invalid()
        job = EngineJob(request, interactive=interactive)
        ctx = JobContext(job, request, request.seeds(), validation=validation,
                         out_dir=Path(out_dir) if out_dir is not None else None)
        self.pipeline.submit(ctx)  # BusyError when the queue is full; nothing was queued then
        logger.info("job %s queued: %s s, %d take(s), seeds %s", job.id, request.duration, request.variations,
                    ctx.seeds)
        return job

    def tokenizer(self) -> Any:
        """The g2p tokenizer for this engine's vocab (None in test mode when the vocab is absent)."""
        if self._tokenizer is None and self._vocab_note is None:
            from engine.lyrics import LyricTokenizer, VocabError

            try:
                self._tokenizer = LyricTokenizer(self.config.models.vocab)
            except VocabError as exc:
                if not self.config.models.test:
                    raise ValidationError([Problem("lyrics", str(exc))]) from None
                self._vocab_note = ("TEST MODEL without the g2p vocabulary: lyrics are not sung "
                                    "(instrumental stand-in)")
                logger.warning("%s: %s", self._vocab_note, exc)
        return self._tokenizer

    # -- the host output stage --------------------------------------------------------------------
    def _write(self, unit: Unit) -> TakeResult:
        ctx, request = unit.ctx, unit.ctx.request
        prepared = ctx.prepared
        dev = unit.device_timings
        timings = {
            "queued": round(unit.admitted - ctx.submitted, 6),
            "worker_wait": dev.get("worker_wait", 0.0),  # placement: a worker with room and the model
            "prepare": round(prepared.timings.get("prepare", 0.0) + dev.get("prepare", 0.0), 6),
            "diffusion": dev.get("steps", 0.0),
            "decode": dev.get("decode", 0.0),
        }
        if unit.first_sound_at is not None:  # from Generate to the first audio the page can play
            timings["first_sound"] = round(unit.first_sound_at - ctx.submitted, 6)
        notes = list(prepared.notes)
        if self.config.models.test:
            notes.insert(0, TEST_MODEL_NOTE)
        if self._vocab_note:
            notes.append(self._vocab_note)
        worker_info = next((w for w in self.pool.worker_info() if w["name"] == unit.worker), {}) if self.pool else {}
        info = TakeRecord(job_id=ctx.job.id, take=unit.take, seed=unit.seed, request=request.to_dict(),
                        models=self.model_ids, worker={**worker_info, "attempt": unit.attempt, **unit.device_memory},
                        timings=timings, lyrics_report=prepared.lyrics_report, notes=notes,
                        effective={**prepared.effective, "seeds": ctx.seeds, "steps": request.steps,
                                   "cfg": request.cfg, "policy": self.config.policy})
        info.style_match = self._style_match(unit)
        timings["style_match"] = dev.get("style_match", 0.0)  # the worker's, inside the take's last unit
        folder = ctx.out_dir or new_take_dir(self.config.takes_dir, request.title, unit.seed, unit.take)
        folder.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        files = write_take(folder, unit.audio(), info, request.output_formats(), pcm_fix=_splice_for(request, prepared))
        timings["write"] = round(time.perf_counter() - t0, 6)
        return TakeResult(unit.take, unit.seed, files, timings, unit.worker)

    def _style_match(self, unit: Unit) -> dict[str, Any]:
        """The take's MuQ-MuLan similarity to its style (engine.style_match, from the embedding the worker
        sent with the take), or why there is none."""
        if not self.config.models.style:
            return {"cosine": None, "why": "no style model is loaded"}
        heard = unit.style_heard
        if heard.get("embedding") is None:
            why = heard.get("error") or "the worker sent no style embedding with the take"
            logger.warning("style match of %s: %s", unit.key, why)
            return {"cosine": None, "why": why}
        from engine.style_match import style_match

        return style_match(heard["embedding"], unit.ctx.prepared.style, heard["window_s"])

    # -- the lyrics check (engine.hearing) ------------------------------------------------------------
    def _make_checker(self, ops: Any) -> Any:
        """A LyricsChecker when the check is on and the workers have a Whisper (`Models.lyrics`)."""
        if not self.config.lyrics_check or not self.config.models.lyrics or not hasattr(ops, "transcribe"):
            return None
        from engine.hearing import LyricsChecker

        return LyricsChecker(ops.transcribe, self.tokenizer)  # the g2p the model's tokens came from

    def _check_lyrics(self, unit: Unit, result: TakeResult, finished: Any) -> bool:
        """After the take is written and announced: check it on the checker's thread, then tell the job."""
        request = unit.ctx.request
        if request.instrumental or not str(request.lyrics or "").strip() or self.tokenizer() is None:
            return False  # instrumental takes are not checked (nor lyrics the test model could not sing)

        def done(check: dict[str, Any]) -> None:
            try:
                unit.job.publish(LyricsChecked(unit.job.id, take=unit.take, check=check, files=dict(result.files)))
            finally:
                finished()

        self.checker.submit(dict(result.files), done)
        return True

    # -- lifecycle --------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        return {"waiting": self.pipeline.waiting(), "in_flight": self.pipeline.in_flight(),
                "max_ready": self.pipeline.max_ready, "queue_limit": self.pipeline.queue_limit,
                "workers": self.pool.worker_info() if self.pool else [],
                "device_seconds": self.pool.device_seconds if self.pool else 0.0}

    def close(self) -> None:
        """Cancel what is queued or running, stop the stages, stop the workers (the cards are free after)."""
        if self._closed:
            return
        self._closed = True
        self.pipeline.close()
        if self.checker is not None:
            self.checker.close()
        if self.pool is not None:
            self.pool.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _splice_for(request: SongRequest, prepared: Any) -> Any:
    """A re-sing edit keeps its source's own samples outside the regenerated frames (engine.splice)."""
    if request.edit is None or not request.edit.splice or not prepared.edit_segments:
        return None
    from engine.splice import read_pcm, splice_pcm

    source, frames = read_pcm(request.edit.song), [list(s) for s in prepared.edit_segments]
    return lambda pcm: splice_pcm(pcm, source, frames)
