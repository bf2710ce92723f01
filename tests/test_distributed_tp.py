"""--strategy tp: tensor parallelism with torch.distributed.tensor.parallel, computed by hand.

tests/configs/tiny-llama.json (hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocabulary 1000, 2 layers)
on 2 ranks, batch 2 x 32 tokens, float32 (4 bytes), the cpu target (no 512-byte rounding); rank 0's bytes.
The plan is LlamaConfig.base_model_tp_plan (transformers 5.23) with torch 2.13's ColwiseParallel and
RowwiseParallel (torch/distributed/tensor/parallel/style.py).
"""

import pytest

from memgraph.api import analyze_traced
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions

F32 = 4
LLAMA = "tests/configs/tiny-llama.json"
TOKENS = 2 * 32  # batch x sequence


@pytest.fixture(scope="module")
def traced():
    return analyze_traced(LLAMA, TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, strategy="tp"))


def _parameter(trace, name):
    (s,) = [s for s in trace.log.storages if s.origin == "parameter" and s.name == name]
    return s


def _made_in(trace, module, iteration=2, phase="forward"):
    return [s for s in trace.log.storages if s.module == module and s.iteration == iteration and s.phase == phase]


def test_colwise_linear_holds_half_its_rows_and_makes_half_its_output(traced):
    _, trace = traced
    q = "model.layers.0.self_attn.q_proj"
    # ColwiseParallel: weight Shard(0): 64 output rows / 2 ranks = 32 rows x 64 inputs
    w = _parameter(trace, f"{q}.weight")
    assert (w.shape, w.nbytes) == ((32, 64), 32 * 64 * F32)  # 8,192 bytes, not 16,384
    # its output stays sharded on the last dim (use_local_output): 64 tokens x 32 features
    (out,) = [s for s in _made_in(trace, q) if s.name.startswith("aten.mm")]
    assert out.nbytes == TOKENS * 32 * F32  # 8,192 bytes
    gate = _parameter(trace, "model.layers.0.mlp.gate_proj.weight")
    assert (gate.shape, gate.nbytes) == ((64, 64), 64 * 64 * F32)  # 128 rows / 2


def test_rowwise_linear_holds_half_its_columns_and_all_reduces_a_full_output(traced):
    _, trace = traced
    o = "model.layers.0.self_attn.o_proj"
    # RowwiseParallel: weight Shard(1): 64 outputs x (64 inputs / 2)
    w = _parameter(trace, f"{o}.weight")
    assert (w.shape, w.nbytes) == ((64, 32), 64 * 32 * F32)
    # the local matmul makes a partial sum of the full output (64 tokens x 64 features)
    (partial,) = [s for s in _made_in(trace, o) if s.name.startswith("aten.mm")]
    assert partial.nbytes == TOKENS * 64 * F32  # 16,384 bytes
    # the output hook's functional all-reduce (Partial -> Replicate, after o_proj returns, so in self_attn)
    # allocates a clone of it (torch/csrc/distributed/c10d/Functional.cpp)
    (reduced,) = [s for s in _made_in(trace, "model.layers.0.self_attn")
                  if s.name.startswith("_c10d_functional.all_reduce")]
    assert reduced.nbytes == TOKENS * 64 * F32


def test_vocabulary_sharded_embedding_and_head(traced):
    _, trace = traced
    # embed_tokens RowwiseParallel: 1000 vocabulary rows / 2; lm_head ColwiseParallel: 1000 output rows / 2
    assert _parameter(trace, "model.embed_tokens.weight").nbytes == 500 * 64 * F32
    assert _parameter(trace, "lm_head.weight").nbytes == 500 * 64 * F32
    # the head's logits are all-gathered to every rank (output_layouts=Replicate()): world size x the local
    # 64 x 500 logits, gathered on dim 0, then laid out as the full 2 x 32 x 1000
    gathered = [s for s in trace.log.storages if s.iteration == 2 and s.phase == "forward"
                and s.name.startswith("_c10d_functional.all_gather_into_tensor")]
    assert [s.nbytes for s in gathered] == [2 * TOKENS * 500 * F32]


def test_static_memory_is_the_sharded_model(traced):
    r, _ = traced
    # per layer: q 32x64, k 16x64, v 16x64 (2 KV heads x 16 -> 32 rows / 2), o 64x32, gate 64x64, up 64x64,
    # down 64x64 (128 columns / 2), two norms of 64 replicated; then embeddings 500x64 twice, final norm 64
    layer = (32 * 64 + 16 * 64 + 16 * 64 + 64 * 32) + 3 * 64 * 64 + 2 * 64
    params = 2 * layer + 2 * 500 * 64 + 64
    assert r.static["parameters"] == params * F32
    # Gradients are the shards too, except the vocabulary-sharded embedding's: DTensor's backward of the
    # embedding leaves rank 0 a local gradient of the whole 1000 x 64 table (checked with real CPU tensors on
    # the fake process group: embed_tokens.weight.grad.to_local() is 1000 x 64, 256,000 bytes)
    assert r.static["gradients"] == (params - 500 * 64 + 1000 * 64) * F32
    # exp_avg + exp_avg_sq of each shard, and AdamW's float32 0-dim `step` per parameter tensor: 9 per layer
    # (q, k, v, o, gate, up, down, two norms) x 2, the embedding, the head and the final norm = 21
    assert r.static["optimizer_state"] == 2 * params * F32 + 21 * F32


def test_a_model_without_a_plan_is_refused():
    with pytest.raises(MemgraphError, match="base_model_tp_plan"):
        analyze_traced("tests/configs/tiny-gpt2.json",
                       TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, strategy="tp"))
