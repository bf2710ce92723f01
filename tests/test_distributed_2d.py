"""2-D parallelism and sequence parallelism, computed by hand: --strategy fsdp+tp --tp-size T, --sequence-parallel,
and FSDP2's hybrid sharding (--nnodes M).

tests/configs/tiny-llama.json (hidden 64, 4 heads of 16, 2 KV heads, MLP 128, vocabulary 1000, 2 layers,
202,048 parameters), batch 2 x 32 tokens, float32 (4 bytes), AdamW, the cpu target (no 512-byte rounding);
every figure is rank 0's, traced with torch 2.13's own parallelize_module and fully_shard on the fake process
group (memgraph/trace/parallel/distributed.py, tensor_parallel.py).
"""

import json
from pathlib import Path

import pytest

from memgraph.api import analyze_traced
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions

F32 = 4
LLAMA = "tests/configs/tiny-llama.json"
B, S, H = 2, 32, 64  # batch, sequence, hidden
PARAMETERS = 202_048


def _trace(model=LLAMA, **options):
    return analyze_traced(model, TrainingOptions(seq_len=S, batch_size=B, target="cpu", **options))


def _parameters(trace) -> dict[str, tuple]:
    return {s.name: s.shape for s in trace.log.storages if s.origin == "parameter"}


# -- fsdp+tp: a (dp, tp) DeviceMesh, the TP plan on tp, then fully_shard over dp -------------------------------
@pytest.fixture(scope="module")
def fsdp_tp():
    return _trace(nproc=4, strategy="fsdp+tp", tp_size=2)


def test_fsdp_tp_shards_each_weight_by_tp_then_by_dp(fsdp_tp):
    _, trace = fsdp_tp
    shapes = _parameters(trace)
    # q_proj 64x64: ColwiseParallel on tp (rows / 2 = 32), then FSDP2 Shard(0) over dp (32 / 2 = 16 rows)
    assert shapes["model.layers.0.self_attn.q_proj.weight"] == (16, 64)
    # k_proj 32x64 (2 KV heads x 16): 16 rows on tp, 8 over dp
    assert shapes["model.layers.0.self_attn.k_proj.weight"] == (8, 64)
    # o_proj 64x64: RowwiseParallel shards the columns on tp (64 x 32), FSDP2 the rows over dp (32 x 32)
    assert shapes["model.layers.0.self_attn.o_proj.weight"] == (32, 32)
    # down_proj 64x128: columns on tp (64 x 64), rows over dp (32 x 64)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (32, 64)
    # embedding 1000x64: vocabulary rows on tp (500), then over dp (250)
    assert shapes["model.embed_tokens.weight"] == (250, 64)
    # the norms stay replicated on tp (64) and are sharded only over dp (32)
    assert shapes["model.norm.weight"] == (32,)


def test_fsdp_tp_per_rank_parameter_bytes(fsdp_tp):
    r, _ = fsdp_tp
    # Everything but the norms is split 4 ways (2 x 2); the 5 norms of 64 (two per layer, the final one) are
    # replicated on tp and split only 2 ways over dp: 202,048 / 4 + 5 x 64 x (1/2 - 1/4) = 50,512 + 80 floats.
    norms = 5 * 64
    per_rank = (PARAMETERS - norms) // 4 + norms // 2
    assert per_rank == 50_592
    assert r.static["parameters"] == per_rank * F32  # 202,368 bytes
    assert r.static["gradients"] == per_rank * F32  # FSDP2's reduce-scattered shards
    # AdamW exp_avg + exp_avg_sq of every shard, and a float32 0-dim `step` per parameter tensor (21)
    assert r.static["optimizer_state"] == 2 * per_rank * F32 + 21 * F32


def test_fsdp_tp_is_noted(fsdp_tp):
    r, _ = fsdp_tp
    assert any("fsdp+tp" in note and "(dp=2, tp=2)" in note for note in r.notes)


