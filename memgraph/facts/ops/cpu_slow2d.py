"""The Slow2d (im2col + GEMM, "thnn") convolution's own buffers, rule by rule from
aten/src/ATen/native/ConvolutionMM2d.cpp (see facts/ops/cpu_workspace.py)."""

from __future__ import annotations

import torch

from memgraph.facts.ops.cpu_buffers import Timeline, copy_bytes, expand_param, tensor_bytes
from memgraph.facts.ops.cpu_conv_backend import thnn_memory_format


# --------------------------------------------------------------------------------------------
# Slow2d: aten/src/ATen/native/ConvolutionMM2d.cpp (+ the Slow2d cases of Convolution.cpp)
# --------------------------------------------------------------------------------------------
def _columns_bytes(input4d_shape, kernel, stride, padding, itemsize: int) -> int:
    """ConvolutionMM2d.cpp ``compute_columns2d``: ``at::empty({N, C*kh*kw, oh*ow})`` (the same
    numel in channels-last order), except "Columns are just a view on the input for the 1x1 kernel
    special case" (kernel 1x1, stride 1, padding 0)."""
    n, c, h, w = input4d_shape
    kh, kw = kernel
    if (kh, kw) == (1, 1) and tuple(stride) == (1, 1) and tuple(padding) == (0, 0):
        return 0
    oh = (h + 2 * padding[0] - kh) // stride[0] + 1
    ow = (w + 2 * padding[1] - kw) // stride[1] + 1
    return n * c * kh * kw * oh * ow * itemsize


def as_2d(t: torch.Tensor | None, k3: bool):
    """Convolution.cpp ``view4d``: ``unsqueeze(2)`` of a 3-d (1-d conv) tensor; a view, no memory."""
    return t.unsqueeze(2) if (t is not None and k3) else t


def slow2d_forward(input, weight, stride, padding) -> list[int]:
    """Workspace of ``_convolution`` -> ``thnn_conv2d`` -> ``_slow_conv2d_forward`` (groups == 1).

    Allocation order (Convolution.cpp ``_convolution``, ConvolutionMM2d.cpp
    ``slow_conv2d_forward_out_cpu``):
    1. 1-d conv: ``input = input.contiguous()`` ("avoid accidentally going through NHWC"), held to the end;
    2. ``input.contiguous(backend_memory_format)``, ``weight.contiguous(...)`` (Slow2d case), held;
    3. ``finput = compute_columns2d(...)``: the im2col columns, allocated *before* the output;
    4. ``output.resize_(...)``: the output; the columns die when the function returns.
    So the peak above the output is copies + columns.
    """
    item = input.element_size()
    tl = Timeline()
    x, w, mf, s, p = _slow2d_operands(tl, input, weight, stride, padding)
    cols = tl.alloc(_columns_bytes(tuple(x.shape), tuple(w.shape[2:]), s, p, item))
    n, o = x.shape[0], w.shape[0]
    oh = (x.shape[2] + 2 * p[0] - w.shape[2]) // s[0] + 1
    ow = (x.shape[3] + 2 * p[1] - w.shape[3]) // s[1] + 1
    tl.alloc(n * o * oh * ow * item, output=True)
    tl.free(cols)
    return tl.above_outputs()


def _slow2d_operands(tl: "Timeline", input, weight, stride, padding):
    """The copies both slow-conv2d directions make first (1-d convs as 2-d): operands, format, stride, padding."""
    k3 = weight.dim() == 3
    c1 = tl.alloc(copy_bytes(input) if k3 else 0)
    x, w = as_2d(input, k3), as_2d(weight, k3)
    if c1:
        x = x.contiguous()
    mf = thnn_memory_format(x, w)
    tl.alloc(copy_bytes(x, mf))
    tl.alloc(copy_bytes(w, mf))
    s = expand_param(stride, 2 if not k3 else 1)
    p = expand_param(padding, 2 if not k3 else 1)
    if k3:
        s, p = [1] + s, [0] + p
    return x, w, mf, s, p


def slow2d_backward(grad_output, input, weight, stride, padding, output_mask) -> list[int]:
    """Workspace of ``convolution_backward`` -> ``_slow_conv2d_backward`` (groups == 1).

    Allocation order (Convolution.cpp ``convolution_backward``; ConvolutionMM2d.cpp
    ``slow_conv2d_backward_out_cpu`` and its two templates):
    1. 1-d conv: ``input.contiguous()``; then ``input``/``weight`` ``.contiguous(backend_memory_format)``;
       all held to the end;
    2. grad_input (mask[0]), ``slow_conv2d_backward_out_cpu_template``: ``grad_output.contiguous(mf)``,
       then ``grad_input.resize_as_(input)``; the contiguous copy dies with the template. The
       per-thread ``fgrad_input`` is ``std::make_unique<scalar_t[]>``: not c10 memory;
    3. grad_bias (mask[2]): ``at::sum_out(grad_bias, grad_output, {0, 2, 3})``;
    4. grad_weight (mask[1]): ``grad_weight.resize_``, then in
       ``slow_conv2d_backward_weight_out_cpu_template`` ``grad_output.contiguous(mf)`` and
       ``finput = compute_columns2d(input, ...)`` (the columns are recomputed, not saved), both
       freed when the template returns.
    """
    item = input.element_size()
    mask = list(output_mask)
    tl = Timeline()
    x, w, mf, s, p = _slow2d_operands(tl, input, weight, stride, padding)
    go = as_2d(grad_output, weight.dim() == 3)
    go_copy = copy_bytes(go, mf)
    if mask[0]:
        tl.alloc(go_copy)
        tl.alloc(tensor_bytes(x), output=True)
        tl.free(go_copy)
    if mask[2]:
        tl.alloc(w.shape[0] * item, output=True)
    if mask[1]:
        tl.alloc(tensor_bytes(w), output=True)
        tl.alloc(go_copy)
        cols = tl.alloc(_columns_bytes(tuple(x.shape), tuple(w.shape[2:]), s, p, item))
        tl.free(cols)
        tl.free(go_copy)
    return tl.above_outputs()
