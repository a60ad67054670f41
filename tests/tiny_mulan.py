"""Tiny random MuQ-MuLan in the released file layout (for tests; nothing here touches the network).

Layout written under `root`, the same as the hub repos:
  MuQ-MuLan-large/config.json + pytorch_model.bin   (whole MuQMuLan state dict, `mulan.` keys,
                                                     including the keys inference ignores)
  MuQ-large-msd-iter/config.json                    (MuQConfig with w2v2_config + mel stat)
  xlm-roberta-base/config.json + tokenizer.json
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

MULAN_CONFIG = {
    "mulan": {"sr": 24000, "clip_secs": 10, "dim_latent": 512, "decoupled_contrastive_learning": True,
              "hierarchical_contrastive_loss": False, "sigmoid_contrastive_loss": False, "rank_contrast": True},
    "audio_model": {"name": "OpenMuQ/MuQ-large-msd-iter", "model_dim": 32, "use_layer_idx": -1},
    "text_model": {"name": "xlm-roberta-base", "model_dim": 32},
    "audio_transformer": {"dim": 16, "tf_depth": 1, "heads": 2, "dim_head": 8, "attn_dropout": 0.0,
                          "ff_dropout": 0.0, "ff_mult": 4},
    "text_transformer": {"dim": 16, "tf_depth": 1, "max_seq_len": 1024, "dim_head": 8, "heads": 2,
                         "attn_dropout": 0.0, "ff_dropout": 0.0, "ff_mult": 4},
}

MUQ_CONFIG = {
    "label_rate": 25, "num_codebooks": 1, "codebook_dim": 16, "codebook_size": 64,
    "features": ["melspec_2048"], "hop_length": 240, "n_mels": 128, "conv_dim": 4, "encoder_dim": 32,
    "encoder_depth": 2, "mask_hop": 0.4, "mask_prob": 0.6, "is_flash": False,
    "stat": {"melspec_2048_cnt": 1, "melspec_2048_mean": 6.77, "melspec_2048_std": 18.4},
    "w2v2_config": {"num_attention_heads": 4, "intermediate_size": 48, "hidden_act": "swish",
                    "position_embeddings_type": "rotary", "rotary_embedding_base": 10000,
                    "conv_depthwise_kernel_size": 5, "layer_norm_eps": 1e-5,
                    "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 4},
}


def write_tokenizer(text_dir: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import XLMRobertaConfig

    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    vocab += [(c, -1.0) for c in "abcdefghijklmnopqrstuvwxyz"]
    tok = Tokenizer(models.Unigram(vocab, unk_id=3))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    text_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(text_dir / "tokenizer.json"))
    XLMRobertaConfig(
        vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=40,
    ).save_pretrained(text_dir)


def write_tiny_mulan(root: Path, seed: int = 0) -> dict[str, Path]:
    from device_worker.style.load import build_mulan
    from device_worker.style.mulan import MuLanConfig
    from device_worker.style.muq import MuQConfig

    mulan_dir, muq_dir, text_dir = root / "MuQ-MuLan-large", root / "MuQ-large-msd-iter", root / "xlm-roberta-base"
    for d in (mulan_dir, muq_dir):
        d.mkdir(parents=True, exist_ok=True)
    (mulan_dir / "config.json").write_text(json.dumps(MULAN_CONFIG))
    (muq_dir / "config.json").write_text(json.dumps(MUQ_CONFIG))
    write_tokenizer(text_dir)
    torch.manual_seed(seed)
    model = build_mulan(MuLanConfig.from_json(MULAN_CONFIG), MuQConfig.from_json(MUQ_CONFIG), text_dir)
    sd = {"mulan." + k: v.clone() for k, v in model.state_dict().items()}
    for k, v in list(sd.items()):  # random batch-norm statistics, so eval mode is exercised
        if k.endswith("running_var"):
            sd[k] = torch.rand_like(v) + 0.5
        elif k.endswith("running_mean"):
            sd[k] = torch.randn_like(v) * 0.1
    # Keys the release carries that inference does not read (see device_worker/style/load.py).
    m = "mulan.audio.model.model."
    sd.update({
        "mulan.contrast.temperatures": torch.zeros(1, 1, 1),
        "mulan.audio.aggregator.weight": torch.zeros(1, 25, 1),
        "mulan.audio.aggregator.bias": torch.zeros(1),
        m + "quantizer_melspec_2048.random_projection": torch.zeros(512, 16),
        m + "quantizer_melspec_2048.codebook": torch.zeros(64, 16),
        m + "linear.weight": torch.zeros(64, 32),
        m + "linear.bias": torch.zeros(64),
        m + "cls_token": torch.zeros(32),
        m + "conformer.pos_conv_embed.conv.bias": torch.zeros(32),
        m + "conformer.pos_conv_embed.conv.weight_g": torch.zeros(1, 1, 8),
        m + "conformer.pos_conv_embed.conv.weight_v": torch.zeros(32, 8, 8),
        "mulan.text.model.embeddings.position_ids": torch.arange(40)[None],
    })
    torch.save(sd, mulan_dir / "pytorch_model.bin")
    return {"mulan": mulan_dir, "muq_config": muq_dir / "config.json", "text": text_dir}
