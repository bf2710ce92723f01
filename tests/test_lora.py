"""LoRA through PEFT on tiny-llama (tests/configs/tiny-llama.json), computed by hand.

tiny-llama: hidden 64, 4 heads of 16, 2 key/value heads (k/v projections 64 -> 32), intermediate 128,
2 layers. PEFT's default targets for llama are q_proj and v_proj
(peft/utils/constants.py TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
"""

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from tests.conftest import CONFIGS

MODEL = str(CONFIGS / "tiny-llama.json")
B, S, R, LAYERS = 2, 32, 4, 2
F32 = 4
# per layer: q_proj A [R,64] + B [64,R]; v_proj A [R,64] + B [32,R]
ADAPTER_PARAMS = LAYERS * (R * 64 + 64 * R + R * 64 + 32 * R)
assert ADAPTER_PARAMS == 1792


def _lora(**kw):
    # the plain loop with PyTorch's default (for-loop) AdamW: the numbers below are computed for it
    # (the trainer default's fused AdamW adds a float32 step tensor per adapter parameter)
    return analyze(MODEL, seq_len=S, batch_size=B, lora_rank=R, target="cpu", **{"loop": "plain", **kw})


def test_lora_trainable_state_by_hand():
    r = _lora()
    assert r.trainable_parameters == ADAPTER_PARAMS
    assert r.static["gradients"] == ADAPTER_PARAMS * F32  # 7168: only the adapters get gradients
    # AdamW: exp_avg + exp_avg_sq (14336) and a float32 host `step` per adapter parameter (the cpu target's
    # memory)
    assert r.static["optimizer_state"] == 2 * ADAPTER_PARAMS * F32 + 2 * 2 * LAYERS * F32  # A and B of q, v
    rows = {m.module: m for m in r.modules}
    q_a = rows["model.layers.0.self_attn.q_proj.lora_A.default"]
    assert (q_a.trainable_parameters, q_a.gradient_bytes) == (R * 64, R * 64 * F32)
    assert rows["model.layers.0.self_attn.q_proj.base_layer"].trainable_parameters == 0


def test_lora_matmuls_save_the_rank_r_activation():
    """lora_B(lora_A(x)): lora_B's mm saves lora_A's output [B, S, R] (made in lora_A); lora_A's mm saves x,
    which the frozen base layer's input already is (no new bytes with dropout 0, PEFT's default)."""
    rows = {m.module: m for m in _lora().modules}
    for proj in ("q_proj", "v_proj"):
        assert rows[f"model.layers.0.self_attn.{proj}.lora_A.default"].saved_activation_bytes == B * S * R * F32
        assert rows[f"model.layers.0.self_attn.{proj}.lora_B.default"].saved_activation_bytes == 0


def test_all_linear_targets_every_linear_but_the_output_head():
    r = _lora(lora_targets="all-linear")
    # q, k, v, o, gate, up, down per layer: A [R, in] + B [out, R]
    shapes = [(64, 64), (64, 32), (64, 32), (64, 64), (64, 128), (64, 128), (128, 64)]
    assert r.trainable_parameters == LAYERS * sum(R * i + o * R for i, o in shapes)
    assert not any(m.module.startswith("lm_head.lora") for m in r.modules)


def test_bf16_adapters_are_upcast_to_float32():
    """PEFT casts float16/bfloat16 adapters to float32 (PeftModel(autocast_adapter_dtype=True))."""
    r = analyze(MODEL, seq_len=S, batch_size=B, lora_rank=R, target="cpu", precision="bf16")
    assert r.static["gradients"] == ADAPTER_PARAMS * F32


def test_lora_dtype_model_keeps_bf16_adapters():
    """--lora-dtype model: get_peft_model(autocast_adapter_dtype=False), the adapters stay bfloat16 (2 bytes), so
    the gradients are ADAPTER_PARAMS * 2 (3584 B), and lora_B's mm saves lora_A's output [B, S, R] in bfloat16."""
    r = analyze(MODEL, seq_len=S, batch_size=B, lora_rank=R, target="cpu", precision="bf16", lora_dtype="model",
                loop="plain")
    assert r.static["gradients"] == ADAPTER_PARAMS * 2
    rows = {m.module: m for m in r.modules}
    assert rows["model.layers.0.self_attn.q_proj.lora_A.default"].saved_activation_bytes == B * S * R * 2


