"""Mixed precision on meta: the autocast emulation, GradScaler, pure bf16 -- by hand."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.measure.real_step import precision_context
from memgraph.trace.emulate.autocast_emulation import RULES, AutocastStats, autocast_region
from memgraph.step.grad_scaler import MetaGradScaler, make_scaler
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.trace.record.recorder import FREE, Recorder
from memgraph.trace.tracer import trace_training
from tests.conftest import CONFIGS

BF16, F32 = 2, 4
N, IN, OUT = 8, 32, 16  # the autocast linear layer: x[N, IN] @ W[OUT, IN]^T, no bias
W_BF16 = OUT * IN * BF16  # 1,024: the cached bf16 copy of the weight
X_BF16 = N * IN * BF16  # 512: the bf16 copy of the input (not cached: not a leaf parameter)
Y_BF16 = N * OUT * BF16  # 256: the output, bf16


def _linear_run(x_requires_grad=False, frozen=False, calls=2):
    """Record `calls` uses of one Linear inside one emulated bf16 autocast region, then backward."""
    with torch.device("meta"):
        lin = nn.Linear(IN, OUT, bias=False)
        x = torch.randn(N, IN, requires_grad=x_requires_grad)
    lin.weight.requires_grad_(not frozen)
    rec = Recorder()
    rec.register(lin.weight, "parameter", "weight")
    rec.register(x, "input", "x")
    stats = AutocastStats(torch.bfloat16)
    with rec:
        rec.enter(1, "forward")
        with autocast_region(stats):
            ys = [lin(x) for _ in range(calls)]
        rec.enter(1, "after region")
        exit_event = len(rec.log.events)
        loss = sum(y.float().sum() for y in ys)
        rec.enter(1, "backward")
        backward_event = len(rec.log.events)
        if loss.requires_grad:
            loss.backward()
    rec.close()
    casts = [s for s in rec.log.storages if s.name == "aten._to_copy.default" and s.phase == "forward"]
    return rec, casts, ys, exit_event, backward_event, stats


def test_weight_cast_made_once_per_region_and_freed_at_region_exit():
    rec, casts, ys, exit_event, _, stats = _linear_run()
    weight_casts = [s for s in casts if s.shape == (OUT, IN)]
    input_casts = [s for s in casts if s.shape == (N, IN)]
    # one bf16 copy of W for both calls (the cache), one bf16 copy of x per call
    assert [(s.nbytes, s.dtype) for s in weight_casts] == [(W_BF16, "bfloat16")]
    assert [(s.nbytes, s.dtype) for s in input_casts] == [(X_BF16, "bfloat16")] * 2
    assert stats.cached == 1 and stats.cache_hits == 1
    # the cache holds the weight copy until the region exits: its FREE is the last event before the
    # "after region" mark (x does not require grad, so mm saved x's copy, not W's)
    w = weight_casts[0]
    assert w.free_event == exit_event - 1 and rec.log.events[w.free_event] == (FREE, w.sid)
    # the input copies are saved by mm for W's gradient: alive until backward
    assert all(s.free_event is not None and s.free_event > exit_event for s in input_casts)
    assert all(y.dtype == torch.bfloat16 for y in ys)
    outputs = [s for s in rec.log.storages if s.name == "aten.mm.default" and s.phase == "forward"]
    assert [s.nbytes for s in outputs] == [Y_BF16] * 2


def test_weight_copy_saved_for_backward_outlives_the_region():
    # when x requires grad, mm also saves W's bf16 copy (for x's gradient): the cache lets go at
    # region exit but autograd keeps it until backward frees the node
    rec, casts, _, exit_event, backward_event, _ = _linear_run(x_requires_grad=True)
    (w,) = [s for s in casts if s.shape == (OUT, IN)]
    assert w.free_event > backward_event


def test_frozen_weights_are_cast_at_every_use():
    # cached_cast caches only tensors that require grad: a frozen weight is re-cast per call
    _, casts, _, _, _, stats = _linear_run(frozen=True, calls=3)
    assert len([s for s in casts if s.shape == (OUT, IN)]) == 3 and stats.cached == 0


def test_policy_mapping_of_torch_level_functions():
    assert RULES[F.linear] == ("linear", "lower_precision_fp")
    assert RULES[torch.Tensor.__matmul__] == ("matmul", "lower_precision_fp")
    assert RULES[torch.Tensor.softmax] == ("softmax", "fp32_set_opt_dtype")
    assert RULES[torch.linalg.vector_norm] == ("linalg_vector_norm", "fp32_set_opt_dtype")
    assert RULES[torch.layer_norm] == ("layer_norm", "fp32")
    assert RULES[torch._C._nn.nll_loss_nd] == ("nll_loss", "fp32")
    assert RULES[torch.addcmul] == ("addcmul", "promote")
    assert torch.cat not in RULES  # promote only on CPU autocast; CUDA relies on type promotion
    with torch.device("meta"):
        x = torch.randn(N, IN, dtype=torch.bfloat16)
        h = torch.randn(N, IN, dtype=torch.float16)
        w = torch.randn(OUT, IN)
    with autocast_region(AutocastStats(torch.bfloat16)):
        assert (x @ w.t()).dtype == torch.bfloat16  # Tensor.__matmul__ -> matmul
        assert F.softmax(x, -1).dtype == torch.float32  # Python F.softmax -> Tensor.softmax -> dtype=float
        assert x.softmax(-1, dtype=torch.bfloat16).dtype == torch.bfloat16  # explicit dtype wins
        assert F.layer_norm(x, (IN,)).dtype == torch.float32
        assert x.sum().dtype == torch.float32 and (x ** 2).dtype == torch.float32
        assert torch.cat([x, w.t().reshape(N, -1)[:, :IN]]).dtype == torch.float32  # ordinary promotion
        assert F.normalize(x, dim=-1).dtype == torch.float32  # Python body runs: norm -> vector_norm(fp32)
        # cross_entropy: log_softmax(x, dtype=x.dtype) stays bf16, nll_loss casts it to float32
        loss = F.cross_entropy(x.requires_grad_(), torch.zeros(N, dtype=torch.long, device="meta"))
        assert loss.dtype == torch.float32 and type(loss.grad_fn).__name__ == "NllLossBackward0"
        assert type(loss.grad_fn.next_functions[0][0]).__name__ == "ToCopyBackward0"
    with autocast_region(AutocastStats(torch.float16)):
        rec = Recorder()
        with rec:
            s = F.softmax(h, -1)  # CUDA half + dtype=float: _softmax(half_to_float) -- no float32 copy of h
        assert s.dtype == torch.float32
        assert [(r.name, r.dtype) for r in rec.log.storages if r.origin == "op"] == [("aten._softmax.default", "float32")]


def test_binary_cross_entropy_is_refused_as_on_a_gpu():
    with torch.device("meta"):
        p = torch.rand(4).to(torch.bfloat16)
    with autocast_region(AutocastStats(torch.bfloat16)), pytest.raises(MemgraphError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, p)


# -- pure bf16, by hand ----------------------------------------------------------------------------
MLP = "tests.fixtures.nets:mlp"  # x[4, 16] -> Linear(16, 32) -> ReLU -> Linear(32, 8), no biases
MLP_PARAMS = 32 * 16 + 8 * 32  # 768


def test_pure_bf16_params_grads_and_adam_state_are_two_bytes_each():
    opts = dict(inputs=("x=bfloat16[4,16]",), optimizer="adamw", target="cpu", precision="bf16")
    r = analyze(MLP, **opts)
    assert r.static == {"parameters": MLP_PARAMS * BF16, "buffers": 0, "gradients": MLP_PARAMS * BF16,
                        "optimizer_state": 2 * MLP_PARAMS * BF16 + 2 * 4}  # exp_avg, exp_avg_sq, 2 float32 steps
    trace = trace_training(resolve(MLP), TrainingOptions(**opts))
    roles = [s for s in trace.log.storages if s.role in ("gradient", "optimizer_state") or s.origin == "parameter"]
    # every parameter, gradient and moment in bfloat16; AdamW's `step` counters stay float32 scalars
    assert roles and all(s.dtype == "bfloat16" for s in roles if s.shape != ())
    assert [s.dtype for s in roles if s.shape == ()] == ["float32", "float32"]


@pytest.mark.slow
def test_pure_bf16_prediction_matches_the_cpu_measurement():
    """The real CPU run of the same bf16 program agrees, up to the CPU scalars meta never sees.

    Tolerance: measured - predicted in [0, 64) B. The trace runs on meta, and host scalars made
    outside it are not seen (AdamW's two float32 `step` counters, 2 x 4 B, are among them); the
    difference measured with torch 2.13 is 18 B.
    """
    opts = dict(inputs=("x=bfloat16[4,16]",), optimizer="adamw", target="cpu", precision="bf16")
    predicted = analyze(MLP, **opts).steady_state_peak.bytes
    m = measure(MLP, device="cpu", **opts)
    assert 0 <= m["iterations"][1]["peak_allocated"] - predicted < 64


# -- fp16-mixed: GradScaler on meta ------------------------------------------------------------------
BLOCK = 512  # every 0-dim scaler tensor is one 512-byte block of the CUDA caching allocator


def test_fp16_mixed_step_runs_with_the_scaler_and_costs_its_tensors():
    opts = dict(inputs=("x=float32[4,16]",), optimizer="adamw", target="cuda")
    bf16 = analyze(MLP, precision="bf16-mixed", **opts).steady_state_peak
    fp16 = analyze(MLP, precision="fp16-mixed", **opts).steady_state_peak
    # both peak in AdamW's foreach step; fp16-mixed also holds the scaler's _scale and
    # _growth_tracker (kept for the whole run) and the per-device found_inf copy that
    # scaler.step leaves in the optimizer state until scaler.update()
    assert (fp16.phase, fp16.op) == (bf16.phase, bf16.op) == ("optimizer", "aten._foreach_sqrt.default")
    assert fp16.bytes == bf16.bytes + 3 * BLOCK
    assert fp16.by_category["optimizer_state"] == bf16.by_category["optimizer_state"] + 2 * BLOCK

    trace = trace_training(resolve(MLP), TrainingOptions(precision="fp16-mixed", **opts))
    it2 = [s for s in trace.log.storages if s.iteration == 2 and s.origin == "op"]
    optimizer_scalars = [(s.name, s.dtype) for s in it2 if s.phase == "optimizer" and s.nbytes <= 8]
    assert optimizer_scalars == [
        ("aten._to_copy.default", "float64"), ("aten.reciprocal.default", "float64"),  # _scale.double().reciprocal()
        ("aten._to_copy.default", "float32"),  # .float(): inv_scale
        ("aten.full.default", "float32"),  # found_inf
        ("aten._to_copy.default", "float32"), ("aten._to_copy.default", "float32"),  # per-device copies
    ]
    ops = [o.op for o in trace.log.ops if o.iteration == 2]
    assert ops.count("aten._amp_foreach_non_finite_check_and_unscale_.default") == 1
    assert ops.count("aten._amp_update_scale_.default") == 1
    casts = [s for s in it2 if s.name == "aten._to_copy.default" and s.phase == "forward"]
    assert casts and all(s.dtype == "float16" for s in casts)
    assert any("GradScaler" in n for n in trace.notes)


@pytest.mark.filterwarnings("ignore:CUDA is not available")
def test_scalers_and_autocast_for_each_device():
    assert isinstance(make_scaler("fp16-mixed", "meta"), MetaGradScaler)
    assert make_scaler("bf16-mixed", "meta") is None and make_scaler("fp32", "cuda") is None
    autocast, scaler = precision_context(TrainingOptions(precision="bf16-mixed"), "cuda")
    assert scaler is None
    ctx = autocast()
    assert isinstance(ctx, torch.autocast) and ctx.fast_dtype == torch.bfloat16 and ctx.device == "cuda"


def test_precision_validation():
    with pytest.raises(MemgraphError, match="cuda target only"):
        TrainingOptions(precision="bf16-mixed", target="cpu")
    with pytest.raises(MemgraphError, match="needs native bfloat16.*7.5"):
        TrainingOptions(precision="bf16", gpu="t4")
    with pytest.raises(MemgraphError, match="needs native bfloat16.*7.0"):
        TrainingOptions(precision="bf16-mixed", gpu="v100-32gb")
    TrainingOptions(precision="fp16-mixed", gpu="v100-32gb")
    TrainingOptions(precision="bf16", target="cpu")


def test_weight_cast_cache_is_its_own_category_in_a_model():
    """tiny-llama bf16-mixed: the cache holds one bf16 copy of every trainable weight a matmul reads.

    Linear weights per layer: q 64x64, k and v 64x32, o 64x64, gate/up/down 64x128 = 36,864; two layers
    plus lm_head 1000x64 = 137,728 elements, 2 bytes each. Embedding lookup and RMSNorm's multiply are
    not lower_precision_fp ops, so those weights are never cast. All copies are saved for backward by
    the matmuls (for the input gradients), so at the steady-state peak (start of backward) all are alive.
    """
    r = analyze(str(CONFIGS / "tiny-llama.json"), batch_size=2, seq_len=64, precision="bf16-mixed", target="cuda")
    assert r.steady_state_peak.phase == "backward"
    assert r.steady_state_peak.by_category["autocast_cache"] == (2 * 36_864 + 64_000) * BF16
    # fp32 has no cache
    r32 = analyze(str(CONFIGS / "tiny-llama.json"), batch_size=2, seq_len=64, target="cuda")
    assert r32.steady_state_peak.by_category.get("autocast_cache", 0) == 0
