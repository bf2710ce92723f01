"""Buffers CUDA kernels allocate inside an op that the op's meta kernel does not (cuda target only).

Each handler is a pure function ``(ctx, args, kwargs, out) -> KernelBuffers`` of the op's meta tensors
(shapes, strides, dtypes) and the target GPU (:class:`~memgraph.facts.ops.table.CudaContext`); the
recorder allocates each transient after the op's outputs and frees it before the op returns, so it
counts in ``max_memory_allocated`` at that op and in the reserved-memory replay. The mechanisms and
their sources are in :mod:`memgraph.facts.cudnn_conv` (cuDNN convolution workspaces),
:mod:`memgraph.facts.cublas_operands` (operands cuBLAS cannot take as laid out) and
:mod:`memgraph.facts.attention_backward` (flash / memory-efficient attention backward buffers).

Each buffer is its own block (the caching allocator rounds and places each one separately); the
buffers of one phase are alive together.
"""

from __future__ import annotations

import torch

from memgraph.facts import attention_backward as attn
from memgraph.facts import cudnn_conv
from memgraph.facts.cublas_operands import batch_matrix_needs_copy, is_contiguous, matrix_needs_copy
from memgraph.facts.ops.table import CudaContext, KernelBuffers
from memgraph.facts.unknowns import BoundedUnknown
from memgraph.private_api import suggest_memory_format


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _bind(names: tuple[str, ...], args: tuple, kwargs: dict) -> dict:
    a = dict(zip(names, args))
    a.update(kwargs)
    return a


def _phase(**buffers: int) -> dict[str, int]:
    """The named buffers of one phase, without the empty ones (keyword names use _ for spaces)."""
    return {name.replace("_", " "): n for name, n in buffers.items() if n}


def _buffers(phases: list[dict[str, int]], unknowns=()) -> KernelBuffers:
    return KernelBuffers([p for p in phases if p], list(unknowns))


# -- convolution (cuDNN) --------------------------------------------------------------------------
_CONV = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
_CONV_BWD = ("grad_output", "input", "weight", "bias_sizes", "stride", "padding", "dilation", "transposed",
             "output_padding", "groups", "output_mask")


def _conv_memory_format(input: torch.Tensor, weight: torch.Tensor):
    """ConvUtils.h ``cudnn_conv_suggest_memory_format`` (torch 2.13): channels-last if input or weight is."""
    if input.dtype == torch.float64 or weight.dtype == torch.float64:
        return torch.contiguous_format
    fmts = (suggest_memory_format(input), suggest_memory_format(weight))
    if weight.dim() == 4 and torch.channels_last in fmts:
        return torch.channels_last
    if weight.dim() == 5 and torch.channels_last_3d in fmts:
        return torch.channels_last_3d
    return torch.contiguous_format


def _native_depthwise(input: torch.Tensor, weight: torch.Tensor, groups: int, transposed: bool, fmt,
                      dims: int) -> bool:
    """Convolution.cpp ``_select_conv_backend``: depthwise convolutions run PyTorch's own CUDA kernel
    (CudaDepthwise2d/3d, no workspace) unless ``use_cudnn_depthwise`` (channels-last, or float16 with
    ``check_cudnn_depthwise_workload``) sends them to cuDNN; float16 is counted as cuDNN here.
    ``dims``: the input's dimensions as the backend sees them (4 for a 1-d convolution, after view4d)."""
    depthwise = (not transposed and dims in (4, 5) and input.size(1) == groups and groups > 1
                 and weight.size(0) % input.size(1) == 0)  # ConvParams::is_depthwise
    return depthwise and fmt == torch.contiguous_format and input.dtype != torch.float16


def _copy_bytes(t: torch.Tensor | None, fmt) -> int:
    """Bytes ``t.contiguous(fmt)`` allocates (ConvShared.cpp makes every operand contiguous in ``fmt``)."""
    if t is None or t.is_contiguous(memory_format=fmt):
        return 0
    return _nbytes(t)


def _geometry(input, weight, output, transposed: bool, fmt) -> cudnn_conv.ConvGeometry:
    """cuDNN's x/w/y of the convolution (a transposed one runs as the backward-data of its adjoint).

    A 1-d convolution runs as a 2-d one with a height of 1 (view4d): the same sizes and products."""
    x, y = (output, input) if transposed else (input, output)
    return cudnn_conv.ConvGeometry(
        batch=x.size(0), in_channels=x.size(1), kernel=tuple(weight.shape[2:]), out_spatial=tuple(y.shape[2:]),
        x_bytes=_nbytes(x), w_bytes=_nbytes(weight), y_bytes=_nbytes(y), itemsize=x.element_size(),
        dtype=_dtype(x), channels_last=fmt != torch.contiguous_format)


