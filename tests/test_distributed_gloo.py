"""`memgraph measure --device cpu --nproc N --strategy ...`: the distributed step run for real, N gloo
processes on the CPU, against the per-rank `cpu` prediction traced on the fake process group.

The live runs start two (or four) processes that each import torch and transformers and run two iterations
(about 15 to 60 s each on the 2-core test machine), so they are `slow`.
"""

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.measure.memory_guard import check_cpu_measurement_fits
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve

TINY = {"tiny-llama": "tests/configs/tiny-llama.json", "tiny-gpt2": "tests/configs/tiny-gpt2.json",
        "tiny-llama-vocab-1001": "tests/configs/tiny-llama-vocab-1001.json", "tiny-llava": "tests/configs/tiny-llava.json"}
# The tolerance: the per-rank cpu prediction within 2% of the real two-process gloo run. Measured
# (torch 2.13.0, transformers 5.23, -s 32 -b 2, AdamW, fp32): the prediction is 0 to 72 bytes below the
# measurement out of 3.6 to 4.9 MB (under 0.002%; 2026-11-23, with AdamW's host `step` counters recorded on the
# cpu target): the real run also allocates 0-dim CPU tensors the meta trace does not see (Python scalars wrapped
# as tensors inside an op, 8 B each plus a 4 B cast). The prediction is never
# above any rank's measurement, a stricter check than the 2% band that catches a trace counting a buffer the
# real rank does not allocate.
# Two gloo effects, both measured per rank by the record (memgraph/measure/distributed.py):
# * gloo's worker threads allocate and free their own staging buffers (the flat all-gather output), alive at
#   the step's peak or not depending on scheduling (one CI run: both ranks of tiny-llama FSDP2 +147,992 B, one
#   decoder layer's 147,968-byte gathered buffer): the comparison uses `peak_allocated_step_thread`, the
#   allocations of the thread that ran the step, which leaves them out;
# * frees the profiler never sees (a collective's tensors released by gloo's worker after it left the
#   profiler's thread state): they make a rank read high by at most its `unreported_free_bytes`, so the band
#   above the prediction is widened by exactly that rank's figure (0 on a rank where nothing was lost).
TOLERANCE = 0.02


@pytest.mark.slow
@pytest.mark.parametrize("model, options", [
    ("tiny-llama", {"strategy": "ddp"}), ("tiny-gpt2", {"strategy": "ddp"}),
    ("tiny-llama", {"strategy": "fsdp"}), ("tiny-gpt2", {"strategy": "fsdp"}),
    ("tiny-llama", {"strategy": "tp"}), ("tiny-llama", {"strategy": "tp", "sequence_parallel": True}),
    # four processes: 2-D (dp 2 x tp 2) and HSDP (2 nodes of 2); measured 16 B above the prediction on every rank
    # without unseen frees (one fsdp+tp run: rank 0 +384,016 B in the steady state with 416,784 B unseen)
    ("tiny-llama", {"strategy": "fsdp+tp", "tp_size": 2, "nproc": 4}),
    ("tiny-llama", {"strategy": "fsdp", "nnodes": 2, "nproc": 4}),
    # ranks that differ: 1001 vocabulary rows give rank 0 501 and rank 1 500 of the embedding and the head;
    # each rank is compared with its own trace (measured: rank 1 8 B above its prediction)
    ("tiny-llama-vocab-1001", {"strategy": "tp"}),
    # ZeroRedundancyOptimizer's partitions differ (rank 0 holds 516 bytes more AdamW state; measured: each rank
    # 12 B above its own first-iteration prediction, 0 and 64 B in the steady state with 256 and 64 B unseen)
    ("tiny-llama", {"strategy": "zero1"}),
    # LLaVA: its last vision layer takes no gradient (vision_feature_layer -2) yet FSDP2's backward prefetch gathers
    # it (tests/test_fsdp_no_gradient.py); the ranks differ (the 17 vision positions: 9 rows on rank 0, 8 on
    # rank 1). Measured (2026-11-26, -s 32 -b 2): fsdp, both ranks 24 B above their own prediction in both iterations
    ("tiny-llava", {"strategy": "fsdp"}), ("tiny-llava", {"strategy": "zero3", "stage": "2"}),
], ids=["tiny-llama-ddp", "tiny-gpt2-ddp", "tiny-llama-fsdp", "tiny-gpt2-fsdp", "tiny-llama-tp", "tiny-llama-tp-sp",
        "tiny-llama-fsdp+tp", "tiny-llama-hsdp", "tiny-llama-vocab-1001-tp", "tiny-llama-zero1",
        "tiny-llava-fsdp", "tiny-llava-zero3-stage-2"])
def test_per_rank_prediction_matches_gloo_processes(model, options):
    uneven = model in ("tiny-llama-vocab-1001", "tiny-llava") or options["strategy"] == "zero1"  # the ranks store different shapes
    check_ranks_against_gloo(model, options, uneven)


def check_ranks_against_gloo(model: str, options: dict, uneven: bool = False) -> None:
    """``measure`` on ``nproc`` (default 2) gloo processes against ``analyze``, every rank against its own prediction
    within TOLERANCE (plus what the rank lost to unseen frees), never above it; ``uneven``: ranks 0 and 1 differ.
    Also used by tests/test_fsdp1.py."""
    options = {"nproc": 2, **options}
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", **options)
    record = measure(TINY[model], "cpu", opts)
    n = options["nproc"]
    assert record["backend"] == "gloo" and record["world_size"] == n
    assert [r["rank"] for r in record["ranks"]] == list(range(n))
    assert record["iterations"] == record["ranks"][0]["iterations"]  # the top-level figures are rank 0's
    predicted = analyze(TINY[model], opts)
    assert [g["ranks"] for g in predicted.ranks] == ([[0], [1]] if uneven else [list(range(n))])
    group = {r: g for g in predicted.ranks for r in g["ranks"]}
    for index, key in enumerate(("first_iteration_peak", "steady_state_peak")):
        for rank in record["ranks"]:
            p = group[rank["rank"]][key]  # this rank's own prediction
            figures, lost = rank["iterations"][index], rank["unreported_free_bytes"]
            real = figures["peak_allocated_step_thread"]
            assert 0 <= lost and real <= figures["peak_allocated"], (index + 1, rank)
            assert p <= real, (index + 1, p, rank)
            assert real - p <= TOLERANCE * real + lost, (index + 1, p, rank)


def test_a_strategy_is_not_measured_on_cuda():
    opts = TrainingOptions(seq_len=32, batch_size=2, nproc=2, strategy="ddp")
    with pytest.raises(MemgraphError, match="--device cpu"):
        measure(TINY["tiny-llama"], "cuda", opts)


def test_the_memory_guard_counts_every_rank():
    # Two ranks each build the whole model: the lower bound (parameters + gradients + AdamW's two states,
    # float32) is twice one process's. tiny-llama has 202,048 parameters: 4 x 4 x 202,048 = 3,232,768 bytes per
    # rank. With 1.5 ranks' worth usable (USABLE_SHARE 0.8) the two-rank measurement is refused.
    spec = resolve(TINY["tiny-llama"])
    single = TrainingOptions(seq_len=32, batch_size=2, target="cpu")
    two = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, strategy="ddp")
    one_rank = 202_048 * 4 * 4  # parameters, gradients, exp_avg, exp_avg_sq
    available = int(1.5 * one_rank / 0.8)
    check_cpu_measurement_fits(spec, single, available=available * 100)  # far from the bound: passes
    with pytest.raises(MemgraphError, match="x 2 ranks"):
        check_cpu_measurement_fits(spec, two, available=available)
