"""`--deepspeed ds_config.json`: DeepSpeed's own engine traced on meta as one rank (memgraph/ds_engine).

Hand tests read the recorded storages of a trace of tiny-llama (2 layers, hidden 64, 202,048 parameters: embedding
and head 64,000 each; per layer q 4,096, k 2,048, v 2,048, o 4,096, gate/up/down 8,192 each, two norms of 64; the
final norm 64) at 2 ranks, bf16. The ground truth runs DeepSpeed for real on the CPU (DS_ACCELERATOR=cpu, gloo, one
process per rank, each rank's CPU allocator measured by torch.profiler; memgraph/measure/distributed.py) and is slow.
"""

import json

import pytest

pytest.importorskip("deepspeed")

from memgraph.api import analyze, analyze_traced, measure  # noqa: E402
from memgraph.errors import MemgraphError  # noqa: E402
from memgraph.model_spec.options import TrainingOptions  # noqa: E402
from tests.conftest import TINY_LLAMA_PARAMETERS  # noqa: E402

LLAMA = "tests/configs/tiny-llama.json"
GPT2 = "tests/configs/tiny-gpt2.json"
CONFIGS = "tests/configs/deepspeed"


def _config(tmp_path, zero: dict, **extra) -> str:
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
                                "bf16": {"enabled": "auto"}, "zero_optimization": zero, **extra}))
    return str(path)


def _trace(config: str, nproc: int = 2):
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=nproc, deepspeed=config,
                           precision="bf16-mixed")
    return analyze_traced(LLAMA, opts)


def _alive_at_end(trace, iteration: int) -> int:
    end = trace.iteration_bounds[iteration - 1][1]
    return sum(s.nbytes for s in trace.log.storages
               if s.alloc_event < end and (s.free_event is None or s.free_event >= end))


def test_tiny_llama_parameter_count():
    assert TINY_LLAMA_PARAMETERS == 202_048


def test_prediction_builds_no_deepspeed_op(tmp_path, monkeypatch):
    # DeepSpeed's TorchBackend builds its shared-memory comm op (ShareMemCommBuilder) with g++ on the CPU accelerator
    # the first time on a machine: about 50 CPU s on 2 cores, which the fast suite paid on every fresh machine (CI's)
    # before memgraph/private_api.py deepspeed_on_meta answered build_shm_op() with None for the traced run.
    # torch.utils.cpp_extension builds under TORCH_EXTENSIONS_DIR, read at each load: an empty one here.
    extensions = tmp_path / "torch_extensions"
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(extensions))
    result, _ = _trace(_config(tmp_path, {"stage": 2, "reduce_bucket_size": 20_000, "allgather_bucket_size": 20_000}))
    assert result.steady_state_peak.bytes > 0
    assert not extensions.exists() or not any(extensions.iterdir()), sorted(extensions.rglob("*"))[:5]


def test_reduce_buckets_have_the_configured_size_twice_with_overlap_comm(tmp_path):
    # ZeRO-2, contiguous_gradients (default True): each backward allocates its reduce bucket of reduce_bucket_size
    # elements in bf16, 20,000 x 2 B = 40,000 B, and a second one with overlap_comm (deepspeed 0.19.8
    # stage_1_and_2.py setup_buckets: buf_0, and buf_1 "double buffers" with overlap_comm); 2 iterations
    config = _config(tmp_path, {"stage": 2, "reduce_bucket_size": 20_000, "allgather_bucket_size": 20_000,
                                "overlap_comm": True})
    result, trace = _trace(config)
    buckets = [s for s in trace.log.storages if s.shape == (20_000,)]
    assert [(s.dtype, s.nbytes, s.phase, s.iteration) for s in buckets] == [
        ("bfloat16", 40_000, "backward", 1), ("bfloat16", 40_000, "backward", 1),
        ("bfloat16", 40_000, "backward", 2), ("bfloat16", 40_000, "backward", 2)]
    assert "bit16_groups_flat 394.62 KiB" in "\n".join(result.notes)  # 202,048 bf16 = 404,096 B, flat over both ranks


