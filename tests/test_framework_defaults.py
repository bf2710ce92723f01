"""The frameworks' defaults, applied and stated (memgraph/model_spec/framework_defaults.py), each one flag away
from the old behaviour; and the warning for sizing fields a user's config.json leaves to transformers."""

import json

import pytest

from memgraph.api import analyze
from memgraph.errors import MemgraphError
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS

TINY = str(CONFIGS / "tiny-llama.json")


def test_fsdp_bf16_mixed_takes_accelerates_policy_by_default():
    spec = resolve(TINY)
    base = dict(nproc=2, strategy="fsdp", precision="bf16-mixed")
    got = resolve_defaults(spec, TrainingOptions(**base))
    assert got.options.fsdp_mixed_precision is True
    assert any("MixedPrecisionPolicy" in a and "accelerate 1.15" in a for a in got.assumptions)
    old = resolve_defaults(spec, TrainingOptions(**base, fsdp_autocast=True))
    assert old.options.fsdp_mixed_precision is False and not any("MixedPrecisionPolicy" in a for a in old.assumptions)
    assert resolve_defaults(spec, got.options).options == got.options  # idempotent (memgraph fit resolves twice)
    with pytest.raises(MemgraphError, match="--fsdp-autocast"):
        TrainingOptions(precision="bf16-mixed", fsdp_autocast=True)  # no sharded strategy


def test_fsdp_default_traces_the_policy_and_fsdp_autocast_the_old_step():
    """The default is the step --fsdp-mixed-precision traced (equal peaks); --fsdp-autocast the one before, with
    autocast's bfloat16 copies of the gathered float32 weights (autocast_cache) that the policy does not make."""
    kw = dict(seq_len=16, nproc=2, strategy="fsdp", precision="bf16-mixed")
    default = analyze(TINY, **kw)
    policy = analyze(TINY, **kw, fsdp_mixed_precision=True)
    old = analyze(TINY, **kw, fsdp_autocast=True)
    assert default.steady_state_peak.bytes == policy.steady_state_peak.bytes
    assert default.steady_state_peak.bytes != old.steady_state_peak.bytes
    assert default.steady_state_peak.by_category["autocast_cache"] == 0  # the policy casts, autocast finds bf16
    assert old.steady_state_peak.by_category["autocast_cache"] > 0  # 90,112 B measured on tiny-llama, 16 tokens


def test_qlora_assumes_peft_kbit_preparation():
    spec = resolve(TINY)
    q = dict(quantize="4bit", lora_rank=4, precision="bf16")
    got = resolve_defaults(spec, TrainingOptions(**q))
    assert (got.options.gradient_checkpointing, got.options.checkpoint_impl) == (True, "reentrant")
    assert any("prepare_model_for_kbit_training" in a and "use_reentrant=True" in a for a in got.assumptions)
    mine = resolve_defaults(spec, TrainingOptions(**q, gradient_checkpointing=True))  # the user's variant stays
    assert mine.options.checkpoint_impl == "non-reentrant"
    old = resolve_defaults(spec, TrainingOptions(**q, no_kbit_preparation=True))
    assert old.options.gradient_checkpointing is False
    assert not any("prepare_model_for_kbit_training" in a for a in old.assumptions)
    with pytest.raises(MemgraphError, match="--no-kbit-preparation"):
        TrainingOptions(no_kbit_preparation=True)


def test_precision_is_always_stated():
    spec = resolve(TINY)
    assert "precision fp32 (TrainingArguments bf16=False, fp16=False)" in resolve_defaults(spec, TrainingOptions()).assumptions
    assert "precision bf16" in resolve_defaults(spec, TrainingOptions(precision="bf16")).assumptions


def test_fp32_says_what_from_pretrained_would_load(tmp_path):
    data = json.loads((CONFIGS / "tiny-llama.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**data, "dtype": "bfloat16"}))  # a bfloat16 checkpoint
    said = resolve_defaults(resolve(str(path)), TrainingOptions()).assumptions[-1]
    assert "from_pretrained's default dtype='auto' loads this checkpoint's bfloat16: --precision bf16" in said


def test_config_json_fields_left_to_defaults_warn(tmp_path):
    data = json.loads((CONFIGS / "tiny-llama.json").read_text())
    del data["intermediate_size"], data["vocab_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    spec = resolve(str(path))
    # LlamaConfig's defaults in transformers 5.23: intermediate_size 11008, vocab_size 32000
    assert [w.split(": ")[0] for w in spec.warnings] == [f"{path} has no 'vocab_size'", f"{path} has no 'intermediate_size'"]
    assert "fills in 32000" in spec.warnings[0] and "fills in 11008" in spec.warnings[1]
    assert resolve(TINY).warnings == []  # a complete config: nothing to say
    assert resolve("llama-2-7b").warnings == []  # zoo configs are published files


def test_bitsandbytes_optimizer_not_said_to_be_foreach():
    """bitsandbytes' 8-bit AdamW has one step of its own: the header said 'adamw8bit foreach (PyTorch's default on
    cuda)', a choice that optimizer does not have."""
    from memgraph.render.sections import summary

    said = resolve_defaults(resolve(TINY), TrainingOptions(optimizer="adamw8bit")).assumptions
    assert "optimizer adamw8bit (bitsandbytes' own 8-bit step)" in said and not any("foreach" in a for a in said)
    header = summary(analyze(TINY, seq_len=8, optimizer="adamw8bit")).lines[3]
    assert "optimizer adamw8bit (bitsandbytes)" in header, header
