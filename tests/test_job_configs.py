"""``--config FILE`` (memgraph/job_config/): real example configs of each framework, copied verbatim from the
projects' own examples (tests/fixtures/job_configs/README.md names each source), read into TrainingOptions, and
analysed end to end as a user runs them. Every expected value below is read off the file by hand."""

import json
from pathlib import Path

import pytest

from memgraph.cli import main
from memgraph.errors import MemgraphError
from memgraph.job_config import read_job_config
from memgraph.job_config.apply import flag_name
from tests.conftest import CONFIGS

JOBS = Path(__file__).parent / "fixtures" / "job_configs"
TINY = str(CONFIGS / "tiny-llama.json")

EXPECTED = {
    # micro_batch_size 2, gradient_accumulation_steps 4, sequence_len 2048 (sample_packing: rows full), lora_r 32,
    # lora_alpha 16, lora_dropout 0.05, seven target modules, load_in_4bit, bf16 auto, gradient_checkpointing,
    # adamw_bnb_8bit, flash_attention_2
    "axolotl/qlora-1b.yml": dict(
        model="NousResearch/Llama-3.2-1B", batch_size=2, grad_accum=4, seq_len=2048, lora_rank=32, lora_alpha=16,
        lora_dropout=0.05, lora_targets="gate_proj,down_proj,up_proj,q_proj,v_proj,k_proj,o_proj", quantize="4bit",
        no_kbit_preparation=True, precision="bf16", gradient_checkpointing=True, optimizer="adamw8bit",
        attn_implementation="flash_attention_2"),
    "axolotl/lora-1b.yml": dict(
        model="NousResearch/Llama-3.2-1B", batch_size=2, grad_accum=2, seq_len=2048, lora_rank=16, lora_alpha=32,
        lora_dropout=0.05, precision="bf16", gradient_checkpointing=True, optimizer="adamw8bit"),
    # torch_compile true (handed to TrainingArguments: the whole model compiled); micro_batch_size 1,
    # gradient_accumulation_steps 4, sequence_len 1024, lora_r 32, lora_alpha 64, lora_dropout 0.05,
    # lora_target_linear, bf16 auto, gradient_checkpointing with use_reentrant true, adamw_torch_fused
    "axolotl/llama-3b-ebft-strided-fft.yaml": dict(
        model="meta-llama/Llama-3.2-3B", batch_size=1, grad_accum=4, seq_len=1024, lora_rank=32, lora_alpha=64,
        lora_dropout=0.05, lora_targets="all-linear", precision="bf16", gradient_checkpointing=True,
        checkpoint_impl="reentrant", optimizer="adamw", optimizer_impl="fused", compile=True),
    # torch_compile true with torch_compile_mode max-autotune: CUDA graphs, so not taken (an ignored line)
    "axolotl/8b-lora-fused-attn-compile.yaml": dict(
        model="Qwen/Qwen3-8B", batch_size=1, grad_accum=4, seq_len=4096, lora_rank=32, lora_alpha=64,
        lora_dropout=0.0, lora_targets="all-linear", precision="bf16", gradient_checkpointing=True,
        optimizer="adamw", optimizer_impl="fused", attn_implementation="flash_attention_2", compile=None),
    # LLaMA-Factory: lora_alpha absent -> lora_rank * 2 = 16; lora_target all; checkpointing on and reentrant by
    # default (disable_gradient_checkpointing / use_reentrant_gc absent)
    "llamafactory/qwen3_lora_sft.yaml": dict(
        model="Qwen/Qwen3-4B-Instruct-2507", batch_size=1, grad_accum=8, seq_len=2048, lora_rank=8, lora_alpha=16,
        lora_targets="all-linear", precision="bf16", gradient_checkpointing=True, checkpoint_impl="reentrant"),
    "llamafactory/qwen3_lora_sft_otfq.yaml": dict(
        model="Qwen/Qwen3-4B-Instruct-2507", batch_size=1, grad_accum=8, seq_len=2048, lora_rank=8, quantize="4bit",
        precision="bf16", gradient_checkpointing=True),
    # torchtune: the model from the header's `tune download`; max_seq_len null (no --seq-len taken); output_proj
    # -> o_proj and apply_lora_to_mlp -> gate/up/down_proj; LinearCrossEntropyLoss -> chunked-ce
    "torchtune/1B_lora_single_device.yaml": dict(
        model="meta-llama/Llama-3.2-1B-Instruct", batch_size=4, grad_accum=8, precision="bf16", lora_rank=64,
        lora_alpha=128, lora_targets="q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", lora_dtype="model",
        gradient_checkpointing=False, optimizer="adamw", optimizer_impl="fused", loss="chunked-ce", no_kv_cache=True,
        compile=None),
    "torchtune/1B_full_single_device.yaml": dict(
        model="meta-llama/Llama-3.2-1B-Instruct", batch_size=4, grad_accum=1, precision="bf16",
        optimizer_in_backward=True, optimizer="paged-adamw8bit", loss="chunked-ce", no_kv_cache=True),
    # compile True: each layer compiled on its own and the chunked loss's cross-entropy (torchtune's compile_model
    # and compile_loss); batch_size 4, max_seq_len 1024 (unpacked: padded to the longest), activation checkpointing,
    # AdamW fused, LinearCrossEntropyLoss
    "torchtune/70B_full_multinode.yaml": dict(
        model="meta-llama/Llama-3.3-70B-Instruct", batch_size=4, grad_accum=1, seq_len=1024, precision="bf16",
        gradient_checkpointing=True, checkpoint_impl="non-reentrant", optimizer="adamw", optimizer_impl="fused",
        loss="chunked-ce", no_kv_cache=True, compile=True, compile_blocks=True, compile_loss=True),
    # LitGPT: global_batch_size 8 / (micro_batch_size 2 x 1 device) = 4 accumulation steps; q and v adapters
    "litgpt/lora.yaml": dict(
        model="meta-llama/Llama-2-7b-hf", batch_size=2, grad_accum=4, seq_len=512, precision="bf16", lora_rank=32,
        lora_alpha=16, lora_dropout=0.05, lora_targets="q_proj,v_proj", lora_dtype="model", optimizer="adamw",
        loop="plain"),
    "litgpt/qlora.yaml": dict(
        model="meta-llama/Llama-2-7b-hf", batch_size=2, grad_accum=4, seq_len=512, quantize="nf4",
        no_kbit_preparation=True, lora_rank=32),
    # no fsdp_version: accelerate's FSDP1; fsdp_sharding_strategy FULL_SHARD and fsdp_backward_prefetch BACKWARD_PRE
    # are the defaults of --strategy fsdp1, so only fsdp_use_orig_params true is taken besides
    "accelerate/fsdp.yaml": dict(model=None, strategy="fsdp1", nproc=2, precision="bf16-mixed",
                                 gradient_checkpointing=False, fsdp1_use_orig_params=True),
    "accelerate/multi_gpu.yaml": dict(model=None, strategy="ddp", nproc=2, precision="bf16-mixed"),
    "accelerate/deepspeed.yaml": dict(model=None),  # the DeepSpeed engine is --deepspeed's; here: ignored, said
    # alignment-handbook's TRL recipes: torch_dtype bfloat16 -> bf16 weights; use_reentrant false
    "trl/config_full.yaml": dict(
        model="mistralai/Mistral-7B-v0.1", batch_size=16, grad_accum=1, seq_len=2048, precision="bf16",
        gradient_checkpointing=True, checkpoint_impl="non-reentrant", attn_implementation="flash_attention_2"),
    "trl/config_qlora.yaml": dict(
        model="mistralai/Mistral-7B-v0.1", batch_size=4, grad_accum=2, seq_len=2048, precision="bf16",
        quantize="nf4", lora_rank=16, lora_alpha=16, lora_dropout=0.05,
        lora_targets="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_config_is_read(name):
    job = read_job_config(str(JOBS / name))
    want = dict(EXPECTED[name])
    assert job.model == want.pop("model")
    for option, value in want.items():
        assert job.options.get(option) == value, option
    for option in job.options:  # every value taken is on a line of the report, with its flag
        assert any(f"-> {flag_name(option)}" in line for line in job.taken), option


@pytest.mark.parametrize("fsdp_config, want", [
    # fsdp_version 2 stays FSDP2 fully_shard; an FSDP1 plugin without fsdp_backward_prefetch is accelerate's
    # NO_PREFETCH; the 1-based index names the strategy (2 = SHARD_GRAD_OP)
    ({"fsdp_version": 2}, {"strategy": "fsdp"}),
    ({"fsdp_sharding_strategy": 2}, {"strategy": "fsdp1", "fsdp1_sharding": "SHARD_GRAD_OP",
                                     "fsdp1_backward_prefetch": "NONE"}),
    ({"fsdp_sharding_strategy": "NO_SHARD", "fsdp_backward_prefetch": "BACKWARD_POST"},
     {"strategy": "fsdp1", "fsdp1_sharding": "NO_SHARD", "fsdp1_backward_prefetch": "BACKWARD_POST"}),
])
def test_accelerate_fsdp_version(tmp_path, fsdp_config, want):
    cfg = tmp_path / "fsdp.yaml"
    cfg.write_text(json.dumps({"distributed_type": "FSDP", "num_processes": 4, "fsdp_config": fsdp_config}))
    job = read_job_config(str(cfg))
    assert {k: job.options.get(k) for k in want} == want
    assert "fsdp1_use_orig_params" not in job.options  # absent: accelerate's False


def test_trainer_fsdp_version_1_is_fsdp1(tmp_path):
    # transformers 5.23 training_args.py: fsdp_config version 1 hands accelerate the sharding word, backward_prefetch
    # NO_PREFETCH and use_orig_params true unless given; version 2 (the default) is FSDP2
    cfg = tmp_path / "args.json"
    cfg.write_text(json.dumps({"model_name_or_path": TINY, "fsdp": "shard_grad_op auto_wrap",
                               "fsdp_config": {"version": 1}}))
    opts = read_job_config(str(cfg)).options
    assert (opts["strategy"], opts["fsdp1_sharding"], opts["fsdp1_backward_prefetch"], opts["fsdp1_use_orig_params"]) \
        == ("fsdp1", "SHARD_GRAD_OP", "NONE", True)
    cfg.write_text(json.dumps({"model_name_or_path": TINY, "fsdp": "full_shard auto_wrap"}))
    assert read_job_config(str(cfg)).options["strategy"] == "fsdp"


def test_deepspeed_plugin_is_said_not_silently_dropped():
    job = read_job_config(str(JOBS / "accelerate/deepspeed.yaml"))
    assert any("deepspeed_config_file" in i for i in job.ignored) or job.options.get("deepspeed")
    assert "nproc" not in job.options or "deepspeed" in job.options


def _cache(root: Path, hub_ids) -> None:
    """A Hugging Face cache where each id holds tiny-llama's config.json (the models, not the job, are stand-ins)."""
    tiny = (CONFIGS / "tiny-llama.json").read_text()
    for hub_id in hub_ids:
        repo = root / ("models--" + hub_id.replace("/", "--"))
        (repo / "snapshots" / "c0").mkdir(parents=True)
        (repo / "snapshots" / "c0" / "config.json").write_text(tiny)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("c0")


def _analyse(args, capsys) -> dict:
    assert main(["analyze", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_axolotl_qlora_analyses_with_the_model_it_names(tmp_path, monkeypatch, capsys):
    _cache(tmp_path, ["NousResearch/Llama-3.2-1B"])
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    # -s 32 on the command line wins over the file's sequence_len 2048 (and is said so)
    r = _analyse(["--config", str(JOBS / "axolotl/qlora-1b.yml"), "-s", "32"], capsys)
    assert r["model"] == "NousResearch/Llama-3.2-1B"
    assert r["batch"][0] == "input_ids=int64[2,32]"  # micro_batch_size 2
    opts = r["options"]
    assert (opts["quantize"], opts["lora_rank"], opts["optimizer"], opts["grad_accum"]) == ("4bit", 32, "adamw8bit", 4)
    assert any("replaces the file's 2048" in line for line in r["job_config"])
    assert r["job_config"][0].endswith("read as axolotl")


def test_padding_free_concatenates_the_batch(tmp_path, capsys):
    """TRL's padding_free: 4 samples of max_length 32 are one row of 4 x 32 = 128 tokens."""
    cfg = tmp_path / "sft.yaml"
    cfg.write_text(f"model_name_or_path: {TINY}\nper_device_train_batch_size: 4\nmax_length: 32\n"
                   "padding_free: true\n")
    r = _analyse(["--config", str(cfg)], capsys)
    assert r["batch"][0] == "input_ids=int64[1,128]"
    assert r["options"]["batch_size"] == 1 and r["options"]["seq_len"] == 128


def test_model_beside_the_file_names_the_model(capsys):
    r = _analyse([TINY, "--config", str(JOBS / "accelerate/fsdp.yaml"), "-s", "16"], capsys)
    assert r["options"]["strategy"] == "fsdp1" and r["options"]["nproc"] == 2
    assert any("FSDP1 MixedPrecision" in a for a in r["assumptions"])  # accelerate's FSDP1 plugin for bf16
    assert r["job_config"][1] == f"model {TINY} given beside the file"


def test_config_errors_are_one_line(tmp_path, capsys):
    bad = tmp_path / "x.yaml"
    bad.write_text("foo: 1\n")
    assert main(["analyze", "--config", str(bad)]) == 2
    assert "not a training config memgraph reads" in capsys.readouterr().err
    assert main(["analyze", "--config", str(JOBS / "accelerate/fsdp.yaml")]) == 2  # names no model
    assert "names no model" in capsys.readouterr().err
    fsdp = tmp_path / "args.json"
    fsdp.write_text(json.dumps({"model_name_or_path": TINY, "fsdp": "full_shard auto_wrap"}))
    assert main(["analyze", "--config", str(fsdp)]) == 2
    assert "pass --nproc N" in capsys.readouterr().err
    with pytest.raises(MemgraphError, match="not found"):
        read_job_config(str(tmp_path / "missing.yaml"))


# accelerate's DeepSpeed example names ../deepspeed_config_templates/zero_stage1_config.json, relative to where
# `accelerate launch` runs; the template is not shipped beside the fixture, so the file's DeepSpeed plugin reaches
# --deepspeed and ends in one line naming that path (the engine itself is tested in tests/test_deepspeed.py)
ANALYSED = sorted(n for n in EXPECTED if n != "accelerate/deepspeed.yaml")


def test_accelerate_deepspeed_example_reaches_deepspeed(capsys):
    code = main(["analyze", str(CONFIGS / "tiny-llama.json"), "--config", str(JOBS / "accelerate/deepspeed.yaml"),
                 "-s", "32"])
    err = capsys.readouterr().err
    assert code == 2 and err == ("memgraph: error: --deepspeed ../deepspeed_config_templates/zero_stage1_config.json: "
                                 "no such file: pass the path of your ds_config.json\n")


@pytest.mark.slow
@pytest.mark.parametrize("name", ANALYSED)
def test_every_example_config_analyses(name, tmp_path, monkeypatch, capsys):
    """Each example as a user runs it; the zoo's 7B models are replaced by tiny-llama given beside the file, the
    other named models by a Hugging Face cache holding tiny-llama's config; -s 32 keeps the trace small."""
    named = EXPECTED[name]["model"]
    _cache(tmp_path, [named] if named and named != "meta-llama/Llama-2-7b-hf" else [])
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    model = [TINY] if named in (None, "meta-llama/Llama-2-7b-hf") else []
    r = _analyse([*model, "--config", str(JOBS / name), "-s", "32"], capsys)
    assert r["job_config"] and r["steady_state_peak"]["bytes"] > 0


def test_training_arguments_as_the_trainer_writes_them(tmp_path):
    """transformers' own TrainingArguments.to_json_string() (5.23), the JSON a Trainer run logs and saves."""
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path / "out"), per_device_train_batch_size=2,
                             gradient_accumulation_steps=4, gradient_checkpointing=True,
                             gradient_checkpointing_kwargs={"use_reentrant": True}, optim="adamw_torch",
                             report_to="none")
    path = tmp_path / "training_args.json"
    path.write_text(args.to_json_string())
    job = read_job_config(str(path))
    assert job.format == "Hugging Face TrainingArguments / TRL SFTConfig" and job.model is None
    assert job.options == {"batch_size": 2, "grad_accum": 4, "gradient_checkpointing": True,
                           "checkpoint_impl": "reentrant", "optimizer": "adamw", "optimizer_impl": "foreach"}


@pytest.mark.parametrize("kwargs, taken, ignored", [
    ({"torch_compile": True}, {"compile": True}, None),
    ({"torch_compile_mode": "max-autotune-no-cudagraphs"},  # a mode alone turns torch_compile on (__post_init__)
     {"compile": True, "compile_mode": "max-autotune-no-cudagraphs"}, None),
    ({"torch_compile": True, "torch_compile_mode": "reduce-overhead"}, {}, "captures CUDA graphs"),
    ({"torch_compile_backend": "aot_eager"}, {}, "backend 'aot_eager': memgraph models Inductor only"),
], ids=["on", "mode", "cuda-graphs", "backend"])
def test_trainer_torch_compile_as_the_trainer_writes_it(tmp_path, kwargs, taken, ignored):
    """transformers' own TrainingArguments with its torch.compile fields, as to_json_string() writes them."""
    from transformers import TrainingArguments

    args = TrainingArguments(output_dir=str(tmp_path / "out"), report_to="none", **kwargs)
    path = tmp_path / "training_args.json"
    path.write_text(args.to_json_string())
    job = read_job_config(str(path))
    assert {k: v for k, v in job.options.items() if k.startswith("compile")} == taken
    if ignored is None:
        assert not any("compile" in line for line in job.ignored)
    else:
        assert [line for line in job.ignored if "torch_compile" in line and ignored in line], job.ignored


def test_a_compile_memgraph_does_not_model_with_the_file_is_ignored_not_refused():
    """axolotl's Gemma 4 QLoRA example compiles a 4-bit model: --compile with --quantize is refused on the command
    line, so the file's torch_compile is listed as ignored and the rest of the file is taken."""
    job = read_job_config(str(JOBS / "axolotl/26b-a4b-moe-qlora.yaml"))
    assert job.options["quantize"] == "4bit" and "compile" not in job.options
    assert "torch_compile true: --compile with --quantize is not modelled; the prediction is without torch.compile" \
        in job.ignored


@pytest.mark.slow
def test_the_command_line_can_make_the_files_compile_unmodelled(capsys):
    """torchtune's 70B multinode recipe compiles with activation checkpointing; --strategy fsdp beside it makes that
    unmodelled (--compile with checkpointing and a strategy is refused): the compile is dropped with its lines and
    said, not refused, as the file cannot be told to drop it."""
    r = _analyse([TINY, "--config", str(JOBS / "torchtune/70B_full_multinode.yaml"), "-s", "32", "--nproc", "2",
                  "--strategy", "fsdp", "--loss", "auto"], capsys)
    lines = r["job_config"]
    assert not [line for line in lines if "-> --compile" in line]
    assert ("ignored: compile (with the command line's options) true: --compile with --gradient-checkpointing and "
            "--strategy fsdp is not modelled; the prediction is without torch.compile") in lines
    assert r["options"]["compile"] is False and r["options"]["compile_blocks"] is False


def test_a_bad_value_in_the_file_is_one_line(tmp_path, capsys):
    cfg = tmp_path / "ax.yml"
    cfg.write_text(f"base_model: {TINY}\nadapter: lora\nlora_r: 8\nlora_dropout: lots\n")
    assert main(["analyze", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "lora_dropout 'lots' is not a number" in err
