"""Buffers CUDA kernels allocate inside an op that the meta trace cannot see, computed by hand.

Each expected number is written out from the source's formula next to the assertion (the mechanisms and
their sources: memgraph/facts/cudnn_conv.py, cublas_operands.py, attention_backward.py). The handlers
are called on meta tensors directly, and the traces check that the recorder puts the bytes at the op on
the cuda target and nowhere on the cpu target.
"""

from __future__ import annotations

import pytest
import torch

from memgraph.facts import cudnn_conv
from memgraph.facts.attention_backward import EFFICIENT_UNKNOWN
from memgraph.facts.cublas_operands import batch_matrix_needs_copy, matrix_needs_copy
from memgraph.facts.ops.registry import CudaContext, cuda_kernel_buffers
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.trace.record.event_log import Origin
from memgraph.trace.tracer import trace_training

F32, BF16 = 4, 2
H100 = CudaContext((9, 0))
META = "meta"


def _conv_fwd_args(x, w, padding=1):
    return (x, w, None, [1, 1], [padding, padding], [1, 1], False, [0, 0], 1)


# -- cuDNN convolution ------------------------------------------------------------------------------
# x [2, 3, 16, 16] * w [8, 3, 3, 3], padding 1 -> y [2, 8, 16, 16], float32 NCHW on sm90 (TF32 allowed)
N, C, K, HW = 2, 3, 8, 16
X_BYTES = N * C * HW * HW * F32  # 6144
W_BYTES = K * C * 3 * 3 * F32  # 864
Y_BYTES = N * K * HW * HW * F32  # 16384
TRANSPOSES = X_BYTES + W_BYTES + Y_BYTES  # 23392: NHWC copies of x, w and y (tensor-core engines)
UNFOLDED = N * C * 3 * 3 * HW * HW * F32  # 55296: explicit-GEMM matrix, N x C*kh*kw x Ho*Wo
assert (TRANSPOSES, UNFOLDED) == (23392, 55296)


def _conv_tensors(memory_format=torch.contiguous_format, dtype=torch.float32):
    x = torch.empty(N, C, HW, HW, device=META, dtype=dtype).contiguous(memory_format=memory_format)
    w = torch.empty(K, C, 3, 3, device=META, dtype=dtype).contiguous(memory_format=memory_format)
    y = torch.ops.aten.convolution.default(*_conv_fwd_args(x, w))
    return x, w, y


def test_cudnn_forward_workspace_by_hand():
    x, w, y = _conv_tensors()
    b = cuda_kernel_buffers("aten.convolution.default", H100, _conv_fwd_args(x, w), {}, y)
    assert b.transients == [TRANSPOSES]
    [u] = b.unknowns
    assert (u.name, u.expected_bytes, u.upper_bytes) == (cudnn_conv.UNKNOWN_NAME, TRANSPOSES, TRANSPOSES + UNFOLDED)


