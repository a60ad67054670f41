"""device_worker.style: key layout at the released sizes (meta device) and tiny end-to-end runs."""

from __future__ import annotations

import os
import re

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
torch = pytest.importorskip("torch")

from shared_paths import SHARED  # noqa: E402
from tiny_mulan import write_tiny_mulan  # noqa: E402

from device_worker.style import load_style_model  # noqa: E402
from device_worker.style.load import IGNORED_KEYS, build_mulan, is_ignored  # noqa: E402
from device_worker.style.mulan import MuLanConfig  # noqa: E402
from device_worker.style.muq import MuQConfig  # noqa: E402

# Released sizes: MuQ-large (1024-d, 12-layer conformer, 16 heads, 4096 FFN, 512 conv channels),
# MuLan towers 768-d x 8 layers, XLM-R base. Assumed from muq's defaults and model cards (the real
# config files are not available here).
MUQ_LARGE = {"encoder_dim": 1024, "encoder_depth": 12, "conv_dim": 512, "n_mels": 128, "label_rate": 25,
             "codebook_size": 4096, "codebook_dim": 16,
             "w2v2_config": {"num_attention_heads": 16, "intermediate_size": 4096, "hidden_act": "swish",
                             "position_embeddings_type": "rotary", "conv_depthwise_kernel_size": 31,
                             "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16}}
MULAN_LARGE = {"mulan": {"dim_latent": 512}, "audio_model": {"model_dim": 1024, "use_layer_idx": -1},
               "text_model": {"model_dim": 768}, "audio_transformer": {"dim": 768, "tf_depth": 8},
               "text_transformer": {"dim": 768, "tf_depth": 8}}


def bn(p: str, c: int) -> dict:
    return {f"{p}.weight": (c,), f"{p}.bias": (c,), f"{p}.running_mean": (c,), f"{p}.running_var": (c,),
            f"{p}.num_batches_tracked": ()}


def lin(p: str, o: int, i: int, bias: bool = True) -> dict:
    return {f"{p}.weight": (o, i), **({f"{p}.bias": (o,)} if bias else {})}


def ln(p: str, c: int) -> dict:
    return {f"{p}.weight": (c,), f"{p}.bias": (c,)}


def muq_keys(p: str, d: int = 1024, depth: int = 12, conv: int = 512, ff: int = 4096, k: int = 31,
             heads: int = 16) -> dict:
    """Read off muq's MuQModel / Conv2dSubsampling / Res2dModule and transformers' conformer (whose
    rotary `embed_positions.inv_freq` is a persistent buffer: head size / 2 values)."""
    out: dict = {}
    for b, cin in ((0, 1), (1, conv)):
        q = f"{p}conv.conv.{b}"
        for name, i in (("conv1", cin), ("conv2", conv), ("conv3", cin)):
            out |= {f"{q}.{name}.weight": (conv, i, 3, 3), f"{q}.{name}.bias": (conv,)}
        for name in ("bn1", "bn2", "bn3"):
            out |= bn(f"{q}.{name}", conv)
    out |= lin(f"{p}conv.linear", d, conv * 128 // 4)
    c = f"{p}conformer"
    out |= {f"{c}.pos_conv_embed.conv.bias": (d,), f"{c}.pos_conv_embed.conv.weight_g": (1, 1, 128),
            f"{c}.pos_conv_embed.conv.weight_v": (d, d // 16, 128)} | ln(f"{c}.layer_norm", d)
    out |= {f"{c}.embed_positions.inv_freq": (d // heads // 2,)}
    for i in range(depth):
        L = f"{c}.layers.{i}"
        for n in ("ffn1_layer_norm", "self_attn_layer_norm", "ffn2_layer_norm", "final_layer_norm",
                  "conv_module.layer_norm"):
            out |= ln(f"{L}.{n}", d)
        for f in ("ffn1", "ffn2"):
            out |= lin(f"{L}.{f}.intermediate_dense", ff, d) | lin(f"{L}.{f}.output_dense", d, ff)
        for n in ("q", "k", "v", "out"):
            out |= lin(f"{L}.self_attn.linear_{n}", d, d)
        out |= {f"{L}.conv_module.pointwise_conv1.weight": (2 * d, d, 1),
                f"{L}.conv_module.depthwise_conv.weight": (d, 1, k),
                f"{L}.conv_module.pointwise_conv2.weight": (d, d, 1)} | bn(f"{L}.conv_module.batch_norm", d)
    out |= lin(f"{p}linear", 4096, d) | {f"{p}cls_token": (d,)}
    out |= {f"{p}quantizer_melspec_2048.random_projection": (128 * 4, 16),
            f"{p}quantizer_melspec_2048.codebook": (4096, 16)}
    return out


def tower_keys(p: str, dim: int = 768, depth: int = 8, heads: int = 8, dh: int = 64) -> dict:
    """muq_mulan/modules/transformer.py: Attention (norm, to_q, to_kv, q/k_scale, to_out.0) + FeedForward."""
    out: dict = {}
    hidden = int(dim * 4 * 2 / 3)
    for i in range(depth):
        a, f = f"{p}.layers.{i}.0", f"{p}.layers.{i}.1"
        out |= {f"{a}.norm.learned_gamma": (dim,), f"{a}.to_q.weight": (heads * dh, dim),
                f"{a}.to_kv.weight": (2 * heads * dh, dim), f"{a}.q_scale": (dh,), f"{a}.k_scale": (dh,),
                f"{a}.to_out.0.weight": (dim, heads * dh), f"{f}.0.learned_gamma": (dim,),
                f"{f}.1.weight": (2 * hidden, dim), f"{f}.4.weight": (dim, hidden)}
    return out


def released_keys(text_model) -> dict:
    out = muq_keys("mulan.audio.model.model.")
    out |= {"mulan.audio.aggregator.weight": (1, 25, 1), "mulan.audio.aggregator.bias": (1,)}
    out |= tower_keys("mulan.audio.transformer") | lin("mulan.audio.proj", 768, 1024)
    # The text backbone is transformers' XLMRobertaModel itself (what muq instantiates), plus the
    # position_ids buffer that transformers 4.x saved.
    out |= {f"mulan.text.model.{k}": tuple(v.shape) for k, v in text_model.state_dict().items()}
    out |= {"mulan.text.model.embeddings.position_ids": (1, 514)}
    out |= tower_keys("mulan.text.transformer")
    out |= lin("mulan.text_to_latents", 512, 768) | lin("mulan.audio_to_latents", 512, 768)
    out |= {"mulan.contrast.temperatures": (1, 1, 1)}
    return out


def test_released_key_layout_matches_on_meta(tmp_path):
    from transformers import XLMRobertaConfig

    XLMRobertaConfig(vocab_size=250002, max_position_embeddings=514, type_vocab_size=1).save_pretrained(tmp_path)
    with torch.device("meta"):
        model = build_mulan(MuLanConfig.from_json(MULAN_LARGE), MuQConfig.from_json(MUQ_LARGE), tmp_path)
    ours = {"mulan." + k: tuple(v.shape) for k, v in model.state_dict().items()}
    expected = released_keys(model.text.model)
    kept = {k: v for k, v in expected.items() if not is_ignored(k)}
    assert sorted(set(kept) ^ set(ours)) == []
    assert [k for k in kept if kept[k] != ours[k]] == []
    ignored = set(expected) - set(kept)
    # every ignore rule is used by the release layout, and the ignored keys are only the training heads
    assert all(any(re.search(p, k) for k in ignored) for p in IGNORED_KEYS if "rvq" not in p and "token_type" not in p)
    assert len(ignored) == 12  # contrast 1, aggregator 2, quantiser 2, linear 2, cls 1, pos_conv 3, position_ids 1
    n_params = sum(torch.Size(s).numel() for s in expected.values())
    assert 6.5e8 < n_params < 7.5e8  # "~700M" (muq README / environment.md)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    paths = write_tiny_mulan(tmp_path_factory.mktemp("mulan"))
    return paths, load_style_model(paths["mulan"], muq_config=paths["muq_config"], text_dir=paths["text"])


def test_text_and_audio_embeddings_are_unit_512(tiny):
    _, model = tiny
    t = model.embed_text(["pop piano", "sad rock"])
    assert t.shape == (2, 512) and torch.allclose(t.norm(dim=-1), torch.ones(2), atol=1e-5)
    assert not torch.allclose(t[0], t[1])
    assert torch.equal(model.embed_text(["pop piano"])[0], t[0])  # one text per forward: batch-independent
    g = torch.Generator().manual_seed(0)
    a = model.embed_audio(torch.randn(1, 240_000, generator=g) * 0.1)
    assert a.shape == (1, 512) and abs(float(a.norm()) - 1) < 1e-5


def test_audio_clips_follow_muq(tiny):
    _, model = tiny
    w = torch.arange(14 * 24_000, dtype=torch.float32)
    clips = model.clips(w)
    assert [len(c) for c in clips] == [240_000, 240_000]
    assert torch.equal(clips[1][: 4 * 24_000], w[240_000:]) and torch.equal(clips[1][4 * 24_000:], w[: 6 * 24_000])
    short = model.clips(w[: 4 * 24_000])
    assert [len(c) for c in short] == [8 * 24_000]  # muq tops a short clip up once with its own start
    # a 20 s input is the mean of its two 10 s clip embeddings
    x = torch.randn(1, 480_000, generator=torch.Generator().manual_seed(1)) * 0.1
    both = model.embed_audio(x)
    parts = torch.cat([model.embed_audio(x[:, :240_000]), model.embed_audio(x[:, 240_000:])])
    assert torch.allclose(both[0], parts.mean(0), atol=1e-6)


def test_loader_is_strict(tiny, tmp_path):
    paths, _ = tiny
    sd = torch.load(paths["mulan"] / "pytorch_model.bin", weights_only=True)
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(paths["mulan"], bad)
    sd.pop("mulan.text_to_latents.weight")
    sd["mulan.audio.surprise"] = torch.zeros(1)
    torch.save(sd, bad / "pytorch_model.bin")
    with pytest.raises(ValueError, match=r"1 missing .*text_to_latents.*1 unexpected .*surprise"):
        load_style_model(bad, muq_config=paths["muq_config"], text_dir=paths["text"])


def test_rotary_table_is_checked_not_ignored(tiny, tmp_path):
    """transformers saves the conformer's rotary inv_freq; the loader takes it only when it is the table
    the MuQ config implies (1/base^(2i/head_size)), derives it when absent, and stays strict otherwise."""
    import shutil

    paths, model = tiny
    key = "mulan.audio.model.model.conformer.embed_positions.inv_freq"
    sd = torch.load(paths["mulan"] / "pytorch_model.bin", weights_only=True)
    hs = 32 // 4  # tiny conformer: 32-d, 4 heads
    assert torch.equal(sd[key], 1.0 / (10000 ** (torch.arange(0, hs, 2).float() / hs)))
    bad = tmp_path / "bad"
    shutil.copytree(paths["mulan"], bad)
    x = torch.randn(1, 24_000, generator=torch.Generator().manual_seed(2)) * 0.1

    def load(state):
        torch.save(state, bad / "pytorch_model.bin")
        return load_style_model(bad, muq_config=paths["muq_config"], text_dir=paths["text"])

    without = {k: v for k, v in sd.items() if k != key}
    assert torch.equal(load(without).embed_audio(x), model.embed_audio(x))
    wrong = dict(sd)
    wrong[key] = sd[key].clone()
    wrong[key][1] *= 1.001
    with pytest.raises(ValueError, match=r"inv_freq must hold the conformer's rotary table 1/10000\^\(2i/8\).*value 1"):
        load(wrong)
    wrong[key] = torch.ones(hs)
    with pytest.raises(ValueError, match="rotary table.*shape"):
        load(wrong)
    extra = dict(sd)
    extra["mulan.audio.model.model.conformer.embed_positions.inv_freq_2"] = sd[key]
    with pytest.raises(ValueError, match=r"0 missing .*1 unexpected .*inv_freq_2"):
        load(extra)


def test_unsupported_position_embedding_is_refused(tiny, tmp_path):
    import json

    paths, _ = tiny
    cfg = json.loads(paths["muq_config"].read_text())
    cfg["w2v2_config"]["position_embeddings_type"] = "relative"
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="only 'rotary'"):
        load_style_model(paths["mulan"], muq_config=tmp_path / "c.json", text_dir=paths["text"])


def _hf_layout(cache, repo: str, src_dir, commit: str) -> None:
    """Copy `src_dir` into the HF cache layout: blobs/<sha256> and snapshots/<commit>/<name> symlinks."""
    import hashlib

    root = cache / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    for f in src_dir.iterdir():
        data = f.read_bytes()
        blob = root / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = root / "snapshots" / commit / f.name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))


def test_path_alone_finds_the_companion_repos(tiny, tmp_path):
    import shutil

    paths, model = tiny
    expected = model.embed_text(["folk"])
    # hand-laid <dir>/<org>/<repo> tree (xlm-roberta-base under its current hub id)
    d = tmp_path / "models"
    shutil.copytree(paths["mulan"], d / "OpenMuQ" / "MuQ-MuLan-large")
    (d / "OpenMuQ" / "MuQ-large-msd-iter").mkdir(parents=True)
    shutil.copy(paths["muq_config"], d / "OpenMuQ" / "MuQ-large-msd-iter" / "config.json")
    shutil.copytree(paths["text"], d / "FacebookAI" / "xlm-roberta-base")
    assert torch.equal(load_style_model(d / "OpenMuQ" / "MuQ-MuLan-large").embed_text(["folk"]), expected)
    # Hugging Face cache, text tower under muq's legacy id
    hub = tmp_path / "hub"
    _hf_layout(hub, "OpenMuQ/MuQ-MuLan-large", paths["mulan"], "a" * 40)
    _hf_layout(hub, "OpenMuQ/MuQ-large-msd-iter", paths["muq_config"].parent, "b" * 40)
    _hf_layout(hub, "xlm-roberta-base", paths["text"], "c" * 40)
    snap = hub / "models--OpenMuQ--MuQ-MuLan-large" / "snapshots" / ("a" * 40)
    assert torch.equal(load_style_model(snap).embed_text(["folk"]), expected)
    shutil.rmtree(hub / "models--xlm-roberta-base")
    with pytest.raises(FileNotFoundError, match="xlm-roberta-base config.json \\+ tokenizer.json .*studio models fetch"):
        load_style_model(snap)



TEXTS = ["dreamy synth pop", "  Ünïcödé  你好 🎵 ", "rock and roll " * 400]


@pytest.mark.parametrize("text", TEXTS)
def test_tokenizer_gives_transformers_ids_for_xlm_roberta_base(text) -> None:
    """On xlm-roberta-base's own tokenizer.json (../shared's copy), the ids of transformers' fast tokenizer,
    truncated the same way, <s> and </s> kept."""
    from transformers import AutoTokenizer

    from device_worker.style import MAX_TEXT_TOKENS
    from device_worker.style.roberta import Tokenizer

    folder = SHARED / "reference" / "muq" / "models" / "FacebookAI" / "xlm-roberta-base"
    if not (folder / "tokenizer.json").is_file():
        pytest.skip(f"{folder} is absent (../shared holds xlm-roberta-base's tokenizer)")
    ids, mask = Tokenizer(folder / "tokenizer.json", max_length=MAX_TEXT_TOKENS)(text)
    want = AutoTokenizer.from_pretrained(str(folder))([text], truncation=True, max_length=MAX_TEXT_TOKENS)
    assert ids[0].tolist() == want["input_ids"][0] and mask[0].tolist() == want["attention_mask"][0]


def test_a_style_text_past_512_tokens_is_cut_there_and_still_embeds(test_models) -> None:
    from device_worker.style import MAX_TEXT_TOKENS

    model = load_style_model(test_models.style)
    ids, mask = model.tokenizer(TEXTS[-1])
    assert ids.shape == mask.shape == (1, MAX_TEXT_TOKENS) and bool(mask.all())
    assert (ids[0, 0].item(), ids[0, -1].item()) == (0, 2)  # <s> ... </s>
    assert model.embed_text([TEXTS[-1]]).shape == (1, 512)
