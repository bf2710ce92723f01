"""--compile with --strategy (memgraph/compiled/strategies.py) and with --lora-rank: : DDP compiled whole (Dynamo's DDPOptimizer), FSDP2
with each fully_shard unit compiled (torchtune's and torchtitan's per-block compile, FSDP2's hooks eager).

The slow tests run the real compiled step on 2 gloo processes (Inductor's C++ backend, g++ builds the kernels) with
the harness of tests/test_distributed_gloo.py, against the per-rank `--target cpu --compile --strategy ... --nproc 2`
prediction. Tolerance: the issue's 2% of each rank's measurement, widened by that rank's unseen frees as in
test_distributed_gloo.py (gloo's worker threads free a collective's tensors off the profiled thread), and the
prediction never above the measurement. Measured (torch 2.13.0+cpu, transformers 5.23, tiny-llama -s 32 -b 2,
AdamW fused, 2026-11-27), first / steady-state peak of the step's thread:
* ddp: predicted 4,042,136 / 4,498,096 B; rank 0 4,042,148 / 4,498,096 B; rank 1 4,042,148 / 4,498,160 B (64 B
  unseen frees);
* fsdp: predicted 2,316,232 / 3,157,276 B; both ranks 2,316,240 / 3,157,284 B (rank 1 147,968 B unseen frees: one
  decoder layer's gathered buffer freed by gloo's worker).
"""

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from tests.test_distributed_gloo import TINY, TOLERANCE


@pytest.mark.slow
@pytest.mark.parametrize("strategy, graphs", [("ddp", "1 graph, 3 graph breaks"), ("fsdp", "2 graphs, 0 graph breaks")])
def test_compiled_per_rank_prediction_matches_gloo_processes(strategy, graphs):
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, strategy=strategy, compile=True)
    record = measure(TINY["tiny-llama"], "cpu", opts)
    predicted = analyze(TINY["tiny-llama"], opts)
    assert [g["ranks"] for g in predicted.ranks] == [[0, 1]]
    group = predicted.ranks[0]
    for index, key in enumerate(("first_iteration_peak", "steady_state_peak")):
        for rank in record["ranks"]:
            p, lost = group[key], rank["unreported_free_bytes"]
            real = rank["iterations"][index]["peak_allocated_step_thread"]
            assert p <= real, (index + 1, p, rank)
            assert real - p <= TOLERANCE * real + lost, (index + 1, p, rank)
    # ddp: the whole model one graph (DDPOptimizer: tiny-llama's 789 KiB of gradients fit one 25 MiB bucket), the
    # breaks at DDP's own forward; fsdp: one graph per decoder layer (the second recompiles on its layer_idx)
    assert any(n.startswith("compiled: torch.compile (mode default)") and graphs in n for n in predicted.notes)


def test_compile_with_ddp_and_fsdp_is_accepted_and_other_strategies_refused():
    for strategy in ("ddp", "fsdp"):
        TrainingOptions(target="cpu", nproc=2, strategy=strategy, compile=True)  # no MemgraphError
    for strategy in ("tp", "zero1"):
        with pytest.raises(MemgraphError, match=f"^--compile with --strategy {strategy} is not modelled: use --strategy ddp or fsdp"):
            TrainingOptions(target="cpu", nproc=2, strategy=strategy, compile=True)


@pytest.mark.slow
def test_compiled_lora_step_matches_the_cpu():
    """PEFT's LoRA model compiled whole (the Hugging Face Trainer's ``torch_compile``), one process on the CPU.
    Measured (torch 2.13.0+cpu, transformers 5.23, PEFT; tiny-llama -s 32 -b 2, r 8, AdamW fused): predicted
    1,956,444 / 1,985,148 B, measured 1,956,476 / 1,985,180 B (32 B above: 0-dim CPU scalars the meta trace does not
    see, as in tests/test_distributed_gloo.py). Tolerance: 2% (the issue's), the prediction never above."""
    kw = dict(seq_len=32, batch_size=2, target="cpu", compile=True, lora_rank=8)
    measured = [it["peak_allocated"] for it in measure(TINY["tiny-llama"], device="cpu", **kw)["iterations"]]
    r = analyze(TINY["tiny-llama"], **kw)
    for p, real in zip((r.first_iteration_peak.bytes, r.steady_state_peak.bytes), measured):
        assert p <= real <= p + TOLERANCE * real, (p, measured)
    assert any(n.startswith("compiled: torch.compile (mode default), 1 graph, 0 graph breaks") for n in r.notes)
