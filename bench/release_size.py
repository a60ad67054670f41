"""Release-size models, end to end: random weights in the exact release formats, then `studio render`.

Writes, into a folder laid out like `--models-dir` (`<dir>/<org>/<repo>/<file>`):
  ASLP-lab/DiffRhythm-1_2/cfm_model.pt        1.2 base DiT, fp16, {"model_state_dict": {"transformer.*"}}
  ASLP-lab/DiffRhythm-1_2-full/cfm_model.pt   1.2 full DiT (duration embedding), same format
  ASLP-lab/DiffRhythm-vae/vae_model.pt        Oobleck VAE at 128 channels, TorchScript (trace_module of
                                              decode_export / encode_export), as upstream ships it
  OpenMuQ/MuQ-MuLan-large/{config.json, pytorch_model.bin}   MuQ-large audio + XLM-R base text towers
  OpenMuQ/MuQ-large-msd-iter/config.json, FacebookAI/xlm-roberta-base/{config.json, tokenizer.json}
  ASLP-lab/DiffRhythm/{g2p/g2p/vocab.json, infer/example/vocal.npy}   copied from ../shared when present
then renders one 95 s song (text style) and one 285 s song (audio style) with `studio render` on the
CPU, polling every process's peak RSS (VmHWM). Prints load s per file (the worker's own loaders, timed
here), peak RSS per process against the weights' in-memory size, s per DiT update, s per VAE window,
and peak device memory where a GPU did the work. Random weights: noise, not music; the timings and
memory are what the real files cost. Takes tens of minutes on a 2-core CPU; not part of the tests.

    python bench/release_size.py --dir /tmp/release-models --steps 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "reference" / "models-dir" / "ASLP-lab" / "DiffRhythm"

# MuQ-MuLan-large as released: MuQ-large (1024 x 12 conformer), XLM-R base (768 x 12), 768-d towers.
MUQ = {"label_rate": 25, "num_codebooks": 1, "codebook_dim": 16, "codebook_size": 4096,
       "features": ["melspec_2048"], "hop_length": 240, "n_mels": 128, "conv_dim": 512, "encoder_dim": 1024,
       "encoder_depth": 12, "mask_hop": 0.4, "mask_prob": 0.6, "is_flash": False,
       "stat": {"melspec_2048_cnt": 14282760192, "melspec_2048_mean": 6.768444971712967,
                "melspec_2048_std": 18.417922652295623}}
MULAN = {
    "mulan": {"sr": 24000, "clip_secs": 10, "dim_latent": 512, "decoupled_contrastive_learning": True,
              "hierarchical_contrastive_loss": False, "hierarchical_contrastive_loss_layers": None,
              "sigmoid_contrastive_loss": False, "rank_contrast": True},
    "audio_model": {"name": "OpenMuQ/MuQ-large-msd-iter", "model_dim": 1024, "use_layer_idx": -1},
    "text_model": {"name": "xlm-roberta-base", "model_dim": 768, "use_layer_idx": -1},
    "audio_transformer": {"dim": 768, "tf_depth": 8, "heads": 8, "dim_head": 64, "attn_dropout": 0.0,
                          "ff_dropout": 0.0, "ff_mult": 4},
    "text_transformer": {"dim": 768, "tf_depth": 8, "max_seq_len": 1024, "dim_head": 64, "heads": 8,
                         "attn_dropout": 0.0, "ff_dropout": 0.0, "ff_mult": 4},
}
XLMR_VOCAB = 250_002


def _random_like(torch, key: str, shape: tuple[int, ...], dtype):
    """Plausible magnitudes so activations stay finite and non-zero: biases and running means 0, every
    other vector (norm gains, scales, Snake alpha/beta, running variances) 1, matrices ~N(0, 0.02)."""
    last = key.rsplit(".", 1)[-1]
    if last in ("bias", "running_mean", "num_batches_tracked"):
        return torch.zeros(shape, dtype=dtype)
    if len(shape) <= 1:
        return torch.ones(shape, dtype=dtype)
    return (torch.randn(shape) * 0.02).to(dtype)


def write_dit(torch, path: Path, preset: str) -> int:
    from device_worker.model.config import DiTConfig
    from device_worker.model.dit import DiT

    with torch.device("meta"):
        model = DiT(DiTConfig.from_name(preset))
    if path.is_file():  # written by an earlier run (random weights: any are as good)
        return sum(v.numel() for v in model.state_dict().values())
    state = {"transformer." + k: _random_like(torch, k, tuple(v.shape), torch.float16)
             for k, v in model.state_dict().items()}
    _save(torch, {"model_state_dict": state}, path)
    return sum(v.numel() for v in state.values())


def write_vae(torch, path: Path) -> int:
    from torch import nn

    from device_worker.model.vae import OobleckVAE
    from device_worker.model.vae_checkpoint import OobleckConfig

    vae = OobleckVAE(OobleckConfig(channels=128))

    class Export(nn.Module):  # upstream's traced module: two exported methods over encoder/decoder
        def __init__(self) -> None:
            super().__init__()
            self.encoder, self.decoder = vae.encoder, vae.decoder

        def decode_export(self, z):  # [B, 64, T] -> [B, 2, T * 2048]
            return self.decoder(z)

        def encode_export(self, x):  # [B, 2, n] -> [B, 128, n / 2048]
            return self.encoder(x)

    export = Export().eval()
    if path.is_file():
        return sum(p.numel() for p in export.parameters())
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        traced = torch.jit.trace_module(export, {"decode_export": torch.randn(1, 64, 2),
                                                 "encode_export": torch.randn(1, 2, 4096)})
    tmp = path.with_suffix(".part")
    traced.save(str(tmp))
    tmp.replace(path)
    return sum(p.numel() for p in export.parameters())


def write_mulan(torch, root: Path) -> int:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import XLMRobertaConfig

    from device_worker.style.load import build_mulan
    from device_worker.style.mulan import MuLanConfig
    from device_worker.style.muq import MuQConfig

    mulan_dir, muq_dir = root / "OpenMuQ/MuQ-MuLan-large", root / "OpenMuQ/MuQ-large-msd-iter"
    text_dir = root / "FacebookAI/xlm-roberta-base"
    for d in (mulan_dir, muq_dir, text_dir):
        d.mkdir(parents=True, exist_ok=True)
    w2v2 = _w2v2()
    (muq_dir / "config.json").write_text(json.dumps({**MUQ, "w2v2_config": w2v2}, indent=1))
    (mulan_dir / "config.json").write_text(json.dumps(MULAN, indent=1))
    # An XLM-R-sized unigram vocabulary (250,002 pieces, ids as XLM-R: <s> 0, <pad> 1, </s> 2, <unk> 3).
    pieces = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    pieces += [(c, -3.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    pieces += [(f"▁w{i}", -12.0) for i in range(XLMR_VOCAB - len(pieces) - 1)] + [("<mask>", 0.0)]
    tok = Tokenizer(models.Unigram(pieces, unk_id=3))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    tok.save(str(text_dir / "tokenizer.json"))
    XLMRobertaConfig(vocab_size=XLMR_VOCAB, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                     intermediate_size=3072, max_position_embeddings=514, type_vocab_size=1,
                     layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2).save_pretrained(text_dir)
    with torch.device("meta"):
        model = build_mulan(MuLanConfig.from_json(MULAN), MuQConfig.from_json({**MUQ, "w2v2_config": w2v2}),
                            text_dir)
    state = {"mulan." + k: _random_like(torch, k, tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}
    # transformers keeps the conformer's rotary table as a persistent buffer, so the released file has it.
    dim = MUQ["encoder_dim"] // w2v2["num_attention_heads"]
    state["mulan.audio.model.model.conformer.embed_positions.inv_freq"] = \
        1.0 / (10000 ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    _save(torch, state, mulan_dir / "pytorch_model.bin")
    return sum(v.numel() for v in state.values())


def _w2v2() -> dict:
    """wav2vec2-conformer-rope-large's config (the shared reference's full dict, at large sizes)."""
    ref = ROOT.parent / "shared/reference/muq/models/OpenMuQ/MuQ-large-msd-iter/config.json"
    if ref.is_file():
        return {**json.loads(ref.read_text())["w2v2_config"], "num_attention_heads": 16, "intermediate_size": 4096}
    return {"hidden_act": "swish", "position_embeddings_type": "rotary", "rotary_embedding_base": 10000,
            "conv_depthwise_kernel_size": 31, "layer_norm_eps": 1e-5, "num_attention_heads": 16,
            "intermediate_size": 4096, "hidden_size": 1024, "num_hidden_layers": 24,
            "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16, "attention_dropout": 0.0,
            "hidden_dropout": 0.0, "activation_dropout": 0.0, "feat_proj_dropout": 0.0, "layerdrop": 0.0,
            "max_source_positions": 5000, "conformer_conv_dropout": 0.0, "do_stable_layer_norm": True}


def _save(torch, obj, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    torch.save(obj, tmp)
    tmp.replace(path)


def write_models(root: Path) -> dict[str, int]:
    """All release files (skipped when already there); returns file -> parameter count."""
    import torch

    torch.manual_seed(0)
    done = root / "COMPLETE.json"
    if done.is_file():
        return json.loads(done.read_text())
    params = {
        "ASLP-lab/DiffRhythm-1_2/cfm_model.pt": write_dit(torch, root / "ASLP-lab/DiffRhythm-1_2/cfm_model.pt",
                                                          "diffrhythm-1.2-base"),
        "ASLP-lab/DiffRhythm-1_2-full/cfm_model.pt": write_dit(
            torch, root / "ASLP-lab/DiffRhythm-1_2-full/cfm_model.pt", "diffrhythm-1.2-full"),
        "ASLP-lab/DiffRhythm-vae/vae_model.pt": write_vae(torch, root / "ASLP-lab/DiffRhythm-vae/vae_model.pt"),
        "OpenMuQ/MuQ-MuLan-large/pytorch_model.bin": write_mulan(torch, root),
    }
    for rel in ("g2p/g2p/vocab.json", "infer/example/vocal.npy"):
        dst = root / "ASLP-lab/DiffRhythm" / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if (SHARED / rel).is_file():
            shutil.copyfile(SHARED / rel, dst)
        elif rel.endswith(".npy"):
            import numpy as np

            v = np.random.default_rng(0).standard_normal((1, 512)).astype(np.float32)
            np.save(dst, v / np.linalg.norm(v))
        else:
            raise SystemExit(f"{SHARED / rel} is missing: the lyric vocabulary cannot be made up")
    done.write_text(json.dumps(params))
    return params


# -- timing the loaders -----------------------------------------------------------------------------
def time_loaders(root: Path) -> dict[str, float]:
    """Each release file through the loader the worker uses, in a fresh process per file (cold caches
    are not forced: the page cache may hold a file just written; the note says so)."""
    code = {
        "ASLP-lab/DiffRhythm-1_2/cfm_model.pt": "from device_worker.model.load import load_dit; load_dit(P)",
        "ASLP-lab/DiffRhythm-1_2-full/cfm_model.pt": "from device_worker.model.load import load_dit; load_dit(P)",
        "ASLP-lab/DiffRhythm-vae/vae_model.pt": "from device_worker.model.vae import load_vae; load_vae(P)",
        "OpenMuQ/MuQ-MuLan-large/pytorch_model.bin":
            "from device_worker.style import load_style_model; load_style_model(os.path.dirname(P))",
    }
    out = {}
    for rel, stmt in code.items():
        path = root / rel
        target = str(path.parent) if rel.endswith("cfm_model.pt") else str(path)
        prog = (f"import os, time, torch; P = {target!r}; torch.set_num_threads(2)\n"
                f"t0 = time.perf_counter(); {stmt}; print(time.perf_counter() - t0)")
        r = subprocess.run([sys.executable, "-c", prog], cwd=ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"loading {rel} failed:\n{r.stderr[-3000:]}")
        out[rel] = float(r.stdout.strip().splitlines()[-1])
    return out


# -- the render, watched --------------------------------------------------------------------------
def _status(pid: int) -> dict[str, str]:
    out = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            k, _, v = line.partition(":")
            out[k] = v.strip()
    except OSError:
        pass
    return out


def _tree(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            ppid = _status(int(p.name)).get("PPid")
            if ppid:
                kids.setdefault(int(ppid), []).append(int(p.name))
    out, todo = [pid], [pid]
    while todo:
        for c in kids.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _label(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(a.decode(errors="replace") for a in argv)
    for key, name in (("device_worker", "worker"), ("engine.encoder", "encoder"), ("studio.cli", "studio render")):
        if key in text:
            return name
    return "other"


def render(root: Path, work: Path, steps: int, threads: int) -> tuple[dict, dict[str, float], float]:
    import numpy as np
    import soundfile as sf

    work.mkdir(parents=True, exist_ok=True)
    for seconds in (95, 285):  # sung lines through the song, then the empty line that ends the last one
        stamps = list(range(10, seconds - 10, 15)) + [seconds - 8]
        lrc = "".join(f"[{t // 60:02d}:{t % 60:02d}.00]" + (f"line {i} of the song" if i < len(stamps) - 1 else "")
                      + "\n" for i, t in enumerate(stamps))
        (work / f"song{seconds}.lrc").write_text(lrc, encoding="utf-8")
    t = np.arange(44100 * 30) / 44100
    ref = 0.3 * np.stack([np.sin(2 * np.pi * 220 * t), np.sin(2 * np.pi * 330 * t)], axis=1)
    sf.write(work / "reference.wav", ref.astype(np.float32), 44100)
    jobs = [{"id": "s95", "lyrics": "song95.lrc", "style": "warm jazz, female vocal", "duration": 95,
             "steps": steps, "seed": 1, "formats": ["wav", "mp3"]},
            {"id": "s285", "lyrics": "song285.lrc", "style": {"audio": "reference.wav"}, "duration": 285,
             "steps": steps, "seed": 2, "formats": ["wav", "ogg"]}]
    (work / "jobs.jsonl").write_text("".join(json.dumps(j) + "\n" for j in jobs), encoding="utf-8")
    argv = [sys.executable, "-m", "studio.cli", "render", str(work / "jobs.jsonl"), "-o", str(work / "out"),
            "--models-dir", str(root), "--threads", str(threads), "--data-dir", str(work / "data"), "--json"]
    env = {**os.environ, "DRS_LOCK_DIR": str(work / "locks"), "HF_HUB_OFFLINE": "1"}
    t0 = time.perf_counter()
    with open(work / "render.log", "w") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        peaks: dict[str, float] = {}
        while proc.poll() is None:
            for pid in _tree(proc.pid):
                hwm = _status(pid).get("VmHWM", "0 kB").split()[0]
                name = _label(pid)
                peaks[name] = max(peaks.get(name, 0.0), int(hwm) / 1024)
            time.sleep(0.5)
        out = proc.stdout.read()
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"studio render exited {proc.returncode}:\n{(work / 'render.log').read_text()[-4000:]}")
    return json.loads(out), peaks, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", type=Path, default=Path("/tmp/release-size-models"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/release-size-run"))
    ap.add_argument("--steps", type=int, default=2, help="Euler points per song (2 = one DiT update)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--skip-render", action="store_true")
    args = ap.parse_args()

    t0 = time.perf_counter()
    params = write_models(args.dir)
    print(f"release files in {args.dir} ({time.perf_counter() - t0:.0f} s to write or find)")
    sizes = {rel: (args.dir / rel).stat().st_size for rel in params}
    loads = time_loaders(args.dir)
    print(f"{'file':46} {'params':>14} {'bytes':>14} {'load s':>8}")
    for rel in params:
        print(f"{rel:46} {params[rel]:>14,} {sizes[rel]:>14,} {loads[rel]:>8.1f}")
    if args.skip_render:
        return
    if args.work.exists():
        shutil.rmtree(args.work)
    summary, peaks, wall = render(args.dir, args.work, args.steps, args.threads)
    # What the worker holds: one DiT at a time (fp32 on the CPU), the VAE and MuQ-MuLan (fp32).
    dit = max(params["ASLP-lab/DiffRhythm-1_2/cfm_model.pt"], params["ASLP-lab/DiffRhythm-1_2-full/cfm_model.pt"])
    weights_mb = (dit + params["ASLP-lab/DiffRhythm-vae/vae_model.pt"]
                  + params["OpenMuQ/MuQ-MuLan-large/pytorch_model.bin"]) * 4 / 2**20
    print(f"\nstudio render: {wall:.0f} s wall, exit {summary.get('exit_code')}, outcomes {summary.get('counts')}")
    print(f"{'process':14} {'peak RSS MB':>12}  target")
    for name, mb in sorted(peaks.items()):
        target = {"worker": f"<= weights {weights_mb:,.0f} MB + 1024 = {weights_mb + 1024:,.0f} MB",
                  "studio render": "< 500 MB"}.get(name, "")
        print(f"{name:14} {mb:>12,.0f}  {target}")
    from device_worker.shapes import plan_windows

    # "wait s": placement, i.e. the other song finishing and the worker switching DiTs; "worker load s":
    # the worker process's own load of its files (DiT + VAE + MuQ-MuLan) when it started with this DiT.
    print(f"\n{'song':6} {'frames':>7} {'updates':>7} {'s/update':>9} {'windows':>7} {'s/window':>9} "
          f"{'wait s':>7} {'worker load s':>13} {'prepare s':>9} {'write s':>8} {'GPU peak':>9}")
    for job in summary["jobs"]:
        if job["outcome"] != "done":
            print(f"{job['id']:6} {job['outcome']}: {job.get('error')}")
            continue
        rec = json.loads((args.work / "out" / job["files"][0]["json"]).read_text())
        tm, eff = rec["timings_s"], rec["effective"]
        updates, windows = eff["steps"] - 1, len(plan_windows(eff["frames"]))
        gpu = rec["worker"].get("cuda.peak_mb", "n/a (CPU)")
        print(f"{job['id']:6} {eff['frames']:>7} {updates:>7} {tm['diffusion'] / max(updates, 1):>9.1f} "
              f"{windows:>7} {tm['decode'] / windows:>9.1f} {tm['worker_wait']:>7.1f} "
              f"{float(rec['worker'].get('load_s') or 0):>13.1f} {tm['prepare']:>9.1f} {tm['write']:>8.1f} {gpu:>9}")


if __name__ == "__main__":
    main()
