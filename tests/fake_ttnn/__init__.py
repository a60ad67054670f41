"""A small torch-backed stand-in for the parts of ttnn 0.81.1 the ttnn backend calls. TESTS ONLY.

It is injected as `sys.modules["ttnn"]` by the `fake_ttnn` fixture (tests/tenstorrent/test_ttnn_fake_device.py) and
is never importable as `ttnn` otherwise: it lives under tests/ (not packaged) under its own name.
It checks the rules that make code fail on a card (layouts, tile padding, device placement, dtype pairs,
trace capture) and computes with torch; it does not model math fidelity or bfloat8_b block exponents.
"""

from __future__ import annotations

from types import SimpleNamespace

from . import core, nn_ops, ops  # noqa: F401
from .core import (  # noqa: F401
    BufferType,
    ComputeKernelConfig,
    Conv2dConfig,
    CoreCoord,
    DataType,
    DispatchCoreConfig,
    DispatchCoreType,
    Layout,
    MathFidelity,
    MemoryConfig,
    MeshShape,
    MinimalMatmulConfig,
    SDPAProgramConfig,
    Shape,
    StorageType,
    Tensor,
    UnaryOpType,
    UnaryWithParam,
    begin_trace_capture,
    end_trace_capture,
    execute_trace,
    release_trace,
)
from .ops import (  # noqa: F401
    OPENED,
    add,
    addcmul,
    as_tensor,
    close_mesh_device,
    concat,
    copy,
    copy_host_to_device_tensor,
    deallocate,
    from_torch,
    get_memory_view,
    init_device_compute_kernel_config,
    layer_norm,
    linear,
    matmul,
    mish,
    multiply,
    open_mesh_device,
    pad,
    permute,
    reshape,
    rms_norm,
    silu,
    slice,
    synchronize_device,
    to_layout,
    to_torch,
    typecast,
)

__version__ = "0.81.1+fake"
FAKE = True  # production code never looks at this; tests use it to tell the stand-in apart

bfloat16, float32 = DataType.BFLOAT16, DataType.FLOAT32
bfloat8_b, bfloat4_b = DataType.BFLOAT8_B, DataType.BFLOAT4_B
int32, uint32 = DataType.INT32, DataType.UINT32
TILE_LAYOUT, ROW_MAJOR_LAYOUT = Layout.TILE, Layout.ROW_MAJOR
DRAM_MEMORY_CONFIG = MemoryConfig(BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(BufferType.L1)
conv1d = nn_ops.conv1d
conv_transpose2d = nn_ops.conv_transpose2d

experimental = SimpleNamespace(
    minimal_matmul=ops.minimal_matmul,
    nlp_create_qkv_heads=nn_ops.nlp_create_qkv_heads,
    rotary_embedding_llama=nn_ops.rotary_embedding_llama,
)
transformer = SimpleNamespace(
    scaled_dot_product_attention=nn_ops.scaled_dot_product_attention,
    concatenate_heads=nn_ops.concatenate_heads,
)

