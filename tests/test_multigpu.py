"""Multi-GPU per rank (--nproc, --strategy): DDP's buckets and FSDP2's shards, computed by hand.

Both run torch.distributed's own code on meta over the fake process group (memgraph/trace/distributed.py);
every figure below is rank 0's, in bytes, float32 (4 bytes), AdamW, the cpu target (no 512-byte rounding).
"""

import pytest

from memgraph.api import analyze_traced
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.trace.distributed import DDP_BUCKET_MODULE
from memgraph.trace.event_log import ALLOC, Role

F32 = 4
WIDE_MODEL = "tests.fixtures.multigpu_nets:three_linears"
MLP = "tests.fixtures.multigpu_nets:mlp_64_64_10"

# one Linear(512, 512): weight 512*512 + bias 512 floats
LAYER = (512 * 512 + 512) * F32
assert LAYER == 1_050_624


def _run(model, x, **options):
    return analyze_traced(model, TrainingOptions(inputs=(x,), target="cpu", **options))


def _made_in(trace, iteration: int, phase: str):
    """Storages allocated during ``phase`` of ``iteration``."""
    return [s for s in trace.log.storages if s.iteration == iteration and s.phase == phase]


def test_ddp_buckets_follow_the_rebuild_rule():
    # Iteration 1: one bucket of all gradients (torch 2.13 DDP: sys.maxsize limit without
    # find_unused_parameters). At the second forward the Reducer rebuilds the buckets in the order the
    # gradients became ready (last layer first): the first bucket closes once it holds >= 1 MiB
    # (_DEFAULT_FIRST_BUCKET_BYTES), i.e. after the last layer's weight and bias (LAYER bytes); the
    # other two layers (2 * LAYER < 25 MiB) fill the second.
    _, trace = _run(WIDE_MODEL, "x=float32[2,512]", nproc=4, strategy="ddp")
    rebuilt = sorted(s.nbytes for s in _made_in(trace, 2, "forward") if s.module == DDP_BUCKET_MODULE)
    assert rebuilt == [LAYER, 2 * LAYER]
    first = [s.nbytes for s in trace.log.storages if s.iteration == 1 and s.nbytes == 3 * LAYER]
    assert first, "iteration 1's single bucket of all gradients"


@pytest.mark.parametrize("as_view, gradient_bytes", [(False, 2 * 3 * LAYER), (True, 3 * LAYER)])
def test_ddp_gradients_and_buckets(as_view, gradient_bytes):
    # gradient_as_bucket_view=False: each .grad has its own storage and the buckets hold a copy (2x);
    # True: the .grad tensors are views of the buckets (1x).
    r, _ = _run(WIDE_MODEL, "x=float32[2,512]", nproc=4, strategy="ddp", gradient_as_bucket_view=as_view)
    assert r.static["gradients"] == gradient_bytes
    assert r.static["parameters"] == 3 * LAYER  # DDP replicates: every rank holds all parameters
    assert r.static["optimizer_state"] == 2 * 3 * LAYER  # AdamW exp_avg + exp_avg_sq


# FSDP2 on 4 ranks shards dim 0 in chunks of ceil(rows / 4), padding to 4 chunks:
#   Linear(64, 64): weight 64 rows -> 16 per rank: 16*64 floats; bias 64 -> 16
#   Linear(64, 10): weight 10 rows -> padded to 12 -> 3 per rank: 3*64 floats; bias 10 -> 3
UNIT0_SHARD = 16 * 64 + 16  # 1040 floats
UNIT2_SHARD = 3 * 64 + 3  # 195 floats
SHARD_BYTES = (UNIT0_SHARD + UNIT2_SHARD) * F32
assert SHARD_BYTES == 4940
PADDED_FULL = (64 * 64 + 64 + 12 * 64 + 12) * F32  # 19,760: the padded unsharded model
assert SHARD_BYTES * 4 == PADDED_FULL


def test_fsdp_shards_parameters_gradients_and_adam_state():
    r, _ = _run(MLP, "x=float32[2,64]", nproc=4, strategy="fsdp")
    assert r.static["parameters"] == SHARD_BYTES
    assert r.static["gradients"] == SHARD_BYTES
    assert r.static["optimizer_state"] == 2 * SHARD_BYTES


def test_fsdp_all_gathers_one_flat_buffer_per_unit():
    # _fsdp_collectives.foreach_all_gather: one flat output of world_size x the group's shard numel
    _, trace = _run(MLP, "x=float32[2,64]", nproc=4, strategy="fsdp")
    made = {s.nbytes for s in _made_in(trace, 2, "forward") if s.name == "aten.empty.memory_format"}
    assert 4 * UNIT0_SHARD * F32 in made  # 16,640
    assert 4 * UNIT2_SHARD * F32 in made  # 3,120


def _live_at(trace, event_index: int) -> int:
    live = 0
    for kind, sid in trace.log.events[:event_index]:
        live += trace.log.storages[sid].nbytes if kind == ALLOC else -trace.log.storages[sid].nbytes
    return live


def _backward_start(trace, iteration: int) -> int:
    return next(e for e, it, phase in trace.log.phase_marks if it == iteration and phase == "backward")


def test_fsdp_no_reshard_keeps_the_gathered_parameters_to_backward():
    # reshard_after_forward=False on both units keeps their unsharded parameters alive from forward into
    # backward; True frees them after forward. FSDP2 allocates each unsharded parameter at its padded
    # size (world size x padded shard; _fsdp_collectives.foreach_all_gather_copy_out: 12 rows for the 10-row layer) and views the
    # model's rows, so the kept bytes are the padded model, 19,760, not 19,240.
    _, resharded = _run(MLP, "x=float32[2,64]", nproc=4, strategy="fsdp")
    _, kept = _run(MLP, "x=float32[2,64]", nproc=4, strategy="fsdp", no_reshard_after_forward=True)
    difference = _live_at(kept, _backward_start(kept, 2)) - _live_at(resharded, _backward_start(resharded, 2))
    assert difference == PADDED_FULL


def test_strategy_options_are_checked():
    with pytest.raises(MemgraphError, match="--strategy"):
        TrainingOptions(nproc=8)
    with pytest.raises(MemgraphError, match="--strategy fsdp"):
        TrainingOptions(nproc=2, strategy="ddp", no_reshard_after_forward=True)
    with pytest.raises(MemgraphError, match="unknown strategy"):
        TrainingOptions(nproc=2, strategy="zero9")


def test_nccl_buffers_are_a_bounded_unknown_of_the_total():
    _, trace = _run(MLP, "x=float32[2,64]", nproc=4, strategy="fsdp")
    (nccl,) = [u for u in trace.unknowns if u.name.startswith("NCCL")]
    # 64 channels x 4 connections x (512 KiB LL + 4,915,200 B LL128 + 4 MiB Simple)
    assert nccl.counter == "total" and nccl.upper_bytes == 64 * 4 * (524_288 + 4_915_200 + 4_194_304)