def test_cudnn_backward_data_then_filter_by_hand():
    x, w, y = _conv_tensors()
    go = torch.empty_like(y)
    args = (go, x, w, [K], [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    out = (torch.empty_like(x), torch.empty_like(w), torch.empty(K, device=META))
    both = cuda_kernel_buffers("aten.convolution_backward.default", H100, args + ([True, True, True],), {}, out)
    assert both.transients == [TRANSPOSES, TRANSPOSES]  # backward-data, then backward-filter: one after the other
    filter_only = cuda_kernel_buffers("aten.convolution_backward.default", H100, args + ([False, True, True],), {},
                                      out)
    assert filter_only.transients == [TRANSPOSES]
    assert filter_only.unknowns[0].upper_bytes == TRANSPOSES + UNFOLDED


def test_cudnn_expected_zero_without_tensor_cores_or_for_channels_last():
    x, w, y = _conv_tensors()
    no_tf32 = CudaContext((9, 0), cudnn_allow_tf32=False)  # filterEngineConfigs drops tensor-core engines
    b = cuda_kernel_buffers("aten.convolution.default", no_tf32, _conv_fwd_args(x, w), {}, y)
    assert b.transients == [] and (b.unknowns[0].expected_bytes, b.unknowns[0].upper_bytes) == (0, UNFOLDED)
    v100_fp32 = cuda_kernel_buffers("aten.convolution.default", CudaContext((7, 0)), _conv_fwd_args(x, w), {}, y)
    assert v100_fp32.transients == []  # no TF32 before sm80
    xl, wl, yl = _conv_tensors(torch.channels_last)
    cl = cuda_kernel_buffers("aten.convolution.default", H100, _conv_fwd_args(xl, wl), {}, yl)
    assert cl.transients == []  # NHWC already: no transposes
    xh, wh, yh = _conv_tensors(dtype=torch.float16)
    half = cuda_kernel_buffers("aten.convolution.default", CudaContext((7, 0)), _conv_fwd_args(xh, wh), {}, yh)
    assert half.transients == [TRANSPOSES // 2]  # float16 tensor cores from sm70: the same copies at 2 bytes


def test_cudnn_copies_a_strided_input_first():
    _, w, y = _conv_tensors()
    xs = torch.empty(N, C, HW, 2 * HW, device=META)[..., ::2]  # not contiguous: .contiguous() copies it
    b = cuda_kernel_buffers("aten.convolution.default", H100, _conv_fwd_args(xs, w), {}, y)
    assert b.transients == [X_BYTES + TRANSPOSES]


def test_depthwise_float32_runs_pytorchs_own_kernel():
    x = torch.empty(N, 8, HW, HW, device=META)
    w = torch.empty(8, 1, 3, 3, device=META)
    args = (x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 8)
    y = torch.ops.aten.convolution.default(*args)
    assert cuda_kernel_buffers("aten.convolution.default", H100, args, {}, y).transients == []


# -- cuBLAS operand copies --------------------------------------------------------------------------
def test_stride0_matmul_operand_is_copied():
    grad = torch.ones((), device=META).expand(4, 8)  # what logits.sum().backward() sends back: strides (0, 0)
    w = torch.empty(8, 16, device=META)
    out = torch.mm(grad, w)
    b = cuda_kernel_buffers("aten.mm.default", H100, (grad, w), {}, out)
    assert b.transients == [4 * 8 * F32]  # 128: grad.clone(Contiguous), freed after the GEMM
    assert b.unknowns == []
    assert cuda_kernel_buffers("aten.mm.default", H100, (w.t(), grad.t()), {}, out).transients == [128]


def test_layouts_cublas_takes_as_they_are():
    a = torch.empty(4, 8, device=META)
    assert not matrix_needs_copy(a.shape, a.stride())  # row-major
    assert not matrix_needs_copy(a.t().shape, a.t().stride())  # column-major
    wide = torch.empty(4, 16, device=META)[:, :8]  # leading dimension 16 >= 8
    assert not matrix_needs_copy(wide.shape, wide.stride())
    every_other = torch.empty(4, 16, device=META)[:, ::2]  # strides (16, 2): neither
    assert matrix_needs_copy(every_other.shape, every_other.stride())
    batch_expanded = torch.empty(1, 4, 8, device=META).expand(3, 4, 8)  # batch stride 0 is passed as is
    assert not batch_matrix_needs_copy(batch_expanded.shape, batch_expanded.stride())
    zero = torch.ones((), device=META).expand(3, 4, 8)
    assert batch_matrix_needs_copy(zero.shape, zero.stride())
    b = cuda_kernel_buffers("aten.bmm.default", H100, (zero, torch.empty(3, 8, 2, device=META)), {},
                            torch.empty(3, 4, 2, device=META))
    assert b.transients == [3 * 4 * 8 * F32]


# -- fused attention backward -----------------------------------------------------------------------
def _blhd(b, h, l, d, dtype=torch.bfloat16):
    """A (B, H, L, D) view of a (B, L, H, D) tensor, as the SDPA kernels make and take them."""
    return torch.empty(b, l, h, d, device=META, dtype=dtype).transpose(1, 2)


def test_flash_backward_buffers_by_hand():
    # q [2, 4, 100, 64], k/v [2, 2, 100, 64] (GQA), bfloat16
    q, k, v, out, go = _blhd(2, 4, 100, 64), _blhd(2, 2, 100, 64), _blhd(2, 2, 100, 64), _blhd(2, 4, 100, 64), \
        _blhd(2, 4, 100, 64)
    lse = torch.empty(2, 4, 100, device=META)
    args = (go, q, k, v, out, lse, None, None, 100, 100, 0.0, True, torch.empty(2, dtype=torch.uint64, device=META),
            torch.empty((), dtype=torch.uint64, device=META))
    softmax_d = 2 * 4 * 128 * F32  # [B, H, round_up(100, 128)] float32 = 4096
    dq_accum = 2 * 128 * 4 * 64 * F32  # [B, round_up(Lq, 128), H, round_up(64, 32)] float32 = 262144
    expanded = 2 * 100 * 4 * 64 * BF16  # dk_expanded, dv_expanded: [B, Lk, H, D] bf16 = 102400 each
    b = cuda_kernel_buffers("aten._scaled_dot_product_flash_attention_backward.default", H100, args, {}, None)
    assert b.transients == [softmax_d + dq_accum + 2 * expanded] == [471040]
    assert b.unknowns == []


def test_efficient_backward_float32_by_hand():
    # q/k/v [1, 2, 40, 24] float32: delta by the composite (grad_out * out).sum(-1)...contiguous()
    q, k, v, out, go = (_blhd(1, 2, 40, 24, torch.float32) for _ in range(5))
    args = (go, q, k, v, None, out, torch.empty(1, 2, 64, device=META), None, None, 0.0, [True, True, True, False])
    delta = 1 * 2 * 40 * F32  # [B, H, M] = 320
    product = 1 * 40 * 2 * 24 * F32  # grad_out * out, [B, M, H, Kv] = 7680 (.to(float) of float32: no copy)
    summed = 1 * 40 * 2 * F32  # .sum(-1) = 320
    b = cuda_kernel_buffers("aten._scaled_dot_product_efficient_attention_backward.default", CudaContext((8, 0)),
                            args, {}, None)
    assert b.transients == [delta + product + summed, delta] == [8320, 320]  # float32 output: no dq staging
    [u] = b.unknowns
    upper = 1 * 2 * F32 * (128 * 128 + 128 * (128 + 128))  # dq, dk, dv staged in float32, 128-row/col tiles
    assert (u.name, u.expected_bytes, u.upper_bytes) == (EFFICIENT_UNKNOWN, 0, upper)


# -- through the trace ------------------------------------------------------------------------------
def _kernel_buffers(trace, op_name: str) -> list[dict[str, int]]:
    """Per call of ``op_name``: the named blocks the recorder allocated for it (cuBLAS workspaces left out)."""
    calls: dict[int, dict[str, int]] = {}
    for s in trace.log.storages:
        if (s.origin == Origin.WORKSPACE and not s.name.startswith(("cuBLAS workspace", "cuBLASLt workspace"))
                and trace.log.ops[s.op_index].op == op_name):
            calls.setdefault(s.op_index, {})[s.name] = s.nbytes
    return [calls[i] for i in sorted(calls)]


@pytest.fixture(scope="module")
def mlp_traces():
    spec = resolve("tests.fixtures.nets:mlp")
    return {t: trace_training(spec, TrainingOptions(inputs=("x=float32[4,16]",), target=t)) for t in ("cuda", "cpu")}


def test_trace_records_the_copied_gradient_on_both_targets(mlp_traces):
    # loss = out.sum(): the second Linear's mm backward gets a [4, 8] gradient with strides (0, 0); both its
    # grad_input and grad_weight GEMMs copy it (128 bytes each), in each of the 2 iterations: cuBLAS's
    # prepare_matrix_for_cublas on CUDA, addmm_impl_cpu_'s clone(Contiguous) on the CPU (facts/ops/cpu_gemm.py,
    # checked against torch.profiler in tests/test_loss_sum_exact.py)
    for target in ("cuda", "cpu"):
        calls = _kernel_buffers(mlp_traces[target], "aten.mm.default")
        assert [sum(c.values()) for c in calls] == [4 * 8 * F32] * 4
    assert mlp_traces["cpu"].unknowns == [] and mlp_traces["cuda"].unknowns == []


def test_cublas_workspace_is_taken_while_the_copy_is_alive(mlp_traces):
    # the first backward GEMM copies the gradient, then cuBLAS takes the autograd thread's workspace inside it
    log = mlp_traces["cuda"].log
    copy = next(s for s in log.storages if s.name.startswith("cuBLAS operand copy"))
    workspace = next(s for s in log.storages if s.name == "cuBLAS workspace (autograd thread)")
    assert copy.op_index == workspace.op_index
    assert copy.alloc_event < workspace.alloc_event < copy.free_event


def test_trace_flash_backward_buffers_of_tiny_llama():
    trace = trace_training(resolve("tests/configs/tiny-llama.json"),
                           TrainingOptions(seq_len=16, precision="bf16-mixed", attn_implementation="sdpa"))
    # tests/configs/tiny-llama.json: 4 heads, 2 key/value heads, head dim 64 / 4 = 16, 2 layers; batch 1, 16 tokens
    want = {
        "flash backward softmax_d": 1 * 4 * 128 * F32,  # [B, H, round_up(16, 128)] float32: 2048
        "flash backward dq_accum": 1 * 128 * 4 * 32 * F32,  # head dim 16 rounded to 32: 65536
        "flash backward dk_expanded": 1 * 16 * 4 * 16 * BF16,  # GQA: [B, Lk, H, D] bf16, 2048
        "flash backward dv_expanded": 1 * 16 * 4 * 16 * BF16,
    }
    assert sum(want.values()) == 71680
    assert _kernel_buffers(trace, "aten._scaled_dot_product_flash_attention_backward.default") == [want] * 4


def test_trace_conv_unknown_on_cuda_only():
    spec = resolve("tests.fixtures.nets:conv")
    opts = {"inputs": (f"x=float32[{N},{C},{HW},{HW}]",)}
    cuda = trace_training(spec, TrainingOptions(target="cuda", **opts))
    # forward: the transposes; backward: the first conv's input needs no gradient, so backward-filter only
    assert _kernel_buffers(cuda, "aten.convolution.default") == [{"cuDNN workspace forward": TRANSPOSES}] * 2
    assert (_kernel_buffers(cuda, "aten.convolution_backward.default")
            == [{"cuDNN workspace backward filter": TRANSPOSES}] * 2)
    [u] = cuda.unknowns
    assert (u.name, u.expected_bytes, u.upper_bytes) == (cudnn_conv.UNKNOWN_NAME, TRANSPOSES, TRANSPOSES + UNFOLDED)
    cpu = trace_training(spec, TrainingOptions(target="cpu", **opts))
    assert cpu.unknowns == []
    assert not any(s.name.startswith("cuDNN") for s in cpu.log.storages)


def test_conv1d_runs_as_a_2d_conv_of_height_1():
    # x [2, 4, 10] * w [6, 4, 3] -> y [2, 6, 8]; float16 on sm80: NHWC copies of x, w and y
    x = torch.empty(2, 4, 10, device=META, dtype=torch.float16)
    w = torch.empty(6, 4, 3, device=META, dtype=torch.float16)
    args = (x, w, None, [1], [0], [1], False, [0], 1)
    y = torch.ops.aten.convolution.default(*args)
    transposes = (2 * 4 * 10 + 6 * 4 * 3 + 2 * 6 * 8) * BF16  # 80 + 72 + 96 elements, 2 bytes: 496
    b = cuda_kernel_buffers("aten.convolution.default", CudaContext((8, 0)), args, {}, y)
    assert b.phases == [{"cuDNN workspace forward": transposes}]
    assert b.unknowns[0].upper_bytes == transposes + 2 * 4 * 3 * 8 * BF16  # + unfolded input N x C*k x L_out
    xs = torch.empty(2, 10, 4, device=META, dtype=torch.float16).transpose(1, 2)  # input.contiguous() copies it
    strided = cuda_kernel_buffers("aten.convolution.default", CudaContext((8, 0)), (xs,) + args[1:], {}, y)
    assert strided.phases == [{"conv input copy": 2 * 4 * 10 * BF16, "cuDNN workspace forward": transposes}]
