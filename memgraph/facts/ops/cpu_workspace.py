"""Kernel workspaces on the ``cpu`` target: memory a CPU kernel takes from c10's CPU allocator
for itself and gives back before it returns.

torch.profiler (the ``cpu`` ground truth, :mod:`memgraph.measure.cpu`) sees these buffers; the
meta-device trace cannot, because they never pass through the dispatcher. Handlers follow
:data:`memgraph.facts.ops.registry.WorkspaceFn`: ``(args, kwargs, out) -> [bytes, ...]``.

How an entry is read. The recorder allocates each entry right after the op's outputs and frees it
at once, one entry after the other (see ``Recorder._transient``). So buffers that are live
*together* inside the kernel are summed into one entry, and what an entry has to get right is the
kernel's peak: ``entry = (peak of the kernel's own allocations) - (bytes of its outputs)``. That
is exact for the peak even where the kernel allocates a buffer *before* its output (slow_conv2d's
im2col columns) or frees part of it before allocating the output (oneDNN reorders): the trace's
peak inside the op is ``outputs + entry`` = the kernel's peak. :class:`_Timeline` replays a
kernel's allocation order and returns that number.

Convolution (all of it is here: ``aten.convolution`` and ``aten.convolution_backward``, the two
ops the trace sees; the backend ops under them never reach the dispatch mode):

* The backend is what ``_select_conv_backend`` (aten/src/ATen/native/Convolution.cpp) picks for
  CPU tensors of the same shapes: :func:`conv_backend` asks that very function through
  ``torch._C._select_conv_backend`` on zero-byte stand-ins (``expand`` of a scalar; guarded in
  :mod:`memgraph.private_api`), and falls back to :func:`_select_cpu_backend_mirror`, a transcription
  of it, if the call fails for these inputs. On CPU
  fp32 that is ``Mkldnn`` (oneDNN) unless ``use_mkldnn`` says no, which happens for small batch-1
  inputs (``N == 1`` and ``N*C*H*W <= 20480`` and not a >3x>3 kernel and ``groups == 1``) and,
  when single-threaded, for unstrided 1x1 kernels with ``N < 16``; then ``Slow2d`` (im2col +
  GEMM, "thnn").
* ``Slow2d`` (groups == 1) is modelled rule by rule from ConvolutionMM2d.cpp: see
  :func:`slow2d_forward` and :func:`slow2d_backward` (im2col columns ``N x C*kh*kw x oh*ow``
  allocated *before* the output; ``.contiguous()`` copies; the per-thread ``fgrad_input`` of the
  grad-input path is a ``std::make_unique`` array, not c10 memory, so neither the profiler nor
  this model sees it).
* ``Mkldnn`` (and every other CPU backend: grouped slow conv, dilated, transposed, 3-d) calls
  oneDNN or other code whose buffers are chosen at run time by oneDNN's primitive dispatcher
  (memory formats such as ``nChw16c``/``Acdb16a`` with channels padded to the SIMD width, the
  ``brgconv`` nhwc path, per-thread reduction scratchpads): they depend on the CPU's ISA, the
  thread count and the oneDNN version, so no static rule can reproduce them. For those the
  handler *measures the kernel once on this CPU* (:func:`probe_kernel_peak`): it runs the ATen op
  on real CPU tensors of the traced shapes and strides under torch.profiler, exactly as the
  ``cpu`` measurement would see it, and caches the result per signature. Inputs are bounded by
  ``MEMGRAPH_CPU_PROBE_LIMIT_MB`` (default 512): bigger convolutions are probed at two smaller
  batch sizes and extrapolated linearly in the batch; one whose batch is too small to shrink (fewer
  than 4 samples) is not run at all. The limit counts a probe's inputs *and* outputs (the outputs'
  sizes come from running the op on meta first), so a probe allocates at most the limit plus the
  kernel's own scratch (a 1 x 256 x 512 x 512 input to a 1x1 convolution to 1024 channels would
  otherwise allocate a 1 GiB output and gigabytes of oneDNN reorders). ``MEMGRAPH_CPU_PROBE=0`` turns
  probing off. Without a probe, :func:`mkldnn_estimate` (an avx512 blocked-format estimate, no
  scratchpad) is used.

Other CPU kernels with buffers of their own, each modelled from its source and checked against
the profiler (tests/test_ops_registry.py): batch norm forward/backward (per-channel statistics,
``alpha``/``beta``, per-thread partial sums, and a grad_input that is allocated twice), layer norm
forward/backward (``expect_contiguous`` copies, a ``{2, num_threads, N}`` partial-sum buffer),
``embedding_dense_backward`` (contiguous copy of a strided grad) and ``gelu_backward`` (oneDNN
reorders of a strided grad). Buffers sized by the thread count use ``torch.get_num_threads()``
of the analyzing process, the same process (and machine) a ``cpu`` measurement runs in.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch

from memgraph.cpu_profiler import cpu_memory_events, memory_profile
from memgraph.private_api import (
    PrivateApiError,
    nnpack_enabled,
    select_conv_backend,
    suggest_memory_format,
    tree_flatten,
    tree_map,
)
from memgraph.units import MiB

PROBE_ENV = "MEMGRAPH_CPU_PROBE"  # "0" / "false" / "off": never run kernels, use the estimates
PROBE_LIMIT_ENV = "MEMGRAPH_CPU_PROBE_LIMIT_MB"
PROBE_LIMIT_MB = 512  # default bound on the bytes of a probe's input tensors


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _copy_bytes(t: torch.Tensor | None, memory_format=torch.contiguous_format) -> int:
    """Bytes ``t.contiguous(memory_format)`` allocates: a full copy unless ``t`` already is."""
    if t is None or t.is_contiguous(memory_format=memory_format):
        return 0
    return _nbytes(t)


def _suggest_memory_format(t: torch.Tensor):
    """c10 ``TensorBase::suggest_memory_format`` (channels-last strides -> channels_last)."""
    return suggest_memory_format(t)


@dataclass
class _Timeline:
    """Replays a kernel's allocations in source order; ``peak`` is relative to the op's start."""

    live: int = 0
    peak: int = 0
    outputs: int = 0

    def alloc(self, nbytes: int, output: bool = False) -> int:
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        if output:
            self.outputs += nbytes
        return nbytes

    def free(self, nbytes: int) -> None:
        self.live -= nbytes

    def above_outputs(self) -> list[int]:
        """The single workspace entry: kernel peak minus the outputs (see the module docstring)."""
        extra = self.peak - self.outputs
        return [extra] if extra > 0 else []


def _tensor_args_conv(args, kwargs):
    """aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
    a = dict(zip(names, args))
    a.update(kwargs)
    return a