# -- sequence parallelism: the norms and residual stream on 1/T of the sequence ------------------------------
@pytest.fixture(scope="module")
def sequence_parallel():
    return _trace(nproc=2, strategy="tp", sequence_parallel=True)


@pytest.fixture(scope="module")
def tensor_parallel():
    return _trace(nproc=2, strategy="tp")


def _made(trace, module, iteration=2, phase="forward"):
    return [s for s in trace.log.storages if s.module == module and s.iteration == iteration and s.phase == phase]


def _saved_bytes(trace, module) -> int:
    return sum(s.nbytes for s in _made(trace, module) if s.saved_for_backward)


def test_sequence_parallel_norm_saves_a_sequence_shard(sequence_parallel, tensor_parallel):
    # Llama's RMSNorm saves rsqrt(variance) [B, S, 1] and x * rsqrt [B, S, H] (for the weight's gradient).
    # With SequenceParallel on 2 ranks both are on S / 2 = 16 tokens:
    #   2 x 16 x 1 x 4 = 128 bytes, 2 x 16 x 64 x 4 = 8,192 bytes.
    norm = "model.layers.1.input_layernorm"
    assert _saved_bytes(sequence_parallel[1], norm) == B * (S // 2) * F32 + B * (S // 2) * H * F32  # 8,320
    # Without it the norm runs on the whole sequence, and its output, the input q/k/v save, is made here too:
    #   2 x 32 x 4 = 256, plus 2 x 16,384
    assert _saved_bytes(tensor_parallel[1], norm) == B * S * F32 + 2 * B * S * H * F32  # 33,024


def test_sequence_parallel_gathers_into_attention_and_reduce_scatters_out(sequence_parallel):
    _, trace = sequence_parallel
    attention = _made(trace, "model.layers.1.self_attn")
    # PrepareModuleInput Shard(1) -> Replicate: a functional all-gather on dim 0 (2 ranks x [2, 16, 64],
    # 16,384 bytes), then DTensor lays the chunks out on dim 1 with a cat (the [2, 32, 64] q/k/v input, saved)
    gathered = [s.nbytes for s in attention if s.name.startswith("_c10d_functional.all_gather_into_tensor")]
    assert gathered == [2 * B * (S // 2) * H * F32]
    (qkv_input,) = [s for s in attention if s.saved_for_backward and s.shape == (B, S, H)]
    assert qkv_input.nbytes == B * S * H * F32  # 16,384
    # o_proj RowwiseParallel(output_layouts=Shard(1)): the partial [B*S, H] sum is reduce-scattered to this
    # rank's [2, 16, 64] (8,192 bytes) instead of all-reduced to the full [2, 32, 64] (16,384 bytes)
    scattered = [s.nbytes for s in attention if s.name.startswith("_c10d_functional.reduce_scatter_tensor")]
    assert scattered == [B * (S // 2) * H * F32]


def test_sequence_parallel_residual_stream_is_a_sequence_shard(sequence_parallel, tensor_parallel):
    # the decoder layer's two residual adds, saved by the next norm: [2, 16, 64] each with SP, [2, 32, 64] without
    sp = [s.nbytes for s in _made(sequence_parallel[1], "model.layers.1") if s.name == "aten.add.Tensor"]
    tp = [s.nbytes for s in _made(tensor_parallel[1], "model.layers.1") if s.name == "aten.add.Tensor"]
    assert sp == [B * (S // 2) * H * F32] * 2 and tp == [B * S * H * F32] * 2


def test_sequence_parallel_leaves_the_parameters_as_tp(sequence_parallel, tensor_parallel):
    assert sequence_parallel[0].static == tensor_parallel[0].static
    assert sequence_parallel[0].steady_state_peak.bytes < tensor_parallel[0].steady_state_peak.bytes


# -- options -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options, message", [
    ({"nproc": 4, "strategy": "fsdp+tp"}, "--tp-size"),
    ({"nproc": 4, "strategy": "fsdp+tp", "tp_size": 3}, "--tp-size 3"),
    ({"nproc": 4, "strategy": "fsdp+tp", "tp_size": 4}, "--strategy tp"),
    ({"nproc": 4, "strategy": "tp", "tp_size": 2}, "--tp-size 2"),
    ({"nproc": 4, "strategy": "fsdp", "sequence_parallel": True}, "--sequence-parallel"),
    ({"nproc": 4, "strategy": "ddp", "nnodes": 2}, "--nnodes 2"),
    ({"nproc": 6, "strategy": "fsdp", "nnodes": 4}, "--nnodes 4"),
])
def test_bad_2d_options_are_refused(options, message):
    with pytest.raises(MemgraphError, match=message.replace("+", r"\+")):
        TrainingOptions(**options)


def test_sequence_parallel_needs_an_untied_head(tmp_path):
    # a tied embedding and head stay replicated (tp_plan), so the sequence cannot be split after the embedding
    config = json.loads(Path(LLAMA).read_text()) | {"tie_word_embeddings": True}
    tied = tmp_path / "config.json"
    tied.write_text(json.dumps(config))
    with pytest.raises(MemgraphError, match="--sequence-parallel"):
        analyze_traced(str(tied), TrainingOptions(seq_len=S, batch_size=B, target="cpu", nproc=2, strategy="tp",
                                                  sequence_parallel=True))


# -- --nnodes: FSDP2 hybrid sharding (HSDP), a (replicate, shard) DeviceMesh --------------------------------
def test_hsdp_shards_within_a_node_only():
    # 4 GPUs on 2 nodes: fully_shard on a (replicate=2, shard=2) mesh shards dim 0 over the 2 GPUs of a node,
    # so rank 0 holds what plain FSDP2 on 2 ranks holds, twice what FSDP2 over all 4 holds.
    hsdp, trace = _trace(nproc=4, strategy="fsdp", nnodes=2)
    fsdp2, _ = _trace(nproc=2, strategy="fsdp")
    fsdp4, _ = _trace(nproc=4, strategy="fsdp")
    # every tiny-llama dim 0 (64, 32, 128, 1000) divides by 2 and by 4: no padding
    assert hsdp.static["parameters"] == fsdp2.static["parameters"] == PARAMETERS // 2 * F32  # 404,096
    assert fsdp4.static["parameters"] == PARAMETERS // 4 * F32
    assert hsdp.static["gradients"] == PARAMETERS // 2 * F32
    assert _parameters(trace)["model.layers.0.self_attn.q_proj.weight"] == (32, 64)
    assert any(note.startswith("HSDP: fully_shard on a (replicate=2, shard=2)") for note in hsdp.notes)


# -- per rank under tensor parallelism: a vocabulary that does not divide by the ranks ----------------------
def test_uneven_vocabulary_makes_two_tp_rank_groups():
    # vocabulary 1001 on 2 ranks: DTensor shards as torch.chunk does, 501 rows to rank 0 and 500 to rank 1, for
    # the embedding (RowwiseParallel, rows) and the head (ColwiseParallel, output rows); each rank is traced
    r, _ = _trace(model="tests/configs/tiny-llama-vocab-1001.json", nproc=2, strategy="tp")
    assert [g["ranks"] for g in r.ranks] == [[0], [1]]
    rank0, rank1 = (g["static"] for g in r.ranks)
    assert rank0 == r.static  # rank 0's group is the report's figures
    row = H * F32  # one vocabulary row of 64 floats, 256 bytes
    assert rank0["parameters"] - rank1["parameters"] == 2 * row  # the embedding's and the head's extra row
    # gradients: the head's extra row only; the embedding's gradient is the whole 1001 x 64 table on both ranks
    # (DTensor's embedding backward, see test_distributed_tp.py)
    assert rank0["gradients"] - rank1["gradients"] == row
    assert rank0["optimizer_state"] - rank1["optimizer_state"] == 2 * 2 * row  # exp_avg + exp_avg_sq
