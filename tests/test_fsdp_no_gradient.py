"""FSDP2 / ZeRO-3 on models with parameters that take no gradient in a step (issue 26).

LLaVA's vision tower runs its last layer, whose output ``vision_feature_layer=-2`` leaves out of the loss: its
pre-backward never comes, yet FSDP2's backward prefetch all-gathers it (the group that ran forward just before the
language model). torch 2.13 ``FSDPParamGroup.finalize_backward`` then waits on that "mistargeted unshard" with
``torch.accelerator.current_stream()``, which raised on the CPU build (memgraph/private_api.py
``distributed_on_meta``). On a GPU the wait passes and the gathered buffer is dropped; those parameters keep no
gradient and AdamW (which skips a parameter whose ``grad`` is None) makes no state for them.

Each case checks rank 0's gradient bytes against the parameters that take a gradient, sharded as FSDP2 shards
them: dim 0 split into ``ceil(d0 / 2)`` rows per rank, rank 0 holding the first chunk
(torch/distributed/fsdp/_fully_shard/_fsdp_param.py, ``_init_sharded_param``: ``torch.chunk`` then padding).
"""

import math

import pytest

from memgraph.api import analyze
from memgraph.model_spec.build import build_model
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve

LLAVA = "tests/configs/tiny-llava.json"
MIXTRAL = "tests/configs/tiny-mixtral.json"
UNUSED = ("model.vision_tower.encoder.layers.2.", "model.vision_tower.post_layernorm.")  # 3 layers, feature layer -2


def _rank0_shard_bytes(names_and_shapes) -> int:
    """Rank 0's FSDP2 shard of each parameter over 2 ranks: ceil(d0 / 2) rows x the other dims x 4 B (fp32)."""
    return sum(math.ceil(shape[0] / 2) * math.prod(shape[1:]) * 4 for _, shape in names_and_shapes)


def _trainable(path: str, stage) -> list[tuple[str, list[int]]]:
    model = build_model(resolve(path), TrainingOptions(target="cpu", stage=stage), "meta")
    return [(n, list(p.shape)) for n, p in model.named_parameters() if p.requires_grad]


def _rank0_static(path: str, **options) -> dict:
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, **options)
    result = analyze(path, opts)
    return next(g for g in result.ranks if 0 in g["ranks"])["static"]


# zero3 in --full: memgraph runs ZeRO-3 as FSDP2 (test_distributed_zero.py test_zero3_is_fsdp, fast), and zero3 on
# LLaVA stays fast in test_llava_projector_only_stage_1_under_zero3
@pytest.mark.parametrize("strategy", ["fsdp", pytest.param("zero3", marks=pytest.mark.slow), "zero2"])
def test_llava_unused_vision_layer_keeps_no_gradient(strategy):
    trainable = _trainable(LLAVA, None)
    unused = [(n, s) for n, s in trainable if n.startswith(UNUSED)]
    # the last layer's 16 tensors (q, k, v, o, fc1, fc2 weights and biases, two layer norms) and post_layernorm's 2
    assert len(unused) == 18
    used = [(n, s) for n, s in trainable if not n.startswith(UNUSED)]
    static = _rank0_static(LLAVA, strategy=strategy, stage="full")
    assert static["gradients"] == _rank0_shard_bytes(used)
    # AdamW: exp_avg and exp_avg_sq per shard, and a 0-dim float32 `step` per parameter (4 B each, measured as 248 B
    # for the 62 parameters that take a gradient); none for the 18 that take none
    assert static["optimizer_state"] == 2 * _rank0_shard_bytes(used) + 4 * len(used)


def test_llava_frozen_vision_tower_stage_2_under_fsdp():
    trainable = _trainable(LLAVA, "2")
    assert not any(n.startswith("model.vision_tower.") for n, _ in trainable)
    static = _rank0_static(LLAVA, strategy="fsdp", stage="2")
    assert static["gradients"] == _rank0_shard_bytes(trainable)


def test_llava_projector_only_stage_1_under_zero3():
    trainable = _trainable(LLAVA, "1")
    assert {n.split(".")[1] for n, _ in trainable} == {"multi_modal_projector"}
    static = _rank0_static(LLAVA, strategy="zero3", stage="1")
    assert static["gradients"] == _rank0_shard_bytes(trainable)


def test_moe_experts_take_a_whole_gradient_under_fsdp():
    """transformers 5.23 stores a MoE block's experts as one [E, ...] parameter per projection and runs them
    through ``_grouped_mm``, whose backward writes the whole weight gradient (zero rows for an expert that got
    no token): no parameter of Mixtral goes without a gradient, whatever the routing."""
    trainable = _trainable(MIXTRAL, None)
    static = _rank0_static(MIXTRAL, strategy="fsdp")
    assert static["gradients"] == _rank0_shard_bytes(trainable)
