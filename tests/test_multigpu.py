"""Multi-GPU per rank (--nproc, --strategy): DDP's buckets and FSDP2's shards, computed by hand.

Both run torch.distributed's own code on meta over the fake process group (memgraph/trace/parallel/distributed.py);
every figure below is rank 0's, in bytes, float32 (4 bytes), AdamW, the cpu target (no 512-byte rounding).
"""

import pytest

from memgraph.api import analyze_traced
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.trace.parallel.distributed import DDP_BUCKET_MODULE
from memgraph.trace.record.event_log import ALLOC

F32 = 4
WIDE_MODEL = "tests.fixtures.multigpu_nets:three_linears"
MLP = "tests.fixtures.multigpu_nets:mlp_64_64_10"

# AdamW's `step`: one float32 per parameter the rank's optimizer holds, a host tensor with the for-loop AdamW of
# the cpu target (adam.py _init_group: torch.tensor(0.0)), which is the cpu target's memory
STEP = F32
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
    assert r.static["optimizer_state"] == 2 * 3 * LAYER + 6 * STEP  # AdamW exp_avg + exp_avg_sq, 6 parameters


@pytest.mark.parametrize("model, x, rank0_params", [
    # ZeroRedundancyOptimizer.partition_parameters: largest first, each to the rank with the fewest elements.
    # Three Linear(512, 512): the weights go to ranks 0, 1, 2, the three biases to rank 3.
    (WIDE_MODEL, "x=float32[2,512]", 512 * 512 * F32),
    # Linear(64, 64), Linear(64, 10): the 64x64 weight to rank 0, the 10x64 weight to 1, the biases to 2 and 3.
    (MLP, "x=float32[2,64]", 64 * 64 * F32),
])
def test_zero1_keeps_the_adam_state_of_rank_0s_partition(model, x, rank0_params):
    r, trace = _run(model, x, nproc=4, strategy="zero1")
    assert r.static["optimizer_state"] == 2 * rank0_params + STEP  # AdamW exp_avg + exp_avg_sq, one parameter
    ddp, _ = _run(model, x, nproc=4, strategy="ddp")
    assert r.static["gradients"] == ddp.static["gradients"]  # ZeRO-1 leaves gradients to DDP
    assert r.static["parameters"] == ddp.static["parameters"]


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
    assert r.static["optimizer_state"] == 2 * SHARD_BYTES + 4 * STEP  # 4 parameters


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


# -- ground truth: the same distributed step run for real on the CPU ---------------------------------
def _measure_real_cpu(model: str, x: str, opts: TrainingOptions, rank: int = 0) -> list[dict]:
    """``rank``'s (rank 0's) real CPU allocations: the same model, DDP/FSDP2 wrapper and loop on real CPU tensors, over
    the fake process group (collectives move no data, so every allocation is the rank's own). The models
    return a tensor, so the loss is ``out.sum()`` and the loop the plain one, as in the trace."""
    import gc

    import torch
    import torch.distributed as dist
    from torch.profiler import record_function

    from memgraph.cpu_profiler import memory_profile
    from memgraph.measure.cpu import per_iteration
    from memgraph.model_spec.build import build_model
    from memgraph.model_spec.optimizers import make_optimizer, resolve_impl
    from memgraph.model_spec.options import PRECISION_DTYPE
    from memgraph.model_spec.sources import resolve
    from memgraph.model_spec.tasks import loss_from_outputs
    from memgraph.private_api import fake_store
    from memgraph.trace.parallel.distributed import DistributedRun
    from memgraph.step.training_step import train_iteration

    spec = resolve(model)
    dist.init_process_group("fake", store=fake_store(), rank=rank, world_size=opts.nproc)
    try:
        gc.collect()
        with memory_profile() as prof:
            torch.manual_seed(0)
            model_ = build_model(spec, opts, "cpu")
            batch = spec.batch(opts, PRECISION_DTYPE[opts.precision]).make("cpu", torch.Generator().manual_seed(0))
            run = DistributedRun(opts)  # not entered: no meta patches, a real CPU run
            runner = run.wrap(model_)
            # the optimizer over the wrapped parameters (FSDP2 replaced them with DTensor shards)
            trainable = [p for p in model_.parameters() if p.requires_grad]
            optimizer = run.shard_optimizer(make_optimizer(opts.optimizer, trainable, resolve_impl("auto", "cpu")))
            for it in range(1, opts.iterations + 1):
                with record_function(f"memgraph_iteration_{it}"):
                    train_iteration(runner, batch, loss_from_outputs, optimizer, loop="plain")
            del model_, runner, batch, optimizer
        return per_iteration(prof, opts.iterations)
    finally:
        dist.destroy_process_group()


