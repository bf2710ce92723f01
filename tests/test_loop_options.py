"""Training-loop options (--zero-grad, --optimizer none, --precision fp16, --loss) and the defaults
resolved per model (--attn auto, --loop auto, --optimizer-impl auto), by hand.

Models: the MLP of tests/test_mlp_by_hand.py (x[4,16] -> 32 -> ReLU -> 8, no bias, loss out.sum())
and one Linear(16, 10, bias=False) (tests/fixtures/nets.py), fp32 unless said, cpu target (the CPU
allocator reports requested sizes, so the hand sums are exact).
"""

import pytest
import torch

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.build import resolve_attention
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec, resolve
from tests.fixtures.nets import CLASSES, B, D0, D1, D2
from tests.test_mlp_by_hand import INPUT, MLP, PARAMS, SGD_PEAK, W1, W2, X, F32

LINEAR = "tests.fixtures.nets:linear"
TARGET = f"target=int64[{B}]<{CLASSES}"
FORWARD_PEAK = PARAMS + INPUT + 2 * B * D1 * F32  # 4352: the MLP's forward peak (test_mlp_by_hand)
GRADS = W1 + W2  # 3072


def _round512(n: int) -> int:  # c10/cuda/CUDACachingAllocator.cpp kMinBlockSize
    return -(-n // 512) * 512


def _phases(r):
    return {p.phase: p.bytes for p in r.phase_peaks}


# -- --zero-grad ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["zero", "none"])
def test_kept_gradients_are_alive_through_the_next_forward(mode):
    """zero_grad(set_to_none=False) / no zero_grad: iteration 2's forward runs with both gradients
    allocated, so its peak grows by exactly W1 + W2 = 3072 B."""
    base = _phases(analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu"))
    kept = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu", zero_grad=mode)
    assert _phases(kept)["forward"] == base["forward"] + GRADS == FORWARD_PEAK + GRADS == 7424
    # backward: the layer-1 weight gradient is made (2048 B) while the kept one is still there; it is added in
    # place (AccumulateGrad: variable_grad += new_grad) and freed. W2's new gradient was freed the same way
    # before, and the kept W2 stands where SGD_PEAK counts W2's fresh one: SGD_PEAK + W1.
    assert kept.steady_state_peak.bytes == SGD_PEAK + W1 == 9096
    assert kept.static["gradients"] == GRADS
    assert ("zero_grad" in _phases(kept)) == (mode == "zero")


def test_kept_gradients_on_the_cuda_target_round_as_the_caching_allocator_does():
    base = _phases(analyze(MLP, inputs=(X,), optimizer="sgd", target="cuda"))
    kept = _phases(analyze(MLP, inputs=(X,), optimizer="sgd", target="cuda", zero_grad="zero"))
    assert kept["forward"] - base["forward"] == _round512(W1) + _round512(W2) == 3072


# -- --optimizer none ----------------------------------------------------------------------------------------
def test_optimizer_none_has_no_state_and_no_optimizer_phase():
    r = analyze(MLP, inputs=(X,), optimizer="none", target="cpu")
    assert list(_phases(r)) == ["forward", "backward", "zero_grad"]
    assert r.static["optimizer_state"] == 0 and r.steady_state_peak.by_category["optimizer_state"] == 0
    assert r.static["gradients"] == GRADS  # gradients are still made, and freed by model.zero_grad()
    assert r.steady_state_peak.bytes == SGD_PEAK  # plain SGD allocates nothing either: the same peak
    assert r.optimizer_impl == "none"
    assert "no optimizer (forward and backward only)" in r.assumptions


def test_optimizer_none_without_zero_grad_keeps_the_gradients():
    r = analyze(MLP, inputs=(X,), optimizer="none", zero_grad="none", target="cpu")
    assert list(_phases(r)) == ["forward", "backward"]
    assert _phases(r)["forward"] == FORWARD_PEAK + GRADS


# -- --precision fp16 ----------------------------------------------------------------------------------------
def test_fp16_parameters_are_two_bytes_each():
    r = analyze(MLP, inputs=(f"x=float16[{B},{D0}]",), precision="fp16", optimizer="adamw", target="cpu")
    count = D1 * D0 + D2 * D1  # 768
    assert r.parameters == count
    assert r.static["parameters"] == 2 * count == 1536
    assert r.static["gradients"] == 2 * count
    # AdamW: exp_avg and exp_avg_sq in the parameter's dtype (torch 2.13 torch/optim/adam.py _init_group:
    # zeros_like(p)); its 'step' scalars (float32, one per parameter: 2 x 4 B) are host tensors in the for-loop
    # implementation, the cpu target's memory (measured: iteration 2 starts and ends at 4,744 B = 1,536 + 3,072
    # + the 128 B input + 8)
    assert r.static["optimizer_state"] == 2 * 2 * count + 2 * 4
    assert any("fp16: parameters, gradients, optimizer state and floating inputs in float16" in n for n in r.notes)


def test_fp16_transformers_model_builds_in_float16():
    r = analyze("tests/configs/tiny-llama.json", seq_len=16, precision="fp16", target="cpu", optimizer="sgd")
    assert r.static["parameters"] == 2 * r.parameters


def test_fp16_has_no_grad_scaler_and_is_allowed_on_every_gpu():
    TrainingOptions(precision="fp16", gpu="t4")  # no bfloat16 needed
    r = analyze(MLP, inputs=(f"x=float16[{B},{D0}]",), precision="fp16", optimizer="sgd", target="cuda")
    assert not any(n.startswith("GradScaler") for n in r.notes)
    assert r.steady_state_peak.by_category["optimizer_state"] == 0  # no scale / growth-tracker tensors


# -- --loss ----------------------------------------------------------------------------------------------------
W = CLASSES * D0 * F32  # 640: the Linear's weight, and its gradient
XB = B * D0 * F32  # 256
OUT = B * CLASSES * F32  # 160: logits [4, 10]
SCALAR = F32  # the loss; and the seed ones_like(loss) in backward
TGT = B * 8  # 32: int64 target


def test_sum_loss_by_hand():
    """out.sum(): forward peak = W + x + out + loss; sum saves nothing and the weight's mm saves x (an input).
    Backward peak at the weight gradient's mm: + seed + grad_W (sum's backward expands the seed: a view) + the
    contiguous copy of that zero-stride [4, 10] grad the CPU mm makes before its GEMM (facts/ops/cpu_gemm.py;
    measured with torch.profiler: 1,864 B in both iterations)."""
    r = analyze(LINEAR, inputs=(X,), loss="sum", optimizer="sgd", target="cpu")
    assert _phases(r)["forward"] == W + XB + OUT + SCALAR == 1060
    assert r.modules[0].saved_activation_bytes == 0
    assert r.steady_state_peak.bytes == W + XB + OUT + 2 * SCALAR + W + OUT == 1864


def test_cross_entropy_loss_by_hand():
    """F.cross_entropy = log_softmax + nll_loss: log_softmax saves its output [4, 10] (160 B), nll_loss its
    total_weight (a float32 scalar); the target input (int64[4], 32 B) is not passed to the model.
    Forward peak at nll_loss: W + x + target + out + log-probs + loss + total_weight.
    Backward peak at the weight gradient's mm: the log-probs and the gradient of nll_loss are freed, the
    gradient of the logits (160 B) is alive: W + x + target + out + loss + seed + grad_out + grad_W."""
    r = analyze(LINEAR, inputs=(X, TARGET), loss="cross-entropy", optimizer="sgd", target="cpu")
    assert r.batch == [f"x=float32[{B},{D0}]", f"target=int64[{B}]"]
    assert _phases(r)["forward"] == W + XB + TGT + OUT + OUT + SCALAR + F32 == 1256
    assert r.modules[0].saved_activation_bytes == OUT + F32 == 164
    assert r.steady_state_peak.bytes == W + XB + TGT + OUT + 2 * SCALAR + OUT + W == 1896


def test_cross_entropy_needs_an_int64_input_named_target():
    with pytest.raises(MemgraphError, match="input named 'target'"):
        analyze(LINEAR, inputs=(X, "y=int64[4]"), loss="cross-entropy", target="cpu")
    with pytest.raises(MemgraphError, match="must be int64"):
        analyze(LINEAR, inputs=(X, "target=int32[4]"), loss="cross-entropy", target="cpu")
    with pytest.raises(MemgraphError, match=r"output \[4, 10\] and target \[3\] do not match"):
        analyze(LINEAR, inputs=(X, "target=int64[3]"), loss="cross-entropy", target="cpu")


def test_cross_entropy_loss_option_is_for_callables_and_causal_lms_only():
    # transformers models compute their own cross-entropy from labels; --loss sum is allowed for them
    # (logits.sum(), tests/test_loss_sum_transformers.py), and --loss cross-entropy for causal LMs
    # (a script's loss on the logits, tests/test_loss_ce_causal_lm.py); an encoder is refused
    with pytest.raises(MemgraphError, match="applies to module:function models"):
        analyze("tests/configs/tiny-bert.json", seq_len=16, loss="cross-entropy", target="cpu")


def test_loss_auto_is_the_old_rule():
    """auto on a non-scalar output is out.sum(): the same trace as --loss sum."""
    auto = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu")
    assert auto.steady_state_peak.bytes == SGD_PEAK
    assert analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu", loss="sum").steady_state_peak.bytes == SGD_PEAK


# -- defaults: attention, loop, optimizer implementation ------------------------------------------------------
def _spec(model_class: str) -> ModelSpec:
    return ModelSpec(name=model_class, source="config", task="causal-lm", model_class=model_class)


@pytest.mark.parametrize("cls_name,expected", [("LlamaForCausalLM", "sdpa"), ("BloomForCausalLM", "eager")])
def test_auto_attention_is_what_transformers_picks(cls_name, expected):
    """Llama supports SDPA (transformers picks sdpa); Bloom does not (transformers falls back to eager).
    Checked against transformers itself: the class built with no attn_implementation."""
    import transformers

    assert resolve_attention(_spec(cls_name), "auto") == expected
    assert resolve_attention(_spec(cls_name), "eager") == "eager"  # an explicit choice is kept
    cls = getattr(transformers, cls_name)
    config_cls = cls.config_class
    tiny = config_cls(vocab_size=32, hidden_size=16, n_embed=16, num_hidden_layers=1, n_layer=1,
                      num_attention_heads=2, n_head=2, intermediate_size=32)
    with torch.device("meta"):
        built = cls._from_config(tiny)
    assert built.config._attn_implementation == expected


def test_transformers_model_defaults_state_the_trainer_loop():
    r = analyze("tests/configs/tiny-llama.json", seq_len=16, target="cuda")
    assert r.assumptions == ["attention sdpa (transformers' choice for LlamaForCausalLM)",
                             "optimizer adamw fused (Trainer default adamw_torch_fused)",
                             "loop trainer (Hugging Face Trainer)", "zero_grad set_to_none",
                             "precision fp32 (TrainingArguments bf16=False, fp16=False)"]
    assert r.optimizer_impl == "fused"
    assert r.to_dict()["assumptions"] == r.assumptions


def test_plain_loop_keeps_pytorchs_optimizer_default():
    spec = resolve("tests/configs/tiny-llama.json")
    for target, impl in (("cuda", "foreach"), ("cpu", "for-loop")):
        got = resolve_defaults(spec, TrainingOptions(loop="plain", target=target))
        assert got.optimizer_impl == impl
        assert f"optimizer adamw {impl} (PyTorch's default on {target})" in got.assumptions
    sgd = resolve_defaults(spec, TrainingOptions(optimizer="sgd"))  # Trainer's optim sgd: torch.optim.SGD as is
    assert (sgd.options.loop, sgd.optimizer_impl) == ("trainer", "foreach")


def test_callables_default_to_the_plain_loop():
    r = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu")
    assert r.assumptions[1] == "loop plain (a module:function model's own loop)"
    assert not any(a.startswith("attention") for a in r.assumptions)


def test_header_line_in_every_format():
    from memgraph.render.formats import render

    r = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu")
    line = "assumed: optimizer sgd for-loop (PyTorch's default on cpu), loop plain"
    import html

    for fmt in ("table", "md"):
        assert line in render(r, fmt)
    assert html.escape(line) in render(r, "html")
    assert '"assumptions": [' in render(r, "json")


def test_old_records_mean_old_defaults():
    """A ground-truth record without a loop field ran the plain loop (the default of its time): predicted
    so, it reproduces its measurement to the byte; read with today's default (trainer) it would not."""
    import json
    from pathlib import Path

    from memgraph.validation import LEGACY_OPTIONS, measured_peaks, predict_record

    assert LEGACY_OPTIONS == {"attn_implementation": "eager", "loop": "plain", "zero_grad": "set-to-none",
                              "loss": "auto"}
    record = json.loads(Path("reports/groundtruth/cpu/tiny-llama__s32_b1_sgd.json").read_text())
    assert "loop" not in record["options"] and "zero_grad" not in record["options"]
    measured = measured_peaks(record)["allocated"]
    assert predict_record(record)["allocated"] == measured
    today = analyze(record["model"], target="cpu", seq_len=32, optimizer="sgd", attn_implementation="eager")
    assert today.steady_state_peak.bytes != measured


@pytest.mark.slow
def test_measurement_records_store_the_resolved_options():
    m = measure(MLP, device="cpu", inputs=(X,), optimizer="sgd", zero_grad="zero")
    assert (m["options"]["loop"], m["options"]["zero_grad"], m["optimizer_impl"]) == ("plain", "zero", "for-loop")
    assert m["assumptions"][1] == "loop plain (a module:function model's own loop)"


# -- the same step for real: cpu target against the CPU allocator ---------------------------------------------
# Tolerance 0.5% (the brief's); every case below agrees to the byte except AdamW, whose for-loop step is 12 B
# above the trace on this CPU build with every --zero-grad mode (a Python float wrapped as a 0-d float64 tensor
# and its float32 cast inside the op, tests/test_optimizer_kernels.py; not these options').
@pytest.mark.slow
@pytest.mark.parametrize("model,kw", [
    (MLP, dict(inputs=(X,), optimizer="sgd", zero_grad="zero")),
    (MLP, dict(inputs=(X,), optimizer="sgd", zero_grad="none")),
    (MLP, dict(inputs=(X,), optimizer="adamw", zero_grad="zero")),
    (MLP, dict(inputs=(X,), optimizer="none")),
    (MLP, dict(inputs=(X,), optimizer="none", zero_grad="none")),
    (MLP, dict(inputs=(X,), optimizer="sgd", loss="sum")),
    (MLP, dict(inputs=(f"x=float16[{B},{D0}]",), optimizer="adamw", precision="fp16")),
    (LINEAR, dict(inputs=(X, TARGET), optimizer="sgd", loss="cross-entropy")),
    # fp16 on the CPU: measured 810,568 B on 2026-11-23 (torch 2.13.0), equal to the trace; CI runs of the previous
    # day measured 994,056 B (22.6% above, at embedding_dense_backward) and this case was a strict xfail. Which change
    # moved the measurement was not identified: if it comes back, bisect before marking it again.
    ("tests/configs/tiny-llama.json", dict(seq_len=16, precision="fp16", optimizer="sgd")),
    ("tests/configs/tiny-llama.json", dict(seq_len=16)),  # the defaults: sdpa, trainer loop, fused AdamW
])
def test_cpu_measurement_agrees(model, kw):
    predicted = analyze(model, target="cpu", iterations=3, **kw)
    measured = measure(model, device="cpu", iterations=3, **kw)
    steady = max(it["peak_allocated"] for it in measured["iterations"][1:])
    assert abs(predicted.steady_state_peak.bytes - steady) <= 0.005 * steady
    first = measured["iterations"][0]["peak_allocated"]
    assert abs(predicted.first_iteration_peak.bytes - first) <= 0.005 * first