def _conv_unknown(g: cudnn_conv.ConvGeometry, ctx: CudaContext) -> tuple[int, BoundedUnknown]:
    expected, upper = cudnn_conv.workspace_bytes(g, ctx.compute_capability, ctx.cudnn_allow_tf32)
    return expected, BoundedUnknown(cudnn_conv.UNKNOWN_NAME, expected, upper, cudnn_conv.SOURCE)


def _conv_layout(x, w, transposed: bool, groups: int):
    """(memory format, bytes of the 1-d input's copy) as cuDNN gets the operands, or None for PyTorch's
    depthwise kernel. 1-d: Convolution.cpp ``input.contiguous()``, then view4d (a view), NCHW."""
    if x.dim() == 3:
        fmt, one_d_copy, dims = torch.contiguous_format, _copy_bytes(x, torch.contiguous_format), 4
    else:
        fmt, one_d_copy, dims = _conv_memory_format(x, w), 0, x.dim()
    if _native_depthwise(x, w, groups, transposed, fmt, dims):
        return None
    return fmt, one_d_copy


def _input_copy(x, fmt, one_d_copy: int) -> int:
    """The input's copy: the 1-d one (after which it is contiguous), else ``contiguous(fmt)``'s."""
    return one_d_copy or _copy_bytes(x, fmt)


def _conv_setup(a: dict, y: torch.Tensor, ctx: CudaContext):
    """(input, weight, memory format, 1-d copy bytes, expected workspace, its unknown) of a bound convolution
    whose output-shaped tensor is ``y`` (the output, or grad_output in backward); None where cuDNN is not used."""
    x, w = a["input"], a["weight"]
    transposed = bool(a.get("transposed", False))
    layout = _conv_layout(x, w, transposed, int(a.get("groups", 1)))
    if layout is None:
        return None
    fmt, one_d_copy = layout
    expected, unknown = _conv_unknown(_geometry(x, w, y, transposed, fmt), ctx)
    return x, w, fmt, one_d_copy, expected, unknown


def convolution(ctx: CudaContext, args: tuple, kwargs: dict, out) -> KernelBuffers:
    """``aten.convolution`` on CUDA: operand copies in the conv's memory format + the forward workspace."""
    a = _bind(_CONV, args, kwargs)
    if not isinstance(out, torch.Tensor) or out.numel() == 0 or a["input"].dim() < 3:
        return KernelBuffers()
    setup = _conv_setup(a, out, ctx)
    if setup is None:
        return KernelBuffers()
    x, w, fmt, one_d_copy, expected, unknown = setup
    phase = _phase(conv_input_copy=_input_copy(x, fmt, one_d_copy), conv_weight_copy=_copy_bytes(w, fmt),
                   cuDNN_workspace_forward=expected)
    return _buffers([phase], [unknown])


def convolution_backward(ctx: CudaContext, args: tuple, kwargs: dict, out) -> KernelBuffers:
    """``aten.convolution_backward`` on CUDA: backward-data then backward-filter, each with its workspace.

    ConvShared.cpp ``cudnn_convolution_backward``: grad_input (mask[0]) runs first, grad_weight (mask[1])
    second, each allocating and freeing its workspace; grad_output/input/weight are made contiguous in the
    conv's memory format first and held through both (grad_bias is a reduction, an output of the op).
    """
    a = _bind(_CONV_BWD, args, kwargs)
    go = a["grad_output"]
    mask = list(a.get("output_mask", (True, True, True)))
    if a["input"].numel() == 0 or go.numel() == 0 or a["input"].dim() < 3 or not any(mask[:2]):
        return KernelBuffers()
    setup = _conv_setup(a, go, ctx)
    if setup is None:
        return KernelBuffers()
    x, w, fmt, one_d_copy, expected, unknown = setup
    copies = {"conv_grad_output_copy": _copy_bytes(go, fmt), "conv_weight_copy": _copy_bytes(w, fmt),
              "conv_input_copy": one_d_copy or (_copy_bytes(x, fmt) if mask[1] else 0)}
    phases = []
    if mask[0]:
        phases.append(_phase(**copies, cuDNN_workspace_backward_data=expected))
    if mask[1]:
        phases.append(_phase(**copies, cuDNN_workspace_backward_filter=expected))
    return _buffers(phases, [unknown])


