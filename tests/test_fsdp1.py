"""--strategy fsdp1: torch's FSDP1 FullyShardedDataParallel (flat parameters), per rank.

tests/configs/tiny-llama.json (hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocabulary 1000, untied head, 2 layers,
202,048 parameters), batch 2 x 32 tokens, float32 (4 bytes), AdamW, the cpu target (no 512-byte rounding). FSDP1 units
(transformer_auto_wrap_policy on LlamaDecoderLayer): each decoder layer's FlatParameter holds
q 64x64 + k 64x32 + v 64x32 + o 64x64 + gate/up/down 3 x 64x128 + two norms 2 x 64 = 36,992 elements; the root's
holds the embedding 1000x64 + the head 1000x64 + the final norm 64 = 128,064 (36,992 x 2 + 128,064 = 202,048).
torch 2.13 (torch/distributed/fsdp/_flat_param.py FlatParamHandle._get_shard) pads each flat parameter to a multiple
of the world size and gives every rank an equal chunk.

Ground truth (slow): the same step run for real by N gloo processes on the CPU, each rank's CPU allocator against
its own prediction (tests/test_distributed_gloo.py check_ranks_against_gloo: within 2%, never above; measured
2026-11-27, torch 2.13.0, transformers 5.23: tiny-llama FULL_SHARD, SHARD_GRAD_OP, use_orig_params and 4 ranks 0 B
apart on every rank and both iterations; NO_SHARD 12 B in iteration 1 (0-dim scalars the meta trace does not see),
0 B in the steady state; tiny-gpt2 48 B; bf16 MixedPrecision 0 B in iteration 1 and 73,984 B in the steady state,
equal to the rank's unreported_free_bytes (a gloo Work released on its worker thread, outside the profiler: see
memgraph/measure/distributed.py)).
"""

import pytest

from memgraph.api import analyze
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from tests.test_distributed_gloo import check_ranks_against_gloo

F32 = 4
LLAMA = "tests/configs/tiny-llama.json"
LAYER, ROOT = 36_992, 128_064  # elements of a decoder layer's flat parameter and of the root's
STEPS = 3 * 4  # AdamW's float32 0-dim `step` per flat parameter (3), kept on the host


def _analyze(**options):
    return analyze(LLAMA, TrainingOptions(seq_len=32, batch_size=2, target="cpu", strategy="fsdp1", **options))


@pytest.fixture(scope="module")
def full_shard():
    return _analyze(nproc=2)


def test_flat_parameters_are_padded_to_the_world_size():
    r = _analyze(nproc=3)
    # 36,992 = 3 x 12,330 + 2: padded to 36,993, 12,331 per rank; 128,064 = 3 x 42,688
    per_rank = 2 * 12_331 + 42_688  # 67,350 elements
    assert r.static["parameters"] == per_rank * F32 == 269_400
    assert r.static["gradients"] == per_rank * F32  # the sharded gradient of each flat parameter
    assert r.static["optimizer_state"] == 2 * per_rank * F32 + STEPS  # exp_avg and exp_avg_sq of the shards
    assert [g["ranks"] for g in r.ranks] == [[0, 1, 2]]  # padded shards: every rank stores the same shapes


def test_full_shard_over_two_ranks(full_shard):
    r = full_shard
    assert r.static["parameters"] == (2 * LAYER + ROOT) // 2 * F32 == 404_096
    assert r.static["optimizer_state"] == 2 * 404_096 + STEPS
    assert r.steady_state_peak.phase == "backward"
    assert any("FSDP1: FullyShardedDataParallel(FULL_SHARD) with transformer_auto_wrap_policy on LlamaDecoderLayer "
               "(2 units)" in n for n in r.notes)


def test_backward_prefetch_holds_the_next_layer_at_the_head_backward(full_shard):
    # the peak is the head's backward (log_softmax backward) of the root unit; BACKWARD_PRE (torch's default) has
    # already all-gathered layer 1's flat parameter there, NONE gathers it only when layer 1's backward starts
    none = _analyze(nproc=2, fsdp1_backward_prefetch="NONE")
    assert full_shard.steady_state_peak.op == none.steady_state_peak.op == "aten._log_softmax_backward_data.default"
    assert full_shard.steady_state_peak.bytes - none.steady_state_peak.bytes == LAYER * F32  # 147,968


def test_shard_grad_op_keeps_the_gathered_layers_to_backward(full_shard):
    # at that peak FULL_SHARD holds the root and the prefetched layer 1 unsharded; SHARD_GRAD_OP also layer 0,
    # kept from its forward (the root is never resharded after forward: FSDP1's root unit)
    r = _analyze(nproc=2, fsdp1_sharding="SHARD_GRAD_OP")
    assert r.static == full_shard.static
    assert r.steady_state_peak.bytes - full_shard.steady_state_peak.bytes == LAYER * F32
    assert r.first_iteration_peak.bytes - full_shard.first_iteration_peak.bytes == LAYER * F32


