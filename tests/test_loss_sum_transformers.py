"""--loss sum on a transformers model: logits.sum().backward() as benchmark scripts run it (no labels passed,
so the head computes no cross-entropy)."""

from pathlib import Path

import pytest

from memgraph.api import analyze_traced, measure
from memgraph.model_spec.options import TrainingOptions

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")


def _ops(opts):
    _, trace = analyze_traced(TINY, opts)
    return {op.op for op in trace.log.ops}


def test_no_cross_entropy_with_loss_sum():
    plain = _ops(TrainingOptions(seq_len=16, target="cpu"))
    summed = _ops(TrainingOptions(seq_len=16, target="cpu", loss="sum"))
    assert any("nll_loss" in op for op in plain)
    assert not any("nll_loss" in op or "log_softmax" in op for op in summed)
    assert any(op.startswith("aten.sum") for op in summed)


@pytest.mark.slow
def test_loss_sum_matches_the_cpu_allocator():
    # The cpu target is exact on dense transformers (validate: 0.00%); 0.5% leaves room for allocator rounding.
    opts = TrainingOptions(seq_len=32, target="cpu", loss="sum")
    result, _ = analyze_traced(TINY, opts)
    record = measure(TINY, "cpu", opts)
    measured = max(it["peak_allocated"] for it in record["iterations"][1:])
    assert abs(result.steady_state_peak.bytes - measured) / measured < 0.005
