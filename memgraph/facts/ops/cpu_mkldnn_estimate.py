"""A static estimate of a oneDNN (Mkldnn) convolution's buffers: avx512 blocked formats, no scratchpad; used only
when the kernel cannot be probed (facts/ops/cpu_kernel_probe.py, ``MEMGRAPH_CPU_PROBE=0``)."""

from __future__ import annotations

import math

from memgraph.facts.ops.cpu_buffers import Timeline, expand_param
from memgraph.facts.ops.cpu_slow2d import as_2d


# --------------------------------------------------------------------------------------------
# Mkldnn estimate (used only when probing is off or fails)
# --------------------------------------------------------------------------------------------
SIMD_CHANNELS = 16  # oneDNN blocked formats on avx512 (nChw16c, OIhw16i16o): channels padded to 16


def _pad(c: int) -> int:
    return -(-c // SIMD_CHANNELS) * SIMD_CHANNELS


def mkldnn_estimate(input, weight, stride, padding, dilation, groups, output_mask=None) -> list[int]:
    """Rough oneDNN workspace (no scratchpad), from the buffers ideep allocates through c10.

    Forward (aten/src/ATen/native/mkldnn/Conv.cpp ``_mkldnn_convolution``: ideep computes into its
    own ``y``, then ``mkldnn_to_dense`` copies it into the aten output): a blocked copy of the
    input unless the channels are few and the kernel is not 1x1 (oneDNN's "1st conv" path reads
    nchw), a blocked copy of the weight, the blocked ``y``; the weight/input copies die before the
    dense output is allocated. Backward: grad-input phase (nhwc grad_output, blocked weight, ideep
    grad_input, then ``mkldnn_to_dense`` + ``.contiguous()``), grad-weight phase (blocked
    grad_output and input, ideep grad_weight), as seen on avx512 with oneDNN 3.x; scratchpads are
    not estimated.
    """
    item = input.element_size()
    k3 = weight.dim() == 3
    x, w = as_2d(input, k3), as_2d(weight, k3)
    s, p, d = (expand_param(v, 1 if k3 else 2) for v in (stride, padding, dilation))
    if k3:
        s, p, d = [1] + s, [0] + p, [1] + d
    n, c = x.shape[0], x.shape[1]
    o = w.shape[0]
    ksz = [(w.shape[2 + i] - 1) * d[i] + 1 for i in range(2)]
    osz = [(x.shape[2 + i] + 2 * p[i] - ksz[i]) // s[i] + 1 for i in range(2)]
    spatial_in, spatial_out = math.prod(x.shape[2:]), math.prod(osz)
    kernel = math.prod(w.shape[2:])
    first_conv = c // groups < SIMD_CHANNELS and kernel > 1
    src_b = 0 if first_conv else n * _pad(c) * spatial_in * item
    w_b = _pad(o) * (c // groups if first_conv else _pad(c // groups)) * kernel * item * (groups if groups > 1 else 1)
    dst_b = n * _pad(o) * spatial_out * item
    out = n * o * spatial_out * item
    tl = Timeline()
    if output_mask is None:  # forward
        tl.alloc(src_b)
        tl.alloc(w_b)
        tl.alloc(dst_b)
        tl.free(w_b)
        tl.free(src_b)
        tl.alloc(out, output=True)
        tl.free(dst_b)
        return tl.above_outputs()
    mask = list(output_mask)
    gi = n * c * spatial_in * item
    if mask[0]:
        tl.alloc(out)  # grad_output in nhwc
        tl.alloc(w_b)
        tl.alloc(gi)  # ideep grad_input
        tl.free(w_b)
        tl.free(out)
        tl.alloc(gi, output=True)  # mkldnn_to_dense
        tl.alloc(gi)  # .contiguous() of the nhwc result
        tl.free(gi)
        tl.free(gi)
    if mask[1]:
        tl.alloc(dst_b)  # blocked grad_output
        tl.alloc(src_b)
        gw = tl.alloc(o * (c // groups) * kernel * item)  # ideep grad_weight
        tl.free(src_b)
        tl.free(dst_b)
        tl.alloc(gw, output=True)
        tl.free(gw)
    if mask[2]:
        tl.alloc(o * item, output=True)
    return tl.above_outputs()