@pytest.mark.slow
def test_zero3_persistence_threshold_keeps_small_parameters_whole(tmp_path):
    # stage3_param_persistence_threshold 5,000: parameters of fewer elements stay gathered on every rank (ds_persist):
    # per layer q 4,096, k 2,048, v 2,048, o 4,096 and two norms of 64 = 12,416, x 2 layers + the final norm 64 =
    # 24,896 elements, 49,792 B in bf16, alive after the step where threshold 0 releases every gathered parameter.
    # reduce_bucket_size 20,000 for both (the default 5e8 would be a 1 GB bucket).
    zero = {"stage": 3, "reduce_bucket_size": 20_000, "stage3_prefetch_bucket_size": 20_000}
    _, none = _trace(_config(tmp_path, {**zero, "stage3_param_persistence_threshold": 0}))
    result, some = _trace(_config(tmp_path, {**zero, "stage3_param_persistence_threshold": 5_000}))
    persistent = 2 * (4_096 + 2_048 + 2_048 + 4_096 + 2 * 64) + 64
    assert persistent == 24_896
    for iteration in (1, 2):
        assert _alive_at_end(some, iteration) - _alive_at_end(none, iteration) == persistent * 2
    assert "ds_persist parameters 48.62 KiB (13 parameters" in "\n".join(result.notes)  # 49,792 B


def test_zero3_threshold_0_partitions_every_parameter(tmp_path):
    # stage3_param_persistence_threshold 0: no parameter is kept whole (ds_persist), each is partitioned over the
    # 2 ranks (every count is even: no padding), 202,048 / 2 = 101,024 elements on this rank. Alive at the end of
    # each iteration (the gathered parameters released): the bf16 partitions, defragmented into lp_param_buffer,
    # 101,024 x 2 = 202,048 B; the bf16 gradient partitions (grad_partitions_flat_buffer) 202,048 B; the fp32 master
    # partition and AdamW's exp_avg and exp_avg_sq, 3 x 101,024 x 4 = 1,212,288 B; the bf16 reduce bucket of
    # reduce_bucket_size 20,000 elements, 40,000 B: 1,656,384 B, the storages of 40,000 B and more. Besides them
    # only small ones (torch 2.13 + transformers 5.23: the batch, input_ids and labels, 2 x 2 x 32 x 8 = 1,024 B, the
    # rotary inv_freq buffers 2 x 32 B, AdamW's 4-byte step, stage3.py's 1-byte inf_or_nan_tracker and an 8-byte
    # float64 scalar: 1,101 B; 4 B more with torch 2.12 + transformers 5.6): under 2,048 B, so no gathered
    # parameter (the smallest linear weight, k_proj, is 2,048 x 2 = 4,096 B) is left
    zero = {"stage": 3, "reduce_bucket_size": 20_000, "stage3_prefetch_bucket_size": 20_000,
            "stage3_param_persistence_threshold": 0}
    result, trace = _trace(_config(tmp_path, zero))
    deepspeed = 202_048 + 202_048 + 3 * 101_024 * 4 + 20_000 * 2
    assert deepspeed == 1_656_384
    for iteration in (1, 2):
        end = trace.iteration_bounds[iteration - 1][1]
        alive = [s.nbytes for s in trace.log.storages
                 if s.alloc_event < end and (s.free_event is None or s.free_event >= end)]
        assert sum(n for n in alive if n >= 40_000) == deepspeed
        assert sum(n for n in alive if n < 40_000) < 2_048
    notes = "\n".join(result.notes)
    # 202,048 B = 197.31 KiB, 404,096 B = 394.62 KiB
    assert "lp_param_buffer 197.31 KiB" in notes and "fp32_partitioned_groups_flat 394.62 KiB" in notes
    assert "grad_partitions_flat_buffer 197.31 KiB" in notes and "ds_persist" not in notes


def test_bf16_zero1_keeps_a_full_fp32_gradient_buffer_on_every_rank(tmp_path):
    # bf16 + ZeRO-1 + fp32 gradient accumulation: DeepSpeed picks its BF16_Optimizer (deepspeed 0.19.8
    # runtime/engine.py _do_optimizer_sanity_check), whose fp32_groups_gradients_flat holds every parameter's
    # gradient in fp32 on every rank: 202,048 x 4 B = 808,192 B, kept to the end of the run
    config = _config(tmp_path, {"stage": 1}, data_types={"grad_accum_dtype": "fp32"})
    result, trace = _trace(config)
    full = [s for s in trace.log.storages if s.nbytes == TINY_LLAMA_PARAMETERS * 4 and s.dtype == "float32"]
    assert len(full) == 1 and full[0].free_event is None and full[0].role.value == "gradient"
    assert "fp32_groups_gradients_flat 789.25 KiB" in "\n".join(result.notes)  # 808,192 B


