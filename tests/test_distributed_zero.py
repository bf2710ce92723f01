"""ZeRO stages through PyTorch's own primitives, 8 ranks, computed by hand (rank 0's bytes, float32, AdamW,
the cpu target: no 512-byte rounding).

--strategy zero3 = FSDP2 fully_shard(reshard_after_forward=True) (= fsdp); zero2 = fully_shard(
reshard_after_forward=False); zero1 = DDP + ZeroRedundancyOptimizer (tests/test_multigpu.py).
"""

import pytest

from memgraph.api import analyze_traced
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.trace.record.event_log import ALLOC

F32 = 4
MLP = "tests.fixtures.multigpu_nets:mlp_64_64_10"  # Linear(64, 64), ReLU, Linear(64, 10): two FSDP units
X = "x=float32[2,64]"
RANKS = 8

# FSDP2 shards dim 0 in chunks of ceil(rows / 8), padded to 8 chunks (torch 2.13 _fsdp_param.py,
# FSDPParam._init_sharded_param: torch.chunk of the padded dim 0):
#   Linear(64, 64): weight 64 rows -> 8 per rank: 8*64 floats; bias 64 -> 8
#   Linear(64, 10): weight 10 rows -> 2 per rank (padded to 16 rows): 2*64 floats; bias 10 -> 2
SHARD = (8 * 64 + 8) + (2 * 64 + 2)  # 650 floats
SHARD_BYTES = SHARD * F32
assert SHARD_BYTES == 2_600
PADDED_FULL = RANKS * SHARD_BYTES  # 20,800: both units unsharded at their padded sizes
UNSHARDED = (64 * 64 + 64 + 10 * 64 + 10) * F32  # 19,240: the model as DDP holds it


def _run(strategy, **options):
    return analyze_traced(MLP, TrainingOptions(inputs=(X,), target="cpu", nproc=RANKS, strategy=strategy, **options))


@pytest.mark.parametrize("strategy", ["fsdp", "zero2", "zero3"])
def test_parameters_gradients_and_adam_state_are_rank_0s_shards(strategy):
    r, _ = _run(strategy)
    assert r.static["parameters"] == SHARD_BYTES
    assert r.static["gradients"] == SHARD_BYTES
    # AdamW exp_avg + exp_avg_sq, and one float32 `step` per parameter (4): the for-loop AdamW of the cpu target
    # keeps it on the host (adam.py _init_group: torch.tensor(0.0)), which is the cpu target's memory
    assert r.static["optimizer_state"] == 2 * SHARD_BYTES + 4 * F32
    ddp, _ = _run("ddp")  # replicated, for contrast: 8x the shard less the padding
    assert ddp.static["parameters"] == UNSHARDED


def _live_at(trace, event_index: int) -> int:
    live = 0
    for kind, sid in trace.log.events[:event_index]:
        live += trace.log.storages[sid].nbytes if kind == ALLOC else -trace.log.storages[sid].nbytes
    return live


def _backward_start(trace, iteration: int) -> int:
    return next(e for e, it, phase in trace.log.phase_marks if it == iteration and phase == "backward")


def _optimizer_start(trace, iteration: int) -> int:
    return next(e for e, it, phase in trace.log.phase_marks if it == iteration and phase == "optimizer")


def test_zero2_keeps_every_unit_unsharded_from_forward_to_backward():
    # At the start of backward, zero2 (reshard_after_forward=False) still holds both units' unsharded
    # parameters (padded: 20,800 bytes, DeepSpeed ZeRO-2's full replica plus FSDP2's padding); zero3 has
    # freed the non-root unit (the root, fully_shard(model), holds no parameters of its own here).
    _, zero2 = _run("zero2")
    _, zero3 = _run("zero3")
    assert _live_at(zero2, _backward_start(zero2, 2)) - _live_at(zero3, _backward_start(zero3, 2)) == PADDED_FULL
    # In the optimizer step both hold only shards: FSDP2 reshards after backward, where DeepSpeed ZeRO-2
    # would keep its replica (the difference the notes state).
    assert _live_at(zero2, _optimizer_start(zero2, 2)) == _live_at(zero3, _optimizer_start(zero3, 2))


def test_zero3_is_fsdp():
    fsdp, _ = _run("fsdp")
    zero3, _ = _run("zero3")
    assert zero3.steady_state_peak.bytes == fsdp.steady_state_peak.bytes
    assert any(n.startswith("ZeRO-3 as FSDP2") for n in zero3.notes)


def test_zero2_states_the_mapping():
    r, _ = _run("zero2")
    (note,) = [n for n in r.notes if n.startswith("ZeRO-2 as FSDP2")]
    assert "reshard_after_forward=False" in note and "DeepSpeed ZeRO-2 keeps a full replica" in note


def test_no_reshard_after_forward_belongs_to_fsdp():
    with pytest.raises(MemgraphError, match="zero2 never reshards"):
        TrainingOptions(nproc=2, strategy="zero3", no_reshard_after_forward=True)