@pytest.mark.slow
@pytest.mark.parametrize("options", [
    {"strategy": "ddp"}, {"strategy": "ddp", "gradient_as_bucket_view": True},
    {"strategy": "fsdp"}, {"strategy": "fsdp", "no_reshard_after_forward": True}, {"strategy": "zero1"},
], ids=["ddp", "ddp-bucket-view", "fsdp", "fsdp-no-reshard", "zero1"])
@pytest.mark.parametrize("model, x", [(MLP, "x=float32[2,64]"), (WIDE_MODEL, "x=float32[2,512]")],
                         ids=["mlp", "three-linears"])
def test_prediction_matches_the_real_cpu_run(model, x, options):
    # Tolerance 0.2%, prediction never above: the real run also allocates CPU scalars the meta trace does
    # not track (AdamW's `step` counters are CPU tensors in both runs; 0-dim tensors wrapping Python
    # scalars). Measured differences: 28 to 72 bytes (0.0005% to 0.09%).
    opts = TrainingOptions(inputs=(x,), target="cpu", nproc=4, **options)
    measured = _measure_real_cpu(model, x, opts)
    r, _ = analyze_traced(model, opts)
    for predicted, real in ((r.first_iteration_peak.bytes, measured[0]["peak_allocated"]),
                            (r.steady_state_peak.bytes, measured[1]["peak_allocated"])):
        assert 0 <= real - predicted <= 0.002 * real


# -- per rank: ranks whose shards differ are traced and reported apart --------------------------------------
# Linear(64, 10) on 4 ranks: FSDP2 chunks its 10 rows as torch.chunk does, 3, 3, 3 and 1 row. Every rank's
# shard storage is padded to 3 rows (_fsdp_param.FSDPParam._init_sharded_param: padded_sharded_param), so
# parameters and gradients are equal, but the parameter is a view of the rank's own rows, and AdamW's state
# (zeros_like) has rank 3's 1 row: 1 x 64 + 1 floats for the layer, not 3 x 64 + 3.
RANK3_SHARD = UNIT0_SHARD + 1 * 64 + 1  # 1105 floats


def test_uneven_shards_make_rank_3_a_group_of_its_own():
    r, _ = _run(MLP, "x=float32[2,64]", nproc=4, strategy="fsdp")
    assert [g["ranks"] for g in r.ranks] == [[0, 1, 2], [3]]
    rank0, rank3 = r.ranks
    assert rank0["steady_state_peak"] == r.steady_state_peak.bytes  # rank 0's group is the report's figures
    assert rank0["static"]["optimizer_state"] == 2 * SHARD_BYTES + 4 * STEP  # 9,880 + the 4 step counters
    assert rank3["static"]["optimizer_state"] == 2 * RANK3_SHARD * F32 + 4 * STEP  # 8,840 + the 4 step counters
    assert rank3["static"]["parameters"] == rank0["static"]["parameters"] == SHARD_BYTES  # padded storages
    # the steady state holds the whole optimizer state: rank 3 peaks 2 x (3 - 1) x 65 floats lower
    assert rank0["steady_state_peak"] - rank3["steady_state_peak"] == 2 * 2 * 65 * F32  # 1,040


def test_even_shards_are_one_group():
    r, _ = _run(MLP, "x=float32[2,64]", nproc=2, strategy="fsdp")  # 64 and 10 rows: 32 and 5 per rank
    assert [g["ranks"] for g in r.ranks] == [[0, 1]]