def test_an_fp16_config_runs_on_the_cuda_target(tmp_path):
    # DeepSpeed's CPU accelerator refuses fp16 where the host CPU lacks mkldnn fp16 (deepspeed 0.19.8 engine.py
    # "Type fp16 is not supported on your device"); the target GPU has it. The fp16 flat group: 202,048 x 2 B
    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_micro_batch_size_per_gpu": "auto", "fp16": {"enabled": "auto"},
                                "zero_optimization": {"stage": 2, "reduce_bucket_size": 20_000,
                                                      "allgather_bucket_size": 20_000}}))
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cuda", nproc=2, deepspeed=str(path),
                           precision="fp16-mixed")
    result, trace = analyze_traced(LLAMA, opts)
    assert "fp16.enabled = True (--precision)" in "\n".join(result.notes)
    assert [s.nbytes for s in trace.log.storages if s.dtype == "float16" and s.shape == (202_048,)] == [404_096]


def test_auto_values_are_resolved_as_the_trainer_does(tmp_path):
    # transformers 5.23 integrations/deepspeed.py: train_batch_size = world x micro x accumulation = 2 x 2 x 1;
    # ZeRO-3's hidden-size keys from hidden_size 64: 64² = 4,096, int(0.9 x 64²) = 3,686, 10 x 64 = 640
    from memgraph.ds_engine.config import resolve
    from transformers import AutoConfig

    path = tmp_path / "ds_config.json"
    path.write_text(json.dumps({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
                                "bf16": {"enabled": "auto"}, "gradient_clipping": "auto",
                                "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto",
                                                      "stage3_prefetch_bucket_size": "auto",
                                                      "stage3_param_persistence_threshold": "auto"}}))
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, deepspeed=str(path),
                           precision="bf16-mixed")
    cfg = resolve(str(path), opts, AutoConfig.from_pretrained(LLAMA), 2)
    assert dict((k, v) for k, v, _ in cfg.resolved) == {
        "train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, "bf16.enabled": True, "gradient_clipping": 1.0,
        "zero_optimization.reduce_bucket_size": 4_096, "zero_optimization.stage3_prefetch_bucket_size": 3_686,
        "zero_optimization.stage3_param_persistence_threshold": 640}


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON"),
    ("[1]", "a DeepSpeed config is a JSON object"),
    ('{"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme"}}}', "nvme is not modelled"),
    ('{"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": 2}}', "train_micro_batch_size_per_gpu=8"),
    # no batch size at all: DeepSpeed's own check in deepspeed.initialize (deepspeed 0.19.8 runtime/config.py
    # _set_batch_related_parameters), named with the config, not as the model's failure
    ('{"zero_optimization": {"stage": 2}}', r"--deepspeed .*ds_config.json: deepspeed.initialize refused the config: "
     "AssertionError: Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"),
])
def test_bad_configs_are_one_line(tmp_path, content, message):
    path = tmp_path / "ds_config.json"
    path.write_text(content)
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=2, deepspeed=str(path))
    with pytest.raises(MemgraphError, match=message) as info:
        analyze(LLAMA, opts)
    assert "\n" not in str(info.value)


def test_deepspeed_and_strategy_exclude_each_other():
    with pytest.raises(MemgraphError, match="pass one of them"):
        TrainingOptions(nproc=2, strategy="fsdp", deepspeed=f"{CONFIGS}/zero2.json")