# -- cuBLAS GEMMs ---------------------------------------------------------------------------------
def _gemm(operand_positions: tuple[int, ...], batched: bool):
    needs_copy = batch_matrix_needs_copy if batched else matrix_needs_copy

    def handler(ctx: CudaContext, args: tuple, kwargs: dict, out) -> KernelBuffers:
        operands = [args[i] for i in operand_positions if i < len(args)]
        if not isinstance(out, torch.Tensor) or out.numel() == 0 or operands[0].size(-1) == 0:
            return KernelBuffers()  # Blas.cpp: empty results and k == 0 never reach cuBLAS
        phase = {f"cuBLAS operand copy ({name})": _nbytes(t) for name, t in zip(("a", "b"), operands)
                 if t.numel() and needs_copy(tuple(t.shape), t.stride())}
        return _buffers([phase])

    handler.__doc__ = (f"Operand copies of a {'batched ' if batched else ''}cuBLAS GEMM "
                       "(see memgraph.facts.cublas_operands).")
    return handler


mm = _gemm((0, 1), batched=False)  # mm(self, mat2)
addmm = _gemm((1, 2), batched=False)  # addmm(self, mat1, mat2) / _addmm_activation(...)
bmm = _gemm((0, 1), batched=True)  # bmm(self, mat2)
baddbmm = _gemm((1, 2), batched=True)  # baddbmm(self, batch1, batch2)


# -- fused attention backward ---------------------------------------------------------------------
def _blhd_copy_bytes(t: torch.Tensor) -> int:
    """``t.transpose(1, 2).contiguous()``: the kernels take (B, L, H, D) tensors (read from the strides, no op)."""
    (b, h, l, d), (sb, sh, sl, sd) = t.shape, t.stride()
    return 0 if is_contiguous((b, l, h, d), (sb, sl, sh, sd)) else _nbytes(t)


def _attention(grad_out, q, k, v, out, flash: bool) -> attn.AttentionBackward:
    return attn.AttentionBackward(
        batch=q.size(0), heads=q.size(1), kv_heads=k.size(1), q_len=q.size(2), kv_len=k.size(2),
        head_dim=q.size(3), head_dim_v=v.size(3), itemsize=q.element_size(),
        grad_out_copy_bytes=_blhd_copy_bytes(grad_out), out_copy_bytes=_blhd_copy_bytes(out) if flash else 0)


def flash_attention_backward(ctx: CudaContext, args: tuple, kwargs: dict, out) -> KernelBuffers:
    """``aten._scaled_dot_product_flash_attention_backward`` on CUDA: mha_bwd's buffers, all at once."""
    grad_out, q, k, v, o = args[:5]
    if q.dim() != 4 or q.numel() == 0:
        return KernelBuffers()
    buffers = attn.flash_backward_buffers(_attention(grad_out, q, k, v, o, flash=True))
    return _buffers([{f"flash backward {name}": n for name, n in buffers.items() if n}])


def efficient_attention_backward(ctx: CudaContext, args: tuple, kwargs: dict, out) -> KernelBuffers:
    """``aten._scaled_dot_product_efficient_attention_backward`` on CUDA: delta, then the staging workspace."""
    grad_out, q, k, v, _bias, o = args[:6]
    if q.dim() != 4 or q.numel() == 0:
        return KernelBuffers()
    a = _attention(grad_out, q, k, v, o, flash=False)
    computes = attn.kernel_computes_delta(a.itemsize, a.head_dim, ctx.compute_capability)
    delta_phase = {f"efficient backward {name}": n
                   for name, n in attn.efficient_delta_phase(a, computes).items() if n}
    kernel_phase = {name: n for name, n in delta_phase.items()
                    if name in ("efficient backward grad_out.contiguous()", "efficient backward delta")}
    expected, upper = attn.efficient_workspace(a)
    if expected:
        kernel_phase["efficient backward workspace"] = expected
    unknown = BoundedUnknown(attn.EFFICIENT_UNKNOWN, expected, upper, attn.EFFICIENT_SOURCE)
    return _buffers([delta_phase, kernel_phase], [unknown])


__all__ = ["addmm", "baddbmm", "bmm", "convolution", "convolution_backward", "efficient_attention_backward",
           "flash_attention_backward", "mm"]