def test_zero1_partitions_differ_per_rank():
    # ZeroRedundancyOptimizer's partitions of Linear(64, 64), Linear(64, 10) on 4 ranks: the 64x64 weight to
    # rank 0, the 10x64 weight to 1, the biases (64 and 10) to 2 and 3: four different optimizer states
    r, _ = _run(MLP, "x=float32[2,64]", nproc=4, strategy="zero1")
    assert [g["ranks"] for g in r.ranks] == [[0], [1], [2], [3]]
    assert [g["static"]["optimizer_state"] for g in r.ranks] == [2 * n * F32 + STEP for n in (64 * 64, 10 * 64, 64, 10)]  # one step counter each


@pytest.mark.slow
def test_rank_3_prediction_matches_its_real_cpu_run():
    # rank 3 of the fake process group with real CPU tensors (collectives move no data; every allocation is the
    # rank's own); the same 0.2% tolerance as rank 0's test above, prediction never above
    opts = TrainingOptions(inputs=("x=float32[2,64]",), target="cpu", nproc=4, strategy="fsdp")
    measured = _measure_real_cpu(MLP, "x=float32[2,64]", opts, rank=3)
    r, _ = analyze_traced(MLP, opts)
    (rank3,) = [g for g in r.ranks if g["ranks"] == [3]]
    for predicted, real in ((rank3["first_iteration_peak"], measured[0]["peak_allocated"]),
                            (rank3["steady_state_peak"], measured[1]["peak_allocated"])):
        assert 0 <= real - predicted <= 0.002 * real, (predicted, real)


def test_fsdp_mixed_precision_gathers_bfloat16():
    # MixedPrecisionPolicy(param_dtype=bfloat16): FSDP2 casts rank 0's float32 shard of a unit to bfloat16
    # (1040 elements x 2 bytes for unit 0) and all-gathers 4 of them into one flat bfloat16 buffer; the
    # shards, gradients and AdamW state stay float32. The cuda target (mixed precision is modelled there).
    opts = TrainingOptions(inputs=("x=float32[2,64]",), nproc=4, strategy="fsdp", precision="bf16-mixed",
                           fsdp_mixed_precision=True)
    r, trace = analyze_traced(MLP, opts)
    made = {(s.nbytes, s.dtype) for s in _made_in(trace, 2, "forward") if s.name == "aten.empty.memory_format"}
    assert (UNIT0_SHARD * 2, "bfloat16") in made  # the cast shard, 2,080 bytes
    assert (4 * UNIT0_SHARD * 2, "bfloat16") in made  # the all-gather output, 8,320 bytes
    params = [s for s in trace.log.storages if s.origin == "parameter"]
    assert sum(s.nbytes for s in params) == SHARD_BYTES and {s.dtype for s in params} == {"float32"}
    assert not any(note.startswith("autocast: emulated") for note in r.notes)  # the policy replaces autocast


def test_fsdp_mixed_precision_needs_fsdp_and_bf16_mixed():
    with pytest.raises(MemgraphError, match="--fsdp-mixed-precision"):
        TrainingOptions(nproc=2, strategy="ddp", precision="bf16-mixed", fsdp_mixed_precision=True)
    with pytest.raises(MemgraphError, match="--fsdp-mixed-precision"):
        TrainingOptions(nproc=2, strategy="fsdp", fsdp_mixed_precision=True)


def test_per_rank_section_and_json():
    import json

    from memgraph.render.json_report import render_json
    from memgraph.render.sections import build

    r, _ = _run(MLP, "x=float32[2,64]", nproc=4, strategy="fsdp")
    (section,) = [s for s in build(r, 3) if s.key == "ranks"]
    assert [row[0] for row in section.rows] == ["0-2", "3"]
    assert section.rows[1][-1] == "optimizer_state -1.02 KiB"  # 9,880 - 8,840 = 1,040 bytes
    assert [g["ranks"] for g in json.loads(render_json(r))["ranks"]] == [[0, 1, 2], [3]]
    even, _ = _run(MLP, "x=float32[2,64]", nproc=2, strategy="fsdp")
    (section,) = [s for s in build(even, 3) if s.key == "ranks"]
    assert section.lines == ["ranks 0-1 identical: every rank stores the same shapes, so the figures above are "
                             "each rank's."]
    single, _ = _run(MLP, "x=float32[2,64]")
    assert "ranks" not in json.loads(render_json(single)) and not [s for s in build(single, 3) if s.key == "ranks"]