# Ground truth: the per-rank cpu prediction within 2% of DeepSpeed run for real by N gloo processes
# (DS_ACCELERATOR=cpu), compared with each rank's step-thread peak by address without gloo's staging
# (`peak_allocated_step_thread_less_staging`, memgraph/measure/distributed.py): gloo adds buffers NCCL does not have,
# allocated on the step thread inside the collective (`_reduce_scatter_base_` clones its input, `_allgather_base_`
# gathers into its own buffer): measured ZeRO-3 tiny-llama 2 ranks, first iteration, 127,988 B on rank 0 and
# 152,820 B on rank 1 (the old xfail's 5-12%). The band above the prediction is widened by the rank's
# `unreported_free_bytes` (tensors a collective's Work released on gloo's worker thread, which the profiler never
# sees freed; found by address), as tests/test_distributed_gloo.py does: ZeRO-1 2 ranks measured 2,149,596 B on rank 0,
# 128,012 B above the prediction with 128,000 B unreported (the earlier xfail's 256,012 B: twice that). Measured
# 2026-11-27 (torch 2.13.0, transformers 5.23, deepspeed 0.19.8, -s 32 -b 2, bf16), predicted vs less-staging
# (first iteration / steady state):
#   tiny-llama ZeRO-2, 1 rank: 3,637,968 / 4,446,164 B vs 3,637,980 / 4,446,164 B
#   tiny-llama ZeRO-2, 2 ranks: 2,021,584 / 2,734,936 B vs 2,021,596 / 2,734,936 B on both ranks
#   tiny-gpt2 ZeRO-2, 2 ranks: 2,255,632 / 2,977,560 B vs 2,254,400 / 2,976,328 B on both ranks (1,232 B above)
#   tiny-llama ZeRO-1, 2 ranks: 2,021,584 / 2,734,936 B vs rank 0 2,149,596 / 2,862,936 B (128,000 B unreported),
#     rank 1 2,021,596 / 2,734,936 B
#   tiny-llama ZeRO-3, 1 rank: 4,082,081 / 4,486,185 B vs 4,082,093 / 4,486,185 B (nothing unreported)
#   tiny-llama ZeRO-3, 2 ranks: 2,061,601 / 3,179,037 B vs rank 0 2,069,805 / 3,187,229 B (8,200 B unreported),
#     rank 1 2,074,029 / 3,191,957 B (70,648 B unreported)
#   tiny-llama ZeRO-3, 4 ranks: 1,562,641 / 2,370,845 B vs the same on ranks 1 and 2, rank 0 +20,480 / +20,480 B
#     (32,896 B unreported), rank 3 +20,864 / +20,864 B (148,864 B unreported)
#   tiny-gpt2 ZeRO-3, 2 ranks: 2,295,633 / 3,378,525 B vs rank 0 2,422,913 / 3,378,773 B (315,208 B unreported),
#     rank 1 2,430,849 / 3,514,205 B (235,728 B unreported): the first iteration's 5.5% is inside the band only by
#     the unreported bytes; which of them were alive at the peak is not known
# ZeRO-2 with offload_optimizer to the CPU (zero2-offload.json): on the CPU the "device" and the host are one
# allocator, so each rank's measurement is the TOTAL of the prediction's device and host memory, which the cpu
# target counts together (memgraph/ds_engine/offload.py); the same 2% band. Measured 2026-11-27, same stack:
#   tiny-llama, 1 rank: 4,298,232 / 5,415,512 B vs 4,298,244 / 5,415,512 B (nothing unreported)
#   tiny-llama, 2 ranks: 2,788,880 / 3,597,080 B vs 2,788,880 / 3,597,080 B on both ranks (nothing unreported)
#   tiny-llama, 4 ranks: 2,283,760 / 2,687,864 B vs the same on all 4 ranks (nothing unreported)
#   tiny-gpt2, 2 ranks: 3,053,072 / 3,775,000 B vs 3,051,840 / 3,773,768 B on both ranks (1,232 B above, as without
#     the offload; rank 1 128,000 B unreported)
#   tiny-llama ZeRO-3 + offload (zero3-offload.json), 1 rank: 4,082,237 / 5,199,513 B vs 4,082,249 / 5,199,513 B;
#     2 ranks (not a row): 53,504 B (rank 0) and 128,384 B (rank 1) below the measurement in both iterations,
#     inside the band only by the ranks' 78,080 and 177,536 B unreported
#   tiny-llama ZeRO-3 + offload_param to the CPU (zero3-offload-param.json, persistence threshold 0: every parameter
#     partitioned, its 16-bit partitions in host memory, fetched per layer): 1 rank 4,082,081 / 4,486,185 B vs
#     4,082,093 / 4,486,185 B; 2 ranks 2,061,601 / 3,179,037 B vs 2,061,613 / 3,179,037 B on both ranks (nothing
#     unreported). Measured 2026-11-27, same stack.
#   tiny-llama, 2 ranks, DeepSpeedCPUAdam ("optimizer" section, zero2-offload-cpuadam.json): 2,788,880 / 3,597,076 B
#     vs the same on both ranks. The real run builds DeepSpeed's cpu_adam op with g++ the first time (227 s here,
#     cached in ~/.cache/torch_extensions); the prediction never builds it.
TOLERANCE = 0.02