def test_lora_dtype_needs_lora_rank():
    with pytest.raises(MemgraphError, match="--lora-dtype needs --lora-rank"):
        TrainingOptions(lora_dtype="model")


def test_dora_adds_one_magnitude_vector_per_target():
    r = _lora(dora=True)
    assert r.trainable_parameters == ADAPTER_PARAMS + LAYERS * (64 + 32)  # q_proj out 64, v_proj out 32


@pytest.mark.parametrize("kw, text", [
    (dict(lora_alpha=16), "--lora-alpha needs --lora-rank"),
    (dict(lora_rank=4, freeze=("model.*",)), "drop --train/--freeze/--stage"),
    (dict(lora_rank=4, quantize="4bit", target="cpu"), "use --target cuda"),
])
def test_inconsistent_knobs_are_refused(kw, text):
    with pytest.raises(MemgraphError, match=text):
        TrainingOptions(**kw)


def test_unknown_target_module_is_a_memgraph_error():
    with pytest.raises(MemgraphError, match="--lora-targets"):
        _lora(lora_targets="no_such_proj")


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(), dict(lora_targets="all-linear", lora_dropout=0.1), dict(dora=True)])
def test_lora_within_2_percent_of_the_cpu_allocator(kw):
    """Tolerance 2%: the cpu target's bound (tests/test_cpu_ground_truth.py); the same step runs for real."""
    r = _lora(**kw)
    measured = max(it["peak_allocated"] for it in measure(
        MODEL, device="cpu", seq_len=S, batch_size=B, lora_rank=R, loop="plain", **kw)["iterations"][1:])
    assert abs(r.steady_state_peak.bytes - measured) <= 0.02 * measured, (r.steady_state_peak.bytes, measured)
    assert r.ops["unknown"] == {}


def test_knob_flags_parse():
    from memgraph.cli import build_parser, training_options

    a = build_parser().parse_args(["analyze", "llama-2-7b", "--lora-rank", "16", "--lora-alpha", "32",
                                   "--lora-targets", "q_proj,v_proj", "--lora-dropout", "0.05", "--quantize", "4bit",
                                   "--precision", "bf16", "--grad-accum", "4"])
    got = training_options(a)
    assert (got.lora_rank, got.lora_alpha, got.lora_targets, got.lora_dropout, got.quantize, got.grad_accum) == (
        16, 32, "q_proj,v_proj", 0.05, "4bit", 4)
    a = build_parser().parse_args(["analyze", "gpt2", "--optimizer-in-backward", "--lora-rank", "4", "--dora"])
    assert training_options(a).optimizer_in_backward and training_options(a).dora


@pytest.mark.slow
@pytest.mark.parametrize("family, kw", [
    ("tiny-gpt2", dict(seq_len=32)),  # PEFT's default target c_attn, a transformers Conv1D
    ("tiny-vit", dict(lora_targets="all-linear")),
    ("tiny-whisper", dict(audio_seconds=1.0, target_len=16, lora_targets="all-linear")),
    ("tiny-llava", dict(seq_len=64, images=1, lora_targets="all-linear")),
])
def test_lora_on_other_families_within_2_percent(family, kw):
    """Tolerance 2% as above; measured here within 0.03% (the vision/audio towers get adapters too)."""
    model = str(CONFIGS / f"{family}.json")
    r = analyze(model, lora_rank=R, target="cpu", **kw)
    measured = max(it["peak_allocated"] for it in measure(model, device="cpu", lora_rank=R, **kw)["iterations"][1:])
    assert abs(r.steady_state_peak.bytes - measured) <= 0.02 * measured, (r.steady_state_peak.bytes, measured)
    assert r.ops["unknown"] == {}


def test_backward_ops_are_not_attributed_to_the_identity_dropout():
    """PEFT's lora_dropout is an nn.Identity at p=0, which returns its input itself; its backward hooks
    used to leave it on the module stack (module_tracking.py), so the attention's softmax backward was
    attributed to ``...o_proj.lora_dropout.default``."""
    r = analyze(MODEL, seq_len=256, batch_size=4, lora_rank=R, lora_targets="all-linear", precision="bf16",
                gradient_checkpointing=True, target="cpu", attn_implementation="eager", loop="plain")
    assert r.steady_state_peak.op == "aten._softmax_backward_data.default"
    assert r.steady_state_peak.module == "model.layers.1.self_attn"
