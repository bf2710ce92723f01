"""--compile with --strategy ddp/fsdp (memgraph/compiled/strategies.py), --lora-rank and --gradient-checkpointing.

DDP is compiled whole (Dynamo's DDPOptimizer splits its graph at DDP's buckets); FSDP2 has each fully_shard unit
compiled (torchtune's and torchtitan's per-block compile, FSDP2's hooks eager). The slow tests run the real compiled
step (Inductor's C++ backend, g++ builds the kernels), on 2 gloo processes with the harness of
tests/test_distributed_gloo.py for the strategies, against the `--target cpu --compile ...` prediction (per rank).
Tolerance: the issue's 2% of each measurement, widened by a rank's unseen frees as in test_distributed_gloo.py (gloo's
worker threads free a collective's tensors off the profiled thread), and the prediction never above the measurement.
Measured (torch 2.13.0+cpu, transformers 5.23, -s 32 -b 2, AdamW fused, 2026-11-27), first / steady-state peak:
* tiny-llama ddp: predicted 4,042,136 / 4,498,096 B; rank 0 4,042,148 / 4,498,096 B; rank 1 4,042,148 /
  4,498,160 B (64 B unseen frees);
* tiny-llama fsdp: predicted 2,316,232 / 3,157,276 B; both ranks 2,316,240 / 3,157,284 B (rank 1 147,968 B unseen
  frees: one decoder layer's gathered buffer freed by gloo's worker);
* tiny-llama-ddp-buckets ddp (DDPOptimizer splits: 2 graphs): predicted 16,940,832 / 17,105,188 B; both ranks
  16,940,844 / 17,105,188 B;
* tiny-llama LoRA r 8 (one process): predicted 1,956,444 / 1,985,148 B, measured 1,956,476 / 1,985,180 B;
* tiny-llama gradient checkpointing (one process): predicted 3,233,944 / 3,316,380 B, measured 3,233,956 /
  3,316,380 B.
The few bytes above the prediction are 0-dim CPU scalars the meta trace does not see (test_distributed_gloo.py).
"""

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from tests.test_distributed_gloo import TINY, TOLERANCE

DDP_BUCKETS = "tests/configs/tiny-llama-ddp-buckets.json"  # 3.6 MiB of parameters: DDPOptimizer splits at 1 MiB


@pytest.mark.slow
@pytest.mark.parametrize("model, strategy, graphs", [
    (TINY["tiny-llama"], "ddp", "1 graph, 3 graph breaks"),  # 789 KiB of parameters: one bucket, one graph
    (TINY["tiny-llama"], "fsdp", "2 graphs, 0 graph breaks"),  # one per decoder layer (layer 1 recompiles on layer_idx)
    (DDP_BUCKETS, "ddp", "2 graphs, 3 graph breaks"),  # DDPOptimizer's split: a 1 MiB first bucket, then the rest
], ids=["tiny-llama-ddp", "tiny-llama-fsdp", "ddp-buckets-split"])
def test_compiled_per_rank_prediction_matches_gloo_processes(model, strategy, graphs):
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, strategy=strategy, compile=True)
    record = measure(model, "cpu", opts)
    predicted = analyze(model, opts)
    assert [g["ranks"] for g in predicted.ranks] == [[0, 1]]
    group = predicted.ranks[0]
    for index, key in enumerate(("first_iteration_peak", "steady_state_peak")):
        for rank in record["ranks"]:
            p, lost = group[key], rank["unreported_free_bytes"]
            real = rank["iterations"][index]["peak_allocated_step_thread"]
            assert p <= real, (index + 1, p, rank)
            assert real - p <= TOLERANCE * real + lost, (index + 1, p, rank)
    assert any(n.startswith("compiled: torch.compile (mode default)") and graphs in n for n in predicted.notes)


@pytest.mark.slow
@pytest.mark.parametrize("knob, graphs", [({"lora_rank": 8}, "1 graph, 0 graph breaks"),
                                          ({"gradient_checkpointing": True}, "2 graphs, 2 graph breaks")],
                         ids=["lora", "gradient-checkpointing"])
def test_compiled_step_with_lora_or_checkpointing_matches_the_cpu(knob, graphs):
    """LoRA: PEFT's model compiled whole (the Hugging Face Trainer's ``torch_compile``); gradient checkpointing:
    transformers' non-reentrant checkpoint inside the compiled graph (the breaks: transformers' use_cache warning)."""
    kw = dict(seq_len=32, batch_size=2, target="cpu", compile=True, **knob)
    iterations = measure(TINY["tiny-llama"], device="cpu", **kw)["iterations"]
    measured = [it["peak_allocated"] for it in iterations]
    # Dynamo's garbage from the compiling iteration, alive at its peak unless Python's automatic collection ran
    # first (it depends on the process's history: 277,444 B after the suite's earlier files, 0 alone), is what
    # the measurement's gc.collect() after iteration 1 frees (measure/real_step.py collect_compile_garbage)
    garbage = iterations[0]["end_allocated"] - iterations[1]["start_allocated"]
    r = analyze(TINY["tiny-llama"], **kw)
    for p, real, extra in zip((r.first_iteration_peak.bytes, r.steady_state_peak.bytes), measured, (garbage, 0)):
        assert p <= real <= p + TOLERANCE * real + extra, (p, measured, garbage)
    assert any(n.startswith("compiled: torch.compile (mode default)") and graphs in n for n in r.notes)


@pytest.mark.slow
def test_ddp_graph_split_on_the_cuda_target_is_refused_in_one_line():
    with pytest.raises(MemgraphError, match="^--compile --strategy ddp on the cuda target: Dynamo's DDPOptimizer "
                                            "splits this model's graph") as e:
        analyze(DDP_BUCKETS, seq_len=16, batch_size=1, nproc=2, strategy="ddp", compile=True)
    assert "\n" not in str(e.value)


def test_compile_with_ddp_and_fsdp_is_accepted_and_other_strategies_refused():
    for strategy in ("ddp", "fsdp"):
        TrainingOptions(target="cpu", nproc=2, strategy=strategy, compile=True)
        # fsdp measured (2 gloo ranks, tiny-llama -s 32 -b 2): 2,738,076 B predicted, 2,898,340 B real (-5.5%)
        with pytest.raises(MemgraphError, match=f"^--compile with --gradient-checkpointing and --strategy {strategy} "
                                                "is not modelled"):
            TrainingOptions(target="cpu", nproc=2, strategy=strategy, compile=True, gradient_checkpointing=True)
    TrainingOptions(target="cpu", compile=True, gradient_checkpointing=True)  # one process: measured, accepted
    for strategy in ("tp", "zero1"):
        with pytest.raises(MemgraphError, match=f"^--compile with --strategy {strategy} is not modelled: use "
                                                "--strategy ddp or fsdp"):
            TrainingOptions(target="cpu", nproc=2, strategy=strategy, compile=True)
