"""The op registry: duplicates, CPU convolution workspaces (by hand and against the profiler), and
the ``cpu`` target's steady-state peak with convolution probing off against a live measurement."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memgraph.api import analyze, measure
from memgraph.facts.ops import cpu_workspace as cw
from memgraph.facts.ops import cpu_conv_backend
from memgraph.facts.ops import cpu_kernel_probe
from memgraph.facts.ops import cpu_mkldnn_estimate
from memgraph.facts.ops import cpu_norm_workspace
from memgraph.facts.ops.registry import REGISTRY, facts, register, unknown_ops, workspace_bytes

CONFIGS = Path(__file__).parent / "configs"
A = torch.ops.aten


def _meta(t: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``t``'s shape, strides, dtype and requires_grad (what the tracer hands a handler)."""
    m = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")
    return m.requires_grad_(t.requires_grad)


def _metas(args):
    return tuple(_meta(a) if isinstance(a, torch.Tensor) else a for a in args)


# -- registry -------------------------------------------------------------------------------------
def test_duplicate_registration_raises():
    name = "test.duplicate_op"
    try:
        register("pointwise", name, note="first")
        with pytest.raises(ValueError, match="already registered"):
            register("pointwise", name, note="second")
    finally:
        REGISTRY.pop(name, None)


def test_duplicate_of_a_default_raises():
    assert facts("aten.convolution.default").family == "conv"  # loads the defaults
    with pytest.raises(ValueError, match="already registered"):
        register("conv", "aten.convolution")
    assert facts("aten.convolution.default").workspace  # the default survived


def test_unknown_ops_and_packets():
    assert facts("aten.mm.default").family == "matmul"
    assert unknown_ops(["aten.mm.default", "aten.no_such_op.default", "aten.no_such_op.out"]) == {"aten.no_such_op": 2}


# -- CPU convolution workspaces, by hand ----------------------------------------------------------
def test_slow2d_forward_columns_by_hand():
    # tiny-resnet's 3x3 bottleneck conv at batch 1: 1*4*8*8 = 256 input elements, so use_mkldnn is
    # false ("for some case, native is faster") and it runs as Slow2d (im2col + GEMM).
    x = torch.empty(1, 4, 8, 8, device="meta")
    w = torch.empty(4, 4, 3, 3, device="meta", requires_grad=True)
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    assert cpu_conv_backend.conv_backend(x, w, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, need_backward=True) == "Slow2d"
    # columns = N * (C*kh*kw) * (oh*ow) * 4 B = 1 * (4*3*3) * (8*8) * 4 = 9216 B; output 1*4*8*8*4 = 1024 B
    # is allocated after the columns, so the peak above the output is exactly the columns.
    assert workspace_bytes("aten.convolution.default", "cpu", args, {}, None) == [9216]
    assert workspace_bytes("aten.convolution.default", "cuda", args, {}, None) == []


def test_slow2d_forward_1x1_has_no_columns():
    # "Columns are just a view on the input for the 1x1 kernel special case" (stride 1, padding 0)
    x = torch.empty(1, 16, 8, 8, device="meta")
    w = torch.empty(4, 16, 1, 1, device="meta", requires_grad=True)
    assert cw.convolution((x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1), {}, None) == []


def test_slow2d_backward_by_hand_1d_noncontiguous_grad():
    # whisper's second conv1d at batch 1: input [1, 64, 100], weight [64, 64, 3], stride 2, pad 1;
    # its grad_output [1, 64, 50] comes back through a permute, so it is not contiguous.
    go = torch.empty(1, 50, 64, device="meta").permute(0, 2, 1)
    x = torch.empty(1, 64, 100, device="meta")
    w = torch.empty(64, 64, 3, device="meta", requires_grad=True)
    args = (go, x, w, [64], [2], [1], [1], False, [0], 1, [True, True, True])
    # grad_weight phase holds grad_output.contiguous() = 1*64*50*4 = 12800 B and the recomputed
    # columns = N * (C*kh*kw) * (oh*ow) * 4 = 1 * (64*1*3) * (1*50) * 4 = 38400 B together:
    # 12800 + 38400 = 51200 B above grad_input/grad_weight/grad_bias.
    assert cw.convolution_backward(args, {}, None) == [51200]


def test_mkldnn_estimate_by_hand():
    # batch 8 goes to oneDNN. The estimate (used only when probing is off) for a 3x3 conv with 4
    # input channels ("1st conv" path, plain nchw source): blocked weight pad16(O)*C*kh*kw*4 =
    # 16*4*9*4 = 2304 B, blocked dst 8*pad16(4)*8*8*4 = 32768 B, dense output 8*4*8*8*4 = 8192 B.
    # peak = max(2304 + 32768, 32768 + 8192) = 40960 B -> above the output: 40960 - 8192 = 32768 B.
    x = torch.empty(8, 4, 8, 8, device="meta")
    w = torch.empty(4, 4, 3, 3, device="meta", requires_grad=True)
    assert cpu_conv_backend.conv_backend(x, w, [1, 1], [1, 1], [1, 1], False, [0, 0], 1, need_backward=True) == "Mkldnn"
    assert cpu_mkldnn_estimate.mkldnn_estimate(x, w, [1, 1], [1, 1], [1, 1], 1) == [32768]


