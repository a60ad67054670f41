"""The test model: tiny random weights in the released file layouts. It makes noise, not music.

`studio serve --model test` (and `studio render --model test`) use it so anyone can try the whole flow
(lyrics, style, progress, takes, files, sharing) before downloading ~8 GB of weights, and so tests run
real worker processes on a CPU in seconds. Every file is written once under `root` (default: the user
cache) from fixed seeds, so two runs make the same "songs"; a README in the folder says what it is.

Layout (what `engine.config.Models` points at):
    dit-base/{cfm_model.pt, config.json}   DiT, 2048 frames (95 s)   dim 64, depth 2, 2 heads
    dit-full/{cfm_model.pt, config.json}   DiT, 6144 frames (96-285 s, duration embedding)
    vae_model.pt                           Oobleck VAE, hop 2048, 4 base channels (state dict)
    mulan/{config.json, pytorch_model.bin, muq/config.json, text/{config.json, tokenizer.json}}
    vocal.npy                              negative style, [1, 512] unit vector
    vocab.json                             phone vocabulary: punctuation + English IPA phones (ours)
    whisper/                               Whisper (lyrics check), hub layout, d_model 32 (studio.testwhisper)
torch and tokenizers are imported only when the files must be written (transformers never).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

LABEL = "TEST MODEL: tiny random weights, noise not music"
VERSION = 5  # bump when the layout or sizes change, so old folders are rebuilt
# `n_head` 2 (head width 32): upstream never reads `heads`, so a config without `n_head` gets 32 heads, here
# of width 2, and a 6144-frame step took 10 s on one core (32 attention maps of 6144^2) where 2 heads take 1 s.
DIT = {"dim": 64, "depth": 2, "heads": 32, "n_head": 2, "ff_mult": 2, "text_dim": 512, "conv_layers": 1, "mel_dim": 64,
       "text_num_embeds": 363}
MULAN = {
    "mulan": {"sr": 24000, "clip_secs": 10, "dim_latent": 512, "decoupled_contrastive_learning": True,
              "hierarchical_contrastive_loss": False, "sigmoid_contrastive_loss": False, "rank_contrast": True},
    "audio_model": {"name": "OpenMuQ/MuQ-large-msd-iter", "model_dim": 32, "use_layer_idx": -1},
    "text_model": {"name": "xlm-roberta-base", "model_dim": 32},
    "audio_transformer": {"dim": 16, "tf_depth": 1, "heads": 2, "dim_head": 8, "attn_dropout": 0.0,
                          "ff_dropout": 0.0, "ff_mult": 4},
    "text_transformer": {"dim": 16, "tf_depth": 1, "max_seq_len": 1024, "dim_head": 8, "heads": 2,
                         "attn_dropout": 0.0, "ff_dropout": 0.0, "ff_mult": 4},
}
MUQ = {
    "label_rate": 25, "num_codebooks": 1, "codebook_dim": 16, "codebook_size": 64,
    "features": ["melspec_2048"], "hop_length": 240, "n_mels": 128, "conv_dim": 4, "encoder_dim": 32,
    "encoder_depth": 2, "mask_hop": 0.4, "mask_prob": 0.6, "is_flash": False,
    "stat": {"melspec_2048_cnt": 1, "melspec_2048_mean": 6.77, "melspec_2048_std": 18.4},
    "w2v2_config": {"num_attention_heads": 4, "intermediate_size": 48, "hidden_act": "swish",
                    "position_embeddings_type": "rotary", "rotary_embedding_base": 10000,
                    "conv_depthwise_kernel_size": 5, "layer_norm_eps": 1e-5,
                    "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4},
}


def default_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "diffrhythm-studio" / f"test-model-v{VERSION}"


def ensure_test_models(root: str | Path | None = None) -> Any:
    """The test model's `engine.config.Models`, writing the files first if they are not there yet."""
    from engine.config import Models

    root = Path(root) if root is not None else default_root()
    if not (root / "COMPLETE").is_file():
        # In a child process: writing needs torch, and the studio process must stay small (<500 MB).
        logger.info("[studio] writing the test model to %s", root)
        subprocess.run([sys.executable, "-m", "studio.testmodel", str(root)], check=True)
        if not (root / "COMPLETE").is_file():
            raise RuntimeError(f"the test model was not written to {root}")
    return Models(vae=str(root / "vae_model.pt"), base=str(root / "dit-base"), full=str(root / "dit-full"),
                  style=str(root / "mulan"), negative_style=str(root / "vocal.npy"),
                  vocab=str(root / "vocab.json"), lyrics=str(root / "whisper"), test=True)