def test_no_shard_keeps_whole_flat_parameters():
    r = _analyze(nproc=2, fsdp1_sharding="NO_SHARD")
    assert r.static["parameters"] == r.static["gradients"] == 202_048 * F32


def test_hybrid_shard_shards_within_a_node(full_shard):
    r = _analyze(nproc=4, nnodes=2, fsdp1_sharding="HYBRID_SHARD")
    assert r.static["parameters"] == full_shard.static["parameters"]  # 2 GPUs a node: halves, as FULL_SHARD over 2
    assert [g["ranks"] for g in r.ranks] == [[0, 1, 2, 3]]


def test_lora_without_use_orig_params_wraps_each_trainable_leaf():
    # FSDP1 refuses a FlatParameter mixing frozen and trainable parameters unless use_orig_params; PEFT's
    # fsdp_auto_wrap_policy makes each LoRA A and B its own unit: q_proj and v_proj (the default targets) x A, B x 2
    # layers = 8 units, and the 2 decoder layers
    r = _analyze(nproc=2, lora_rank=8)
    assert any("PEFT's fsdp_auto_wrap_policy" in n and "(10 units)" in n for n in r.notes)
    # the trainable flat parameters are the LoRA shards: A 8x64 and B 64x8 per adapted projection; q (out 64) and v
    # (out 32: 2 KV heads of 16) have B 64x8 and 32x8: per layer 2 x 512 + 512 + 256 = 1,792, over 2 layers 3,584
    # elements, 1,792 per rank (every unit divides by 2), AdamW's two states of them and a `step` per unit (8)
    assert r.static["gradients"] == 1_792 * F32
    assert r.static["optimizer_state"] == 2 * 1_792 * F32 + 8 * 4


@pytest.mark.parametrize("options, message", [
    ({"strategy": "fsdp", "nproc": 2, "fsdp1_sharding": "SHARD_GRAD_OP"}, "--fsdp1-sharding is an FSDP1 option"),
    ({"strategy": "ddp", "nproc": 2, "fsdp1_use_orig_params": True}, "--fsdp1-use-orig-params is an FSDP1 option"),
    ({"strategy": "fsdp1", "nproc": 4, "fsdp1_sharding": "HYBRID_SHARD"}, "HYBRID_SHARD with --nnodes 1"),
    ({"strategy": "fsdp1", "nproc": 4, "nnodes": 2}, "FULL_SHARD with --nnodes 2"),
    ({"strategy": "fsdp1", "nproc": 2, "fsdp1_sharding": "ZERO"}, "pass --fsdp1-sharding one of FULL_SHARD"),
    # MixedPrecision replaces autocast under fsdp1 only; plain bf16-mixed on the cpu target stays refused
    ({"strategy": "fsdp1", "nproc": 2, "precision": "bf16-mixed", "target": "cpu"}, "cuda target only"),
])
def test_bad_fsdp1_options_are_one_line(options, message):
    with pytest.raises(MemgraphError, match=message):
        TrainingOptions(**options)


@pytest.mark.slow
@pytest.mark.parametrize("model, options, uneven", [
    ("tiny-llama", {}, False),
    ("tiny-llama", {"fsdp1_sharding": "SHARD_GRAD_OP"}, False),
    ("tiny-llama", {"fsdp1_sharding": "NO_SHARD"}, False),
    # the original parameters are views of each rank's chunk: their shapes differ between ranks, the peaks do not
    ("tiny-llama", {"fsdp1_use_orig_params": True}, True),
    ("tiny-llama", {"precision": "bf16-mixed", "fsdp_mixed_precision": True}, False),
    ("tiny-gpt2", {}, False),
    ("tiny-llama", {"nproc": 4}, False),
    # HYBRID_SHARD over 2 nodes of 2 (a (replicate, shard) DeviceMesh): measured 16 B above on every rank
    ("tiny-llama", {"nproc": 4, "nnodes": 2, "fsdp1_sharding": "HYBRID_SHARD"}, False),
    # LoRA: PEFT's policy (measured 48 B above on both ranks; rank 1's steady state +4,144 B with 4,096 B unseen), and
    # use_orig_params with the block policy (48 B; the ranks' shapes differ, their peaks by the LoRA shards' layout)
    ("tiny-llama", {"lora_rank": 8}, False),
    ("tiny-llama", {"lora_rank": 8, "fsdp1_use_orig_params": True}, True),
], ids=["full-shard", "shard-grad-op", "no-shard", "use-orig-params", "bf16-mixed-precision", "tiny-gpt2", "4-ranks",
        "hybrid-shard", "lora-peft-policy", "lora-use-orig-params"])
def test_fsdp1_per_rank_prediction_matches_gloo_processes(model, options, uneven):
    check_ranks_against_gloo(model, {"strategy": "fsdp1", **options}, uneven)
