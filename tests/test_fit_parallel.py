"""fit's candidate analyses in forked workers (fit/analyses.py prefetch): the same outcomes as analysing in turn,
also after the parent has run a multi-threaded CPU op (GNU OpenMP's pool does not survive fork: without
the one-thread worker initializer this test hangs)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from memgraph.fit.analyses import Analyses, usable_cpus
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve


@pytest.mark.skipif(usable_cpus() < 2, reason="prefetch runs in the parent with one CPU")
def test_prefetched_outcomes_equal_outcomes_analysed_in_turn():
    torch.randn(10**6).exp().sum()  # an ATen parallel region in the parent before the fork
    spec = resolve("tests/configs/tiny-llama.json")
    base = resolve_defaults(spec, TrainingOptions(seq_len=32, gpu="a100-80gb")).options
    settings = [replace(base, gradient_checkpointing=True), replace(base, precision="bf16-mixed")]
    jobs = [(o, f"setting {i}", "", ()) for i, o in enumerate(settings)]
    parallel, serial = Analyses(spec), Analyses(spec)
    parallel.prefetch(jobs)
    assert [how for _, how, _ in parallel.timings] == ["traced", "traced"]  # done by the workers
    for o, label, _, _ in jobs:
        a, b = parallel.outcome(o, label), serial.outcome(o, label)
        assert a.result.device == b.result.device
        assert a.result.steady_state_peak.bytes == b.result.steady_state_peak.bytes
    assert torch.get_num_threads() >= 1  # the parent's thread count is its own
