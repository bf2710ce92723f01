"""--quantize nf4: bitsandbytes 0.50.1 NF4 without double quantisation (LitGPT's bnb.nf4), by hand.

One [64, 64] weight (tiny-llama's q_proj): n = 4096 codes, ceil(4096 / 64) = 64 blocks.
- packed weight: uint8 [(4096 + 1) // 2, 1] = 2048 B;
- absmax: float32 [64] = 256 B (with double quantisation: uint8 [64] = 64 B, plus a float32 offset 4 B, state2's
  absmax float32 [ceil(64 / 256)] = 4 B and dynamic map float32 [256] = 1024 B);
- code: the NF4 table, float32 [16] = 64 B.
"""

import pytest
import torch

from memgraph.api import analyze
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.quantize import Linear4bitStandIn, storage_bytes
from tests.conftest import CONFIGS


def _held(layer: torch.nn.Module) -> dict[str, int]:
    tensors = dict(layer.named_parameters()) | dict(layer.named_buffers())
    return {name: t.numel() * t.element_size() for name, t in tensors.items()}


def test_nf4_storage_of_one_weight():
    layer = Linear4bitStandIn(torch.nn.Linear(64, 64, bias=False, device="meta"), torch.bfloat16, double_quant=False)
    assert _held(layer) == {"weight": 2048, "absmax": 64 * 4, "code": 16 * 4}
    assert _held(layer) == storage_bytes(64 * 64, double_quant=False)
    assert layer.absmax.dtype == torch.float32


def test_double_quant_storage_of_the_same_weight_for_contrast():
    layer = Linear4bitStandIn(torch.nn.Linear(64, 64, bias=False, device="meta"), torch.bfloat16)
    assert _held(layer) == {"weight": 2048, "absmax": 64, "offset": 4, "state2_absmax": 4, "state2_code": 1024,
                            "code": 64}


def test_nf4_option_builds_stand_ins_without_double_quant():
    """The 14 quantised linears of tiny-llama (2 layers x 7), each holding a float32 absmax, and the note says so."""
    r = analyze(str(CONFIGS / "tiny-llama.json"), seq_len=32, lora_rank=4, quantize="nf4", precision="bf16")
    assert any(n.startswith("--quantize nf4: 14 linear weights") and "without double quantisation" in n
               for n in r.notes), r.notes


def test_nf4_needs_lora_and_the_cuda_target():
    with pytest.raises(MemgraphError, match="needs --lora-rank"):
        TrainingOptions(quantize="nf4")
    with pytest.raises(MemgraphError, match="use --target cuda"):
        TrainingOptions(quantize="nf4", lora_rank=4, target="cpu")