def _tensor_args_conv_bwd(args, kwargs):
    """aten.convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    names = ("grad_output", "input", "weight", "bias_sizes", "stride", "padding", "dilation", "transposed",
             "output_padding", "groups", "output_mask")
    a = dict(zip(names, args))
    a.update(kwargs)
    return a


def _expand_param(p, dim: int) -> list[int]:
    """Convolution.cpp ``expand_param_if_needed``: one value for every spatial dim."""
    p = list(p) if isinstance(p, (list, tuple)) else [int(p)]
    return p * dim if len(p) == 1 else p


# --------------------------------------------------------------------------------------------
# backend selection (aten/src/ATen/native/Convolution.cpp)
# --------------------------------------------------------------------------------------------
def conv_backend(input, weight, stride, padding, dilation, transposed, output_padding, groups,
                 need_backward: bool) -> str:
    """Name of the ``ConvBackend`` CPU tensors like ``input``/``weight`` get (e.g. "Mkldnn", "Slow2d").

    Mirrors the 1-d -> 2-d expansion of ``_convolution`` / ``convolution_backward`` ("Expand 1d ->
    2d", done for every CPU strided tensor), then asks ``_select_conv_backend`` itself on stand-ins
    that occupy no memory (the selection reads sizes, dtype, device, requires_grad and the global
    flags, never strides or data).
    """
    dim = weight.dim() - 2
    stride, padding, dilation, output_padding = (_expand_param(p, dim) for p in (stride, padding, dilation, output_padding))
    in_shape, w_shape = list(input.shape), list(weight.shape)
    if weight.dim() == 3:  # view1d_as_2d + view4d (unsqueeze(2))
        in_shape.insert(2, 1)
        w_shape.insert(2, 1)
        stride, padding, dilation, output_padding = [1] + stride, [0] + padding, [1] + dilation, [0] + output_padding
    try:
        x = torch.empty((), dtype=input.dtype, device="cpu").expand(in_shape)
        w = torch.empty((), dtype=weight.dtype, device="cpu", requires_grad=need_backward).expand(w_shape)
        with torch.set_grad_enabled(need_backward):
            return select_conv_backend(x, w, stride, padding, dilation, bool(transposed), output_padding,
                                       int(groups))
    except PrivateApiError:
        raise
    except Exception:  # the binding refused these inputs: the transcription decides
        return _select_cpu_backend_mirror(in_shape, w_shape, input.dtype, stride, padding, dilation,
                                          bool(transposed), output_padding, int(groups), need_backward)


def _select_cpu_backend_mirror(in_shape, w_shape, dtype, stride, padding, dilation, transposed,
                               output_padding, groups, need_backward) -> str:
    """Transcription of ``_select_conv_backend`` for CPU strided tensors (used only if the binding's call fails).

    Order as in Convolution.cpp: Empty; (depthwise, cuDNN, MIOpen are CUDA/ROCm only); Mkldnn when
    ``ConvParams::use_mkldnn``; (Xnnpack2d and Winograd3x3Depthwise need ``!need_backward`` and a
    mobile/ARM build, not modelled); Slow3d for non-transposed, non-dilated 5-d; the slow backends
    ("backends without support for groups") otherwise, NnpackSpatial where ``use_nnpack``.
    """
    n, c = in_shape[0], in_shape[1]
    if n == 0 or c == 0:
        return "Empty"
    is_dilated = any(d != 1 for d in dilation)
    ndim = len(in_shape)
    if _use_mkldnn(in_shape, w_shape, dtype, stride, dilation, transposed, output_padding, groups):
        return "MkldnnTranspose" if transposed else "Mkldnn"
    if not transposed and ndim == 5 and not is_dilated:
        return "Slow3d"
    if transposed:
        return "SlowTranspose2d" if ndim == 4 else "SlowTranspose3d"
    if ndim == 4:
        if is_dilated:
            return "SlowDilated2d"
        # ConvParams::use_nnpack: NNPACK on, fp32, 4-d, not dilated/transposed, kernel < 17, batch >= 16
        nnpack_on = nnpack_enabled()
        nnpack = (nnpack_on and torch.backends.nnpack.is_available() and dtype == torch.float32
                  and w_shape[2] < 17 and w_shape[3] < 17 and n >= 16)
        return "NnpackSpatial" if nnpack else "Slow2d"
    return "SlowDilated3d" if is_dilated else "Slow3d"


def _use_mkldnn(in_shape, w_shape, dtype, stride, dilation, transposed, output_padding, groups) -> bool:
    """Convolution.cpp ``ConvParams::use_mkldnn`` for CPU strided tensors.

    "For 1x1 filters, MKLDNN is faster than THNN when multi-threaded, but THNN is faster when
    single-threaded", and "for some case, native is faster": batch-1 inputs of at most 20480
    elements with a kernel not larger than 3 in both dims and no groups go to THNN (Slow2d).
    """
    if not (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled):
        return False
    if transposed and any(op >= s for op, s in zip(output_padding, stride)):  # is_output_padding_big
        return False
    if dtype in (torch.bfloat16, torch.float16):
        # mkldnn_bf16_device_check / mkldnn_fp16_device_check: depends on the CPU's ISA
        return True
    if dtype != torch.float32:
        return False
    is_strided = any(s != 1 for s in stride)
    is_dilated = any(d != 1 for d in dilation)
    n = in_shape[0]
    first = (is_strided or is_dilated or n >= 16 or w_shape[-1] != 1 or w_shape[-2] != 1
             or torch.get_num_threads() > 1)
    second = (groups > 1 or (w_shape[-1] > 3 and w_shape[-2] > 3) or n > 1
              or in_shape[0] * in_shape[1] * in_shape[2] * in_shape[3] > 20480)
    return first and second


def _thnn_memory_format(input, weight):
    """ConvUtils.h ``thnn_conv_use_channels_last``: channels_last if input or weight suggests it."""
    if input.dim() == 4 and (_suggest_memory_format(input) == torch.channels_last
                             or _suggest_memory_format(weight) == torch.channels_last):
        return torch.channels_last
    return torch.contiguous_format


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


def _as_2d(t: torch.Tensor | None, k3: bool):
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
    tl = _Timeline()
    x, w, mf, s, p = _slow2d_operands(tl, input, weight, stride, padding)
    cols = tl.alloc(_columns_bytes(tuple(x.shape), tuple(w.shape[2:]), s, p, item))
    n, o = x.shape[0], w.shape[0]
    oh = (x.shape[2] + 2 * p[0] - w.shape[2]) // s[0] + 1
    ow = (x.shape[3] + 2 * p[1] - w.shape[3]) // s[1] + 1
    tl.alloc(n * o * oh * ow * item, output=True)
    tl.free(cols)
    return tl.above_outputs()


def _slow2d_operands(tl: "_Timeline", input, weight, stride, padding):
    """The copies both slow-conv2d directions make first (1-d convs as 2-d): operands, format, stride, padding."""
    k3 = weight.dim() == 3
    c1 = tl.alloc(_copy_bytes(input) if k3 else 0)
    x, w = _as_2d(input, k3), _as_2d(weight, k3)
    if c1:
        x = x.contiguous()
    mf = _thnn_memory_format(x, w)
    tl.alloc(_copy_bytes(x, mf))
    tl.alloc(_copy_bytes(w, mf))
    s = _expand_param(stride, 2 if not k3 else 1)
    p = _expand_param(padding, 2 if not k3 else 1)
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
    tl = _Timeline()
    x, w, mf, s, p = _slow2d_operands(tl, input, weight, stride, padding)
    go = _as_2d(grad_output, weight.dim() == 3)
    go_copy = _copy_bytes(go, mf)
    if mask[0]:
        tl.alloc(go_copy)
        tl.alloc(_nbytes(x), output=True)
        tl.free(go_copy)
    if mask[2]:
        tl.alloc(w.shape[0] * item, output=True)
    if mask[1]:
        tl.alloc(_nbytes(w), output=True)
        tl.alloc(go_copy)
        cols = tl.alloc(_columns_bytes(tuple(x.shape), tuple(w.shape[2:]), s, p, item))
        tl.free(cols)
        tl.free(go_copy)
    return tl.above_outputs()


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
    x, w = _as_2d(input, k3), _as_2d(weight, k3)
    s, p, d = (_expand_param(v, 1 if k3 else 2) for v in (stride, padding, dilation))
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
    tl = _Timeline()
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


# --------------------------------------------------------------------------------------------
# probe: run the kernel once on this CPU under torch.profiler
# --------------------------------------------------------------------------------------------
_PROBE_CACHE: dict = {}


def probing_enabled() -> bool:
    return os.environ.get(PROBE_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _probe_limit_bytes() -> int:
    try:
        return int(float(os.environ.get(PROBE_LIMIT_ENV, PROBE_LIMIT_MB)) * MiB)
    except ValueError:
        return PROBE_LIMIT_MB * MiB


def _signature(x):
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), tuple(x.stride()), str(x.dtype), bool(x.requires_grad))
    if isinstance(x, (list, tuple)):
        return tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _signature(v)) for k, v in x.items()))
    return x


def _restride(t: torch.Tensor, shape) -> tuple[int, ...]:
    """Dense strides for ``shape`` that keep ``t``'s dimension order (like ``empty_like``); stride-0
    (expanded) dims stay 0."""
    order = sorted(range(t.dim()), key=lambda i: (-t.stride(i) if t.stride(i) else 1, i))
    strides = [0] * t.dim()
    step = 1
    for i in reversed(order):
        if t.stride(i) == 0 and t.dim() > 0:
            continue
        strides[i] = step
        step *= shape[i]
    return tuple(strides)


def _materialize(t: torch.Tensor, batch: int | None = None) -> torch.Tensor:
    shape = list(t.shape)
    stride = tuple(t.stride())
    if batch is not None and t.dim() > 0:
        shape[0] = batch
        stride = _restride(t, shape)
    real = torch.empty_strided(shape, stride, dtype=t.dtype, device="cpu")
    real.zero_()  # defined values (no NaN/denormal slow paths); zero_ of an expanded view is fine
    if t.requires_grad and real.is_floating_point():
        real.requires_grad_(True)
    return real


def _meta_output_bytes(op, args: tuple, kwargs: dict) -> int:
    """Bytes of ``op``'s outputs, from running it on meta copies of the arguments (nothing allocated)."""
    meta_args, meta_kwargs = tree_map(lambda a: a.to("meta") if isinstance(a, torch.Tensor) else a, (args, kwargs))
    return _alloc_bytes(op(*meta_args, **meta_kwargs))


def _alloc_bytes(args) -> int:
    flat, _ = tree_flatten(args)
    return sum(_nbytes(t) for t in flat if isinstance(t, torch.Tensor))


def _run_profiled(op, args, kwargs, batch: int | None, batched: tuple[int, ...]) -> int:
    """Kernel peak minus what it still holds at the end (its outputs), from profiler memory events."""
    real_args = tuple(
        _materialize(a, batch if i in batched else None) if isinstance(a, torch.Tensor) else a
        for i, a in enumerate(args)
    )
    real_kwargs = tree_map(lambda a: _materialize(a) if isinstance(a, torch.Tensor) else a, kwargs)
    with memory_profile() as prof:
        out = op(*real_args, **real_kwargs)
    live = peak = 0
    for _, b in cpu_memory_events(prof):
        live += b
        peak = max(peak, live)
    del out
    return max(0, peak - live)


MIN_BATCH_TO_EXTRAPOLATE = 4  # two smaller batches n1 < n2 <= batch / 2 exist


def probe_kernel_peak(op, args: tuple, kwargs: dict, batched: tuple[int, ...] = (0,)) -> int | None:
    """Bytes the CPU kernel of ``op`` holds above its outputs at its peak, measured by running it.

    ``args`` may be meta tensors: they are replaced by zero-filled CPU tensors with the same shapes,
    strides, dtypes and requires_grad. ``batched`` are the positions of the arguments whose dim 0
    is the batch: when the inputs exceed the probe limit the op runs at two batch sizes that fit
    and the result is extrapolated linearly to the real batch. None when probing is off, when the
    inputs exceed the limit and the batch cannot shrink below it, or when the probe fails (e.g.
    another profiler is already running).
    """
    if not probing_enabled():
        return None
    key = (str(op), _signature(args), _signature(kwargs), torch.get_num_threads(),
           torch.backends.mkldnn.enabled)
    if key in _PROBE_CACHE:
        return _PROBE_CACHE[key]
    result = None
    try:
        outputs = _meta_output_bytes(op, args, kwargs)
        total = _alloc_bytes((args, kwargs)) + outputs
        limit = _probe_limit_bytes()
        batch = next((args[i].shape[0] for i in batched if isinstance(args[i], torch.Tensor) and args[i].dim()), None)
        if total <= limit:
            result = _run_profiled(op, args, kwargs, None, batched)
        elif batch and batch >= MIN_BATCH_TO_EXTRAPOLATE:
            # every output is counted as per-sample (grad_weight is not): n2 errs small, the probe stays bounded
            batched_bytes = sum(_nbytes(args[i]) for i in batched if isinstance(args[i], torch.Tensor)) + outputs
            per_sample = max(1, batched_bytes // batch)
            fixed = total - per_sample * batch
            n2 = min(batch // 2, (limit - fixed) // per_sample)
            if n2 >= 2:  # two batch sizes within the limit: extrapolate; else no probe
                n1 = max(1, n2 // 2)
                y1 = _run_profiled(op, args, kwargs, n1, batched)
                y2 = _run_profiled(op, args, kwargs, n2, batched)
                result = max(0, round(y2 + (y2 - y1) * (batch - n2) / (n2 - n1)))
    except Exception:
        result = None
    _PROBE_CACHE[key] = result
    return result


# --------------------------------------------------------------------------------------------
# handlers
# --------------------------------------------------------------------------------------------
def _need_backward(*tensors) -> bool:
    """Convolution.cpp: ``GradMode::is_enabled() && (input/weight/bias requires_grad)``."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def convolution(args: tuple, kwargs: dict, out) -> list[int]:
    """``aten.convolution`` on CPU (see the module docstring)."""
    a = _tensor_args_conv(args, kwargs)
    x, w, b = a["input"], a["weight"], a.get("bias")
    backend = conv_backend(x, w, a["stride"], a["padding"], a["dilation"], a["transposed"],
                           a["output_padding"], a["groups"], _need_backward(x, w, b))
    if backend in ("Empty", "MkldnnEmpty"):
        return []
    if backend == "Slow2d" and int(a["groups"]) == 1:
        return slow2d_forward(x, w, a["stride"], a["padding"])
    measured = probe_kernel_peak(torch.ops.aten.convolution.default, tuple(args), dict(kwargs), batched=(0,))
    if measured is not None:
        return [measured] if measured else []
    if backend == "Mkldnn":
        return mkldnn_estimate(x, w, a["stride"], a["padding"], a["dilation"], int(a["groups"]))
    return []


def convolution_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``aten.convolution_backward`` on CPU (see the module docstring)."""
    a = _tensor_args_conv_bwd(args, kwargs)
    go, x, w = a["grad_output"], a["input"], a["weight"]
    backend = conv_backend(x, w, a["stride"], a["padding"], a["dilation"], a["transposed"],
                           a["output_padding"], a["groups"], need_backward=True)
    if backend in ("Empty", "MkldnnEmpty"):
        return []
    if backend == "Slow2d" and int(a["groups"]) == 1:
        return slow2d_backward(go, x, w, a["stride"], a["padding"], a["output_mask"])
    measured = probe_kernel_peak(torch.ops.aten.convolution_backward.default, tuple(args), dict(kwargs),
                                 batched=(0, 1))
    if measured is not None:
        return [measured] if measured else []
    if backend == "Mkldnn":
        return mkldnn_estimate(x, w, a["stride"], a["padding"], a["dilation"], int(a["groups"]),
                               output_mask=a["output_mask"])
    return []


# --------------------------------------------------------------------------------------------
# normalization: aten/src/ATen/native/Normalization.cpp, cpu/batch_norm_kernel.cpp,
# layer_norm.cpp, cpu/layer_norm_kernel.cpp
# --------------------------------------------------------------------------------------------
def _param_size(x: torch.Tensor) -> int:
    """Statistics dtype: float for reduced-precision inputs ("mixed_type" / opmath), else the input's."""
    return 4 if x.dtype in (torch.bfloat16, torch.float16) else x.element_size()


def _bn_contiguous(t: torch.Tensor) -> bool:
    """Normalization.cpp ``is_contiguous``: contiguous in any of the dense formats."""
    return (t.is_contiguous() or t.is_contiguous(memory_format=torch.channels_last)
            or t.is_contiguous(memory_format=torch.channels_last_3d))


def _bn_channels_last_kernel(x: torch.Tensor) -> bool:
    """batch_norm_kernel.cpp picks its ``*_channels_last_impl`` for channels-last inputs and for
    contiguous ones whose image size is 1 ("NC11 is also channels last")."""
    image = x.numel() // max(1, x.shape[0] * x.shape[1]) if x.dim() >= 2 else 1
    return _suggest_memory_format(x) != torch.contiguous_format or image == 1


def _is_contig(t) -> bool:
    return t is None or t.is_contiguous()


def _batch_norm(x, w, b, rm, rv, train: bool) -> list[int]:
    """``batch_norm_cpu`` (Normalization.cpp), the CPU kernel of native_batch_norm and friends.

    1. outputs: ``output`` (empty_like), ``save_mean`` and ``save_var`` (C each when training);
    2. training, ``batch_norm_cpu_update_stats_template`` on a contiguous input: ``_mean`` and
       ``_var_sum`` (C each), plus, in ``batch_norm_cpu_collect_stats_channels_last_impl``, a
       ``{num_threads, C}`` partial-sum buffer; all freed before the transform;
    3. ``batch_norm_cpu_transform_input_template``: on the all-contiguous path the kernel computes
       ``alpha``/``beta`` (C each); on the strided path in eval mode ``1 / at::sqrt(running_var + eps)``
       (two C-sized temporaries).
    """
    c = x.shape[1] if x.dim() > 1 else 1
    ps = _param_size(x)
    all_contig = _bn_contiguous(x) and _is_contig(w) and _is_contig(b) and _is_contig(rm) and _is_contig(rv)
    tl = _Timeline()
    tl.alloc(_nbytes(x), output=True)
    if train:
        tl.alloc(2 * c * ps, output=True)
        if _bn_contiguous(x):
            stats = tl.alloc(2 * c * ps)
            if _bn_channels_last_kernel(x):
                buf = tl.alloc(torch.get_num_threads() * c * ps)
                tl.free(buf)
            tl.free(stats)
    if all_contig:
        ab = tl.alloc(2 * c * ps)
        tl.free(ab)
    elif not train and rv is not None:
        tmp = tl.alloc(3 * c * ps)  # running_var + eps, sqrt(.), 1 / (.): one full expression
        tl.free(tmp)
    return tl.above_outputs()


def batch_norm(args: tuple, kwargs: dict, out) -> list[int]:
    """native_batch_norm / _native_batch_norm_legit(input, weight, bias, running_mean, running_var,
    training, momentum, eps); the ``no_stats`` overload has no running stats."""
    a = list(args)
    if len(a) > 3 and isinstance(a[3], bool):  # _native_batch_norm_legit.no_stats
        a = a[:3] + [None, None] + a[3:]
    train = a[5] if len(a) > 5 else kwargs.get("training", True)
    return _batch_norm(a[0], a[1], a[2], a[3], a[4], bool(train))


def batch_norm_no_training(args: tuple, kwargs: dict, out) -> list[int]:
    """_native_batch_norm_legit_no_training(input, weight, bias, running_mean, running_var, momentum, eps)."""
    return _batch_norm(args[0], args[1], args[2], args[3], args[4], False)


def batch_norm_with_update(args: tuple, kwargs: dict, out) -> list[int]:
    """_batch_norm_with_update(input, weight, bias, running_mean, running_var, momentum, eps): training."""
    return _batch_norm(args[0], args[1], args[2], args[3], args[4], True)


def batch_norm_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``batch_norm_backward_cpu_template`` (Normalization.cpp) for native_batch_norm_backward and
    batch_norm_backward (grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,
    train, eps, output_mask[, reserve]).

    1. ``grad_input = at::empty_like(input, input.suggest_memory_format())``, grad_weight, grad_bias;
    2. all-contiguous path: ``grad_input = at::empty_like(input, suggest_memory_format_contig(input))``
       *again* (the first one is freed when it is replaced: grad_input is allocated twice), then the
       kernel; ``batch_norm_cpu_backward_channels_last_impl`` adds a ``{2, num_threads, C}`` buffer
       (and, in eval mode, the C-sized invstd it derives from running_var);
    3. strided path: ``at::sum(grad_out, reduce_dims)`` (C), held to the end.
    """
    go, x = args[0], args[1]
    mask = list(args[9] if len(args) > 9 else kwargs.get("output_mask", (True, True, True)))
    c = x.shape[1] if x.dim() > 1 else 1
    ps = _param_size(x)
    tl = _Timeline()
    gi = tl.alloc(_nbytes(x) if mask[0] else 0)
    tl.alloc(c * ps * (int(bool(mask[1])) + int(bool(mask[2]))), output=True)
    all_contig = (_bn_contiguous(x) and _bn_contiguous(go)
                  and _suggest_memory_format(x) == _suggest_memory_format(go))
    if all_contig:
        if mask[0]:
            tl.alloc(_nbytes(x), output=True)
            tl.free(gi)
        if _bn_channels_last_kernel(x):
            train = bool(args[7]) if len(args) > 7 else bool(kwargs.get("train", True))
            buf = tl.alloc(2 * torch.get_num_threads() * c * ps + (0 if train else c * ps))
            tl.free(buf)
    else:
        tl.outputs += gi
        tl.alloc(c * go.element_size())
    return tl.above_outputs()


def layer_norm(args: tuple, kwargs: dict, out) -> list[int]:
    """``layer_norm_cpu`` (layer_norm.cpp): native_layer_norm(input, normalized_shape, weight, bias, eps).

    ``X = input.expect_contiguous()`` (and gamma/beta): a copy of a strided input lives through the
    op; then Y, mean and rstd (the outputs)."""
    x = args[0]
    w = args[2] if len(args) > 2 else kwargs.get("weight")
    b = args[3] if len(args) > 3 else kwargs.get("bias")
    extra = _copy_bytes(x) + _copy_bytes(w) + _copy_bytes(b)
    return [extra] if extra else []


def layer_norm_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``layer_norm_backward_cpu`` (layer_norm.cpp) + ``LayerNormBackwardKernelImplInternal``
    (cpu/layer_norm_kernel.cpp): native_layer_norm_backward(grad_out, input, normalized_shape,
    mean, rstd, weight, bias, output_mask).

    1. ``input``/``weight``/``bias`` ``.expect_contiguous()``: copies of strided ones, held;
    2. dX, dgamma, dbeta (outputs);
    3. ``dY.contiguous()`` passed to the kernel (a copy if strided);
    4. with dgamma or dbeta requested: ``buffer.resize_({2, num_threads, N})`` (N = normalized size),
       "an immediate buffer" for the per-thread partial sums.
    """
    go, x, shape = args[0], args[1], args[2]
    w = args[5] if len(args) > 5 else kwargs.get("weight")
    b = args[6] if len(args) > 6 else kwargs.get("bias")
    mask = list(args[7] if len(args) > 7 else kwargs.get("output_mask", (True, True, True)))
    n = math.prod(shape)
    m = x.numel() // max(1, n)
    extra = _copy_bytes(x) + _copy_bytes(w) + _copy_bytes(b)
    if m > 0 and n > 0:
        extra += _copy_bytes(go)
        if mask[1] or mask[2]:
            extra += 2 * torch.get_num_threads() * n * x.element_size()
    return [extra] if extra else []


# --------------------------------------------------------------------------------------------
# embedding backward (aten/src/ATen/native/Embedding.cpp) and GELU backward (Activation.cpp)
# --------------------------------------------------------------------------------------------
def embedding_dense_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``embedding_dense_backward_cpu``: ``grad_weight = at::zeros(...)`` (the output), then
    ``indices.contiguous()`` and ``grad_.contiguous()`` (copies of strided ones, held to the end);
    the ``scale_grad_by_freq`` counts are a ``new index_t[]`` array, not c10 memory."""
    grad, indices = args[0], args[1]
    extra = _copy_bytes(indices) + _copy_bytes(grad)
    return [extra] if extra else []


def gelu_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``gelu_backward_out_cpu`` (Activation.cpp): with ``use_mkldnn(self)`` (self contiguous, fp32/bf16,
    more than one element, oneDNN on) and the exact (erf) GELU, ideep computes the gradient. A
    strided ``grad`` is reordered into a dense copy, and when ``grad_input`` itself is strided (it
    takes the layout of a permuted ``grad``) ideep computes into a dense temporary and reorders it
    back: one or two buffers of the output's size (measured on avx512: permuted grad -> 2,
    expanded or sliced grad -> 1)."""
    grad, x = args[0], args[1]
    approximate = kwargs.get("approximate", "none")
    use_mkldnn = (torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled and x.is_contiguous()
                  and x.numel() > 1 and x.dtype in (torch.float32, torch.bfloat16))
    if not use_mkldnn or approximate != "none" or grad.is_contiguous():
        return []
    size = x.numel() * x.element_size()
    strided_out = isinstance(out, torch.Tensor) and not out.is_contiguous()
    return [size * (2 if strided_out else 1)]


# --------------------------------------------------------------------------------------------
# sort and histc: the routing ops of mixture-of-experts blocks (transformers/integrations/moe.py)
# --------------------------------------------------------------------------------------------
def sort(args: tuple, kwargs: dict, out) -> list[int]:
    """``sort_kernel`` (aten/src/ATen/native/cpu/SortingKernel.cpp, torch 2.13) starts with
    ``_fill_indices(indices, dim)``: ``at::arange(0, dim_size, indices.options())`` (int64, the sorted
    dimension's length), copied broadcast into ``indices`` and freed; the sort itself works in place on
    the outputs (``std::sort`` / ``std::stable_sort``; the fbgemm radix path's key buffers are
    ``std::vector``, not c10 memory). Measured: [128] -> 1,024 B, [64, 4] along -1 -> 32 B."""
    x = args[0]
    dim = kwargs.get("dim", args[1] if len(args) > 1 and isinstance(args[1], int) else -1)
    if x.dim() == 0 or x.numel() == 0:
        return []
    return [x.size(dim) * torch.tensor([], dtype=torch.int64).element_size()]


def histc(args: tuple, kwargs: dict, out) -> list[int]:
    """``histogram_histc_out`` (aten/src/ATen/native/Histogram.cpp, torch 2.13) makes the ``bins + 1``
    bin edges (``linspace`` into a tensor of the input's dtype), then ``histogramdd_cpu_contiguous``
    (native/cpu/HistogramKernel.cpp) sums into ``at::zeros({num_threads, bins})`` per-thread histograms
    before reducing them into the output; both freed before returning, the edges last. Measured with 2
    threads, float32, bins=4: +20 (edges), +16 (output), +32 (per-thread), -32, -20."""
    x = args[0]
    bins = kwargs.get("bins", args[1] if len(args) > 1 else 100)
    item = x.element_size()
    return [(bins + 1) * item + torch.get_num_threads() * bins * item]
