"""The card code against the REAL ttnn's API, without a card: every `ttnn.X` it uses exists, the config
objects take our keyword arguments, and the ops document the keywords we pass. Runs wherever ttnn is
installed (Python 3.10/3.12); skipped, saying so, in this project's 3.11 CI."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from device_worker.backends.ttnn.runtime import ttnn_installed

PKG = Path(__file__).resolve().parents[2] / "device_worker" / "backends" / "ttnn"
DEVICE_FILES = ("tt_common.py", "tt_dit.py", "tt_trace.py", "tt_vae.py", "device.py", "backend.py")
OWN = {"convert", "plan", "precision", "reference", "reference_vae", "runtime", "tt_common", "tt_dit", "tt_trace",
       "tt_vae", "device", "backend", "warm"}  # `device_worker.backends.ttnn.<module>` are ours, not ttnn's

KWARGS = {  # op -> keywords the card code passes
    "linear": ["bias", "dtype", "compute_kernel_config", "memory_config"],
    "matmul": ["dtype", "compute_kernel_config"],
    "multiply": ["activations", "dtype"],
    "addcmul": ["value"],
    "rms_norm": ["epsilon", "weight", "compute_kernel_config"],
    "layer_norm": ["epsilon", "compute_kernel_config"],
    "pad": ["padding", "value"],
    "concat": ["dim", "memory_config"],
    "experimental.minimal_matmul": ["config", "compute_kernel_config", "dtype", "fuse_swiglu", "memory_config"],
    "experimental.nlp_create_qkv_heads": ["num_heads", "num_kv_heads", "transpose_k_heads"],
    "experimental.rotary_embedding_llama": ["is_decode_mode", "compute_kernel_config"],
    "transformer.scaled_dot_product_attention": ["is_causal", "cu_window_seqlens", "attn_mask", "scale",
                                                 "program_config", "compute_kernel_config"],
    "conv1d": ["input_length", "bias_tensor", "conv_config", "compute_config", "return_output_dim",
               "return_weights_and_bias"],
    "conv_transpose2d": ["input_height", "input_width", "output_padding", "return_output_dim",
                         "return_weights_and_bias"],
    "as_tensor": ["cache_file_name", "memory_config", "layout"],
    "open_mesh_device": ["l1_small_size", "trace_region_size", "dispatch_core_config", "mesh_shape"],
    "execute_trace": ["cq_id", "blocking"],
}


@pytest.fixture(scope="module")
def ttnn():
    if not ttnn_installed():
        pytest.skip("ttnn is not installed here (it ships for Python 3.10/3.12 only); run in the worker's environment")
    import ttnn as real

    if getattr(real, "FAKE", False):
        pytest.skip("ttnn is the test stand-in")
    return real


def _resolve(mod, dotted: str):
    obj = mod
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_ttnn_attribute_the_card_code_uses_exists(ttnn) -> None:
    used = set()
    for name in DEVICE_FILES:
        used |= set(re.findall(r"\bttnn\.([A-Za-z_][\w.]*)", (PKG / name).read_text()))
    used = {u.rstrip(".") for u in used if u.split(".")[0] not in OWN}
    missing = []
    for dotted in sorted(used):
        try:
            _resolve(ttnn, dotted)
        except AttributeError:
            missing.append(dotted)
    assert len(used) > 40 and missing == []


@pytest.mark.parametrize("op", sorted(KWARGS))
def test_ops_document_the_keywords_we_pass(ttnn, op: str) -> None:
    fn = _resolve(ttnn, op)
    text = fn.__doc__ or ""
    try:
        text += str(inspect.signature(fn))
    except (TypeError, ValueError):
        pass
    assert [k for k in KWARGS[op] if k not in text] == []


def test_config_objects_take_our_arguments(ttnn) -> None:
    grid = ttnn.CoreCoord(11, 10)
    ttnn.MinimalMatmulConfig(M_block_size=4, K_block_size=8, N_block_size=4, subblock_h=4, subblock_w=1,
                             compute_with_storage_grid_size=grid)
    ttnn.SDPAProgramConfig(compute_with_storage_grid_size=grid, q_chunk_size=128, k_chunk_size=256,
                           exp_approx_mode=False)
    cfg = ttnn.Conv2dConfig(weights_dtype=ttnn.bfloat16, config_tensors_in_dram=True)
    cfg.act_block_h_override = 64
    ttnn.UnaryWithParam(ttnn.UnaryOpType.SIN), ttnn.UnaryWithParam(ttnn.UnaryOpType.SQUARE)
    ttnn.MeshShape(1, 1)
    ttnn.init_device_compute_kernel_config(ttnn.device.Arch.BLACKHOLE, math_fidelity=ttnn.MathFidelity.HiFi4,
                                           math_approx_mode=False, fp32_dest_acc_en=True, packer_l1_acc=False)
    assert {ttnn.bfloat16, ttnn.bfloat8_b, ttnn.float32, ttnn.int32}


def test_card_open_is_accepted_under_a_mock_p100(ttnn, tmp_path: Path) -> None:
    """With tt-umd's P100 cluster descriptor (TT_METAL_MOCK_CLUSTER_DESC_PATH=.../blackhole_P100.yaml), the
    real open_mesh_device takes our arguments and gets as far as building kernels (which needs the SFPI
    compiler, absent from the wheel); the `generated/` folder lands in the scratch directory."""
    import os

    if not os.environ.get("TT_METAL_MOCK_CLUSTER_DESC_PATH"):
        pytest.skip("set TT_METAL_MOCK_CLUSTER_DESC_PATH to tt-umd's tests/cluster_descriptor_examples/blackhole_P100.yaml")
    from device_worker.backends.ttnn.device import Card, DeviceSettings, count_cards

    cwd = os.getcwd()
    had_generated = Path(cwd, "generated").exists()
    assert count_cards(DeviceSettings(root=tmp_path)) == 1
    card = Card(DeviceSettings(root=tmp_path))
    try:
        card.open()  # succeeds where SFPI is installed (then nothing runs: the cluster is mocked)
        card.close()
    except RuntimeError as exc:
        assert "cannot open Tenstorrent card 0" in str(exc)
    assert os.getcwd() == cwd and (tmp_path / "scratch" / "generated").is_dir()
    assert had_generated or not Path(cwd, "generated").exists()  # nothing written into the caller's cwd