# -- CPU convolution workspaces, against the profiler ---------------------------------------------
SLOW2D_CASES = [  # (N, C, H, O, k, stride, pad): batch-1 or tiny inputs, Slow2d when oneDNN is on
    (1, 4, 8, 4, 3, 1, 1), (1, 16, 8, 32, 1, 2, 0), (1, 8, 8, 8, 3, 2, 1), (1, 16, 8, 4, 1, 1, 0),
]


@pytest.mark.parametrize("case", SLOW2D_CASES)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "permuted", "conv1d"])
def test_slow2d_rules_match_the_profiler(case, layout):
    n, c, h, o, k, s, p = case
    if layout == "conv1d":
        x, w = torch.zeros(n, c, h * 3), torch.zeros(o, c, k, requires_grad=True)
        st, pd, dl, op = [s], [p], [1], [0]
    else:
        x, w = torch.zeros(n, c, h, h), torch.zeros(o, c, k, k, requires_grad=True)
        if layout == "channels_last":
            x = x.to(memory_format=torch.channels_last)
        elif layout == "permuted":
            x = torch.zeros(n, h, c, h).permute(0, 2, 1, 3)
        st, pd, dl, op = [s, s], [p, p], [1, 1], [0, 0]
    assert cpu_conv_backend.conv_backend(_meta(x), _meta(w), st, pd, dl, False, op, 1, True) == "Slow2d"
    fwd = (x, w, None, st, pd, dl, False, op, 1)
    assert sum(cw.convolution(_metas(fwd), {}, None)) == cpu_kernel_probe._run_profiled(A.convolution.default, fwd, {}, None, (0,))
    y = A.convolution.default(*fwd)
    for go in (torch.zeros_like(y), torch.zeros(y.shape[::-1]).permute(*reversed(range(y.dim())))):
        for mask in ([True, True, False], [False, True, True], [True, False, False]):
            bwd = (go, x, w, [o] if mask[2] else None, st, pd, dl, False, op, 1, mask)
            rule = sum(cw.convolution_backward(_metas(bwd), {}, None))
            assert rule == cpu_kernel_probe._run_profiled(A.convolution_backward.default, bwd, {}, None, (0, 1)), (mask, go.stride())