def _assert_per_rank_within_band(record, group) -> None:
    for index, key in enumerate(("first_iteration_peak", "steady_state_peak")):
        for rank in record["ranks"]:
            figures, lost = rank["iterations"][index], rank["unreported_free_bytes"]
            real = figures["peak_allocated_step_thread_less_staging"]
            assert 0 <= lost and real <= figures["peak_allocated_step_thread"], (index + 1, rank)
            assert -TOLERANCE * real <= real - group[key] <= TOLERANCE * real + lost, (index + 1, group[key], rank)


@pytest.mark.slow
@pytest.mark.parametrize("model, config, nproc", [
    (LLAMA, "zero1.json", 2), (LLAMA, "zero2.json", 2), (GPT2, "zero1.json", 2), (GPT2, "zero2.json", 2),
    (LLAMA, "zero2.json", 1), (LLAMA, "zero2.json", 4),
    (LLAMA, "zero3.json", 1), (LLAMA, "zero3.json", 2), (LLAMA, "zero3.json", 4), (GPT2, "zero3.json", 2),
    (LLAMA, "zero2-offload.json", 1), (LLAMA, "zero2-offload.json", 2), (LLAMA, "zero2-offload.json", 4),
    (GPT2, "zero2-offload.json", 2), (LLAMA, "zero2-offload-cpuadam.json", 2), (LLAMA, "zero3-offload.json", 1),
    (LLAMA, "zero3-offload-param.json", 1), (LLAMA, "zero3-offload-param.json", 2),
])
def test_per_rank_prediction_matches_deepspeed_on_gloo(model, config, nproc):
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", nproc=nproc, deepspeed=f"{CONFIGS}/{config}",
                           precision="bf16-mixed")
    record = measure(model, "cpu", opts)
    predicted = analyze(model, opts)
    assert [g["ranks"] for g in predicted.ranks] == [list(range(nproc))]
    _assert_per_rank_within_band(record, predicted.ranks[0])


def test_a_missing_deepspeed_is_one_line(monkeypatch):
    import sys

    from memgraph.ds_engine.run import import_deepspeed

    monkeypatch.setitem(sys.modules, "deepspeed", None)  # import deepspeed raises ImportError
    with pytest.raises(MemgraphError, match=r"pip install 'memgraph\[deepspeed\]'"):
        import_deepspeed()


@pytest.mark.slow
def test_llama_3_8b_zero3_with_auto_values_lists_them_and_the_buffers():
    # the command; measured 45 s wall (13 s CPU) on the 2-core test machine, 13.5 s wall (12.5 s CPU) idle. hidden_size 4,096:
    # reduce_bucket_size 4,096² = 16,777,216, prefetch int(0.9 x 4,096²) = 15,099,494, persistence 10 x 4,096 = 40,960
    opts = TrainingOptions(seq_len=4096, nproc=8, deepspeed=f"{CONFIGS}/zero3-auto.json", precision="bf16-mixed",
                           gpu="a100-80gb")
    result = analyze("llama-3-8b", opts)
    notes = "\n".join(result.notes)
    for resolved in ("zero_optimization.reduce_bucket_size = 16777216 (hidden_size²)",
                     "zero_optimization.stage3_prefetch_bucket_size = 15099494",
                     "zero_optimization.stage3_param_persistence_threshold = 40960", "bf16.enabled = True"):
        assert resolved in notes
    # this rank's 1/8 of 8,030,261,248 parameters: fp32 master partition ~ 4 x 8.03e9 / 8 B = 3.74 GiB
    assert "fp32_partitioned_groups_flat 3.74 GiB" in notes and "lp_param_buffer 1.87 GiB" in notes
    assert "ipg_buckets 32.00 MiB" in notes  # ZeRO-3's bf16 reduce bucket: 16,777,216 x 2 B
    assert result.parameters == 8_030_261_248