def write_all(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    _write_dits(root)
    _write_vae(root / "vae_model.pt")
    _write_mulan(root / "mulan")
    _write_negative_style(root / "vocal.npy")
    write_vocab(root / "vocab.json")
    from studio.testwhisper import write_tiny_whisper

    write_tiny_whisper(root / "whisper")
    (root / "README.txt").write_text(f"{LABEL}.\nWritten by studio.testmodel (layout v{VERSION}); "
                                     "safe to delete.\n", encoding="utf-8")
    (root / "COMPLETE").write_text("ok\n")


# The test model's own phone vocabulary, so lyrics shape the noise on a machine that fetched nothing.
# Ids 0 and 1 must be "," and "." (engine.lyrics.vocab.COMMA_ID / PERIOD_ID); then the English phones
# the g2p produces (espeak-ng IPA after its merges); the rest are unused placeholders up to the DiT's
# 363 text embeddings. Chinese phones are not listed: with the test model they are dropped, which the
# lyric report says line by line.
TEST_PHONES = (
    ",", ".", "?", "!", "_",
    "iː", "ɪ", "ɜː", "ɚ", "oːɹ", "ɔː", "ɔːɹ", "ɑː", "uː", "ʊ", "ɑːɹ", "ʌ", "ɛ", "æ", "eɪ", "aɪ", "ɔɪ", "aʊ",
    "oʊ", "ɪɹ", "ɛɹ", "ʊɹ", "p", "b", "t", "d", "k", "ɡ", "f", "v", "θ", "ð", "s", "z", "ʃ", "ʒ", "h", "tʃ",
    "dʒ", "m", "n", "ŋ", "j", "w", "ɹ", "l", "tɹ", "dɹ", "ts", "dz", "i", "ɔ", "ə", "ɾ", "iə", "r", "u", "oː",
    "ɛː", "ɪː", "aɪə", "aɪɚ", "ɑ̃", "ç", "ɔ̃", "ʔ", "x", "ɐ", "ɬ", "ʊə", "eə", "a", "o", "e",
)


def phone_table() -> dict[str, int]:
    table = {p: i for i, p in enumerate(TEST_PHONES)}
    table.update({f"<unused-{i}>": i for i in range(len(TEST_PHONES), DIT["text_num_embeds"])})
    return table


@functools.lru_cache(maxsize=1)
def lyric_tokenizer() -> Any:
    """A g2p over the test vocabulary, before the files are written (the page's lyric report)."""
    from engine.lyrics import LyricTokenizer
    from engine.lyrics.vocab import Vocab

    return LyricTokenizer(Vocab(phone_table(), "vocab.json"))


def write_vocab(path: Path) -> None:
    path.write_text(json.dumps({"vocab": phone_table()}, ensure_ascii=False, indent=0), encoding="utf-8")


def _write_dits(root: Path) -> None:
    import torch

    from device_worker.model.dit import DiT
    from device_worker.model.load import config_from_upstream

    for name, frames in (("dit-base", 2048), ("dit-full", 6144)):
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        torch.manual_seed(frames)
        model = DiT(config_from_upstream({"model": DIT, "max_frames": frames}, None))
        state = {"transformer." + k: v.detach().to(torch.float16) for k, v in model.state_dict().items()}
        _save(torch, {"model_state_dict": state}, folder / "cfm_model.pt")
        (folder / "config.json").write_text(json.dumps({"model_type": "diffrhythm", "model": DIT,
                                                        "max_frames": frames}, indent=1))


def _write_vae(path: Path) -> None:
    import torch

    from device_worker.model.vae import OobleckVAE
    from device_worker.model.vae_checkpoint import OobleckConfig

    torch.manual_seed(7)
    model = OobleckVAE(OobleckConfig(channels=4))
    _save(torch, {k: v.detach().clone() for k, v in model.state_dict().items()}, path)


def _write_mulan(folder: Path) -> None:
    import torch

    from device_worker.style.load import build_mulan
    from device_worker.style.mulan import MuLanConfig
    from device_worker.style.muq import MuQConfig

    text_dir, muq_dir = folder / "text", folder / "muq"
    for d in (folder, muq_dir):
        d.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(MULAN))
    (muq_dir / "config.json").write_text(json.dumps(MUQ))
    write_tiny_text_model(text_dir)
    torch.manual_seed(11)
    model = build_mulan(MuLanConfig.from_json(MULAN), MuQConfig.from_json(MUQ), text_dir)
    state = {"mulan." + k: v.detach().clone() for k, v in model.state_dict().items()}
    for k, v in list(state.items()):  # plausible batch-norm statistics, so eval mode is well defined
        if k.endswith("running_var"):
            state[k] = torch.rand_like(v) + 0.5
    _save(torch, state, folder / "pytorch_model.bin")