def test_backend_mirror_agrees_with_aten():
    for n in (1, 2, 16):
        for c, hw, o, k, s, g in [(3, 32, 16, 7, 2, 1), (4, 8, 4, 3, 1, 1), (16, 8, 4, 1, 1, 1), (64, 4, 64, 3, 1, 64),
                                  (3, 32, 64, 8, 8, 1), (16, 40, 4, 1, 1, 1)]:
            x = torch.empty(n, c, hw, hw, device="meta")
            w = torch.empty(o, c // g, k, k, device="meta", requires_grad=True)
            st, pd, dl = [s, s], [k // 2, k // 2], [1, 1]
            got = cpu_conv_backend.conv_backend(x, w, st, pd, dl, False, [0, 0], g, True)
            mirror = cpu_conv_backend._select_cpu_backend_mirror(list(x.shape), list(w.shape), x.dtype, st, pd, dl, False, [0, 0], g, True)
            assert got == mirror, (n, c, hw, o, k, s, g)


def test_probe_is_cached_and_can_be_disabled(monkeypatch):
    # batch 8, 16 channels, 1x1 kernel: oneDNN (Mkldnn), so the workspace is probed on the CPU
    x = torch.empty(8, 16, 8, 8, device="meta")
    w = torch.empty(4, 16, 1, 1, device="meta", requires_grad=True)
    args = (x, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    runs = []
    real_run = cpu_kernel_probe._run_profiled
    monkeypatch.setattr(cpu_kernel_probe, "_run_profiled", lambda *a: runs.append(a) or real_run(*a))
    cpu_kernel_probe._PROBE_CACHE.clear()
    first = cw.convolution(args, {}, None)
    assert first and first == cw.convolution(args, {}, None)
    assert len(runs) == 1  # the second call is answered from the cache: the kernel ran once
    monkeypatch.setenv(cpu_kernel_probe.PROBE_ENV, "0")
    assert cpu_kernel_probe.probe_kernel_peak(A.convolution.default, args, {}) is None
    # probing off -> mkldnn_estimate, by hand (16 channels: not oneDNN's "1st conv" path, all blocked):
    # blocked src 8*pad16(16)*8*8*4 = 32768, blocked weight pad16(4)*pad16(16)*1*4 = 1024,
    # blocked dst 8*pad16(4)*8*8*4 = 32768, dense output 8*4*8*8*4 = 8192.
    # src, weight, dst alive together: 32768 + 1024 + 32768 = 66560 (then weight and src die, the
    # output is made, dst dies): the peak above the output is 66560 - 8192 = 58368 B.
    assert cw.convolution(args, {}, None) == [58368]


def test_probe_extrapolates_big_batches(monkeypatch):
    # probing [32, 16, 16, 16] (512 KiB of input) with a 256 KiB limit runs batches that fit and extrapolates;
    # oneDNN's buffers here are all batch-proportional or fixed, so the line is exact.
    x = torch.empty(32, 16, 16, 16, device="meta")
    w = torch.empty(32, 16, 3, 3, device="meta", requires_grad=True)
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    full = cpu_kernel_probe.probe_kernel_peak(A.convolution.default, args, {})
    cpu_kernel_probe._PROBE_CACHE.clear()
    monkeypatch.setenv(cpu_kernel_probe.PROBE_LIMIT_ENV, "0.25")
    scaled = cpu_kernel_probe.probe_kernel_peak(A.convolution.default, args, {})
    cpu_kernel_probe._PROBE_CACHE.clear()
    assert full and scaled == pytest.approx(full, rel=0.02)


# -- other CPU kernels with hidden buffers, against the profiler -----------------------------------
def _rule_vs_profiler(op, args, kwargs=None):
    kwargs = kwargs or {}
    out = op(*args, **kwargs)
    outs = out if isinstance(out, tuple) else (out,)
    meta_out = _meta(outs[0]) if isinstance(outs[0], torch.Tensor) else None
    rule = sum(workspace_bytes(str(op), "cpu", _metas(args), kwargs, meta_out))
    return rule, cpu_kernel_probe._run_profiled(op, args, kwargs, None, ()), out


@pytest.mark.parametrize("layout", ["contiguous", "channels_last", "strided", "2d", "nc11"])
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_rules_match_the_profiler(layout, train):
    x = {"contiguous": lambda: torch.randn(4, 32, 8, 8),
         "channels_last": lambda: torch.randn(4, 32, 8, 8).to(memory_format=torch.channels_last),
         "strided": lambda: torch.randn(4, 8, 32, 8).permute(0, 2, 1, 3),
         "2d": lambda: torch.randn(16, 32), "nc11": lambda: torch.randn(4, 32, 1, 1)}[layout]()
    w, b, rm, rv = torch.randn(32), torch.randn(32), torch.zeros(32), torch.ones(32)
    rule, probed, (y, mean, invstd) = _rule_vs_profiler(A.native_batch_norm.default, (x, w, b, rm, rv, train, 0.1, 1e-5))
    assert rule == probed
    for grad in (torch.randn_like(y), torch.randn(y.shape[::-1]).permute(*reversed(range(y.dim())))):
        for mask in ([True, True, True], [False, True, True]):
            args = (grad, x, w, rm, rv, mean, invstd, train, 1e-5, mask)
            rule, probed, _ = _rule_vs_profiler(A.native_batch_norm_backward.default, args)
            assert rule == probed, (mask, grad.stride())


@pytest.mark.parametrize("strided", [False, True])
def test_layer_norm_rules_match_the_profiler(strided):
    # whisper's encoder: hidden states keep the conv output's permuted layout, so LayerNorm copies them
    x = torch.randn(2, 64, 16).transpose(1, 2) if strided else torch.randn(2, 16, 64)
    w, b = torch.randn(64), torch.randn(64)
    rule, probed, (y, mean, rstd) = _rule_vs_profiler(A.native_layer_norm.default, (x, [64], w, b, 1e-5))
    assert rule == probed == (2 * 16 * 64 * 4 if strided else 0)
    for grad in (torch.randn(2, 16, 64), torch.randn(2, 64, 16).transpose(1, 2)):
        for mask in ([True, True, True], [True, False, False]):
            rule, probed, _ = _rule_vs_profiler(A.native_layer_norm_backward.default,
                                                (grad, x, [64], mean, rstd, w, b, mask))
            assert rule == probed, (mask, grad.stride())


def test_layer_norm_backward_buffer_by_hand():
    # contiguous input and grad: only the {2, num_threads, N} partial-sum buffer of dgamma/dbeta,
    # 2 * threads * 64 * 4 B (1024 B with 2 threads)
    x, g = torch.empty(2, 16, 64, device="meta"), torch.empty(2, 16, 64, device="meta")
    mean = rstd = torch.empty(2, 16, 1, device="meta")
    w = b = torch.empty(64, device="meta")
    got = cpu_norm_workspace.layer_norm_backward((g, x, [64], mean, rstd, w, b, [True, True, True]), {}, None)
    assert got == [2 * torch.get_num_threads() * 64 * 4]


def test_embedding_and_gelu_backward_match_the_profiler():
    idx = torch.randint(0, 100, (2, 16))
    for grad in (torch.randn(2, 16, 32), torch.randn(32, 2, 16).permute(1, 2, 0)):
        rule, probed, _ = _rule_vs_profiler(A.embedding_dense_backward.default, (grad, idx, 100, -1, False))
        assert rule == probed
    x = torch.randn(1, 64, 100)
    for grad in (torch.randn(1, 64, 100), torch.randn(1, 100, 64).permute(0, 2, 1), torch.randn(64, 1).expand(64, 100)):
        xx = x if grad.dim() == 3 else x[0]
        rule, probed, _ = _rule_vs_profiler(A.gelu_backward.default, (grad, xx))
        assert rule == probed, grad.stride()


# -- every op of the tiny configs is reviewed -------------------------------------------------------
TINY = {"tiny-llama": dict(seq_len=32), "tiny-gpt2": dict(seq_len=32), "tiny-bert": dict(seq_len=32),
        "tiny-t5": dict(seq_len=32, target_len=16), "tiny-vit": {}, "tiny-resnet": dict(image_size=32),
        "tiny-clip": dict(seq_len=16), "tiny-whisper": dict(audio_seconds=1.0, target_len=16)}


@pytest.mark.parametrize("name", sorted(TINY))
@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_tiny_configs_have_no_unknown_ops(name, target):
    r = analyze(str(CONFIGS / f"{name}.json"), target=target, batch_size=2, optimizer="adamw", **TINY[name])
    assert r.ops["unknown"] == {}


def test_amax_and_amin_are_reductions_with_their_reduced_outputs():
    # tests/fixtures/nets.py Shifted, x float32[4, 16]: y = up(x) [4, 32]; amax(y, -1, keepdim) [4, 1] = 16 B,
    # amin(y, 0) [32] = 128 B, each one output in forward (their backward is eq/sum/div/mul, recorded as those ops)
    from memgraph.api import analyze_traced
    from memgraph.model_spec.options import TrainingOptions

    result, trace = analyze_traced("tests.fixtures.nets:shifted", TrainingOptions(inputs=("x=float32[4,16]",),
                                                                                   target="cpu"))
    assert result.ops["unknown"] == {}
    assert facts("aten.amax.default").family == facts("aten.amin.default").family == "reduction"
    reduced = [(s.name, s.shape, s.nbytes, s.phase) for s in trace.log.storages
               if s.iteration == 2 and s.name in ("aten.amax.default", "aten.amin.default")]
    assert reduced == [("aten.amax.default", (4, 1), 16, "forward"), ("aten.amin.default", (32,), 128, "forward")]


# -- the cpu target against the measurement -------------------------------------------------------
# (the steady-state peaks of tiny-resnet, tiny-vit and tiny-clip with probing on are measured in
# tests/test_cpu_ground_truth.py; this is the one configuration with probing off)
@pytest.mark.slow
def test_cpu_peak_without_probing_stays_close(monkeypatch):
    monkeypatch.setenv(cpu_kernel_probe.PROBE_ENV, "0")
    path = str(CONFIGS / "tiny-resnet.json")
    kw = dict(batch_size=8, image_size=32, optimizer="sgd")
    predicted = analyze(path, target="cpu", **kw).steady_state_peak.bytes
    measured = max(i["peak_allocated"] for i in measure(path, device="cpu", target="cpu", **kw)["iterations"][1:])
    # 3%: without probing, oneDNN's buffers come from mkldnn_estimate, which leaves out the scratchpads
    assert abs(predicted - measured) <= 0.03 * measured, (predicted, measured)


@pytest.mark.parametrize("reduction", [0, 1, 2])
def test_mse_loss_matches_the_profiler(reduction):
    # PI0's flow-matching loss, F.mse_loss(target [2, 50, 32], prediction): reduced, the elementwise loss is a
    # buffer of 2 * 50 * 32 * 4 = 12,800 B freed before the op returns; unreduced, it is the output (no buffer)
    x, y = torch.randn(2, 50, 32), torch.randn(2, 50, 32)
    # with the mean (1) the profiler also sees the 12 B that aten.mean alone allocates (0-d partials, which the
    # registry leaves out for every reduction, defaults.py)
    rule, probed, out = _rule_vs_profiler(A.mse_loss.default, (x, y, reduction))
    assert rule == (0 if reduction == 0 else 2 * 50 * 32 * 4)
    assert probed - rule == (12 if reduction == 1 else 0)
    rule, probed, _ = _rule_vs_profiler(A.mse_loss_backward.default, (torch.ones_like(out), x, y, reduction))
    assert rule == probed == 0