def write_tiny_text_model(text_dir: Path, max_positions: int = 1026) -> None:
    """A 31-piece Unigram tokenizer and a 1-layer XLM-R config in the hub's layout (tests reuse it)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    vocab += [(c, -1.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)])
    text_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(text_dir / "tokenizer.json"))
    # what transformers' XLMRobertaConfig(...).save_pretrained writes, its defaults included
    config = {"architectures": ["XLMRobertaModel"], "model_type": "xlm-roberta", "vocab_size": len(vocab),
              "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 64,
              "max_position_embeddings": max_positions, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
              "attention_probs_dropout_prob": 0.1, "type_vocab_size": 2, "initializer_range": 0.02,
              "layer_norm_eps": 1e-12, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
              "tie_word_embeddings": True}
    (text_dir / "config.json").write_text(json.dumps(config, indent=2))


def _write_negative_style(path: Path) -> None:
    import numpy as np

    v = np.random.default_rng(3).standard_normal((1, 512)).astype(np.float32)
    np.save(path, v / np.linalg.norm(v))


def _save(torch: Any, obj: Any, path: Path) -> None:
    tmp = path.with_suffix(path.suffix + ".part")
    torch.save(obj, tmp)
    tmp.replace(path)  # a crash never leaves a half-written file under the real name


def write_once(root: Path) -> None:
    """`write_all` into a fresh sibling folder, then renamed into place: two studios (or test runs) starting
    at once on a fresh machine each write their own copy, the first rename wins, and nobody ever reads a
    folder another process is still writing."""
    import shutil
    import tempfile

    if (root / "COMPLETE").is_file():
        return
    root.parent.mkdir(parents=True, exist_ok=True)
    part = Path(tempfile.mkdtemp(prefix=f".{root.name}-", dir=root.parent))
    try:
        write_all(part)
        for _ in range(3):
            try:
                part.rename(root)
                return
            except OSError:
                if (root / "COMPLETE").is_file():
                    return  # another writer's copy got there first
                shutil.rmtree(root, ignore_errors=True)  # an old, incomplete folder is in the way
        raise RuntimeError(f"could not put the test model in place at {root}")
    finally:
        shutil.rmtree(part, ignore_errors=True)


if __name__ == "__main__":
    write_once(Path(sys.argv[1]) if len(sys.argv) > 1 else default_root())
