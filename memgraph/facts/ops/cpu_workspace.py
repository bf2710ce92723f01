"""Kernel workspaces on the ``cpu`` target: memory a CPU kernel takes from c10's CPU allocator
for itself and gives back before it returns.

torch.profiler (the ``cpu`` ground truth, :mod:`memgraph.measure.cpu`) sees these buffers; the
meta-device trace cannot, because they never pass through the dispatcher. Handlers follow
:data:`memgraph.facts.ops.registry.WorkspaceFn`: ``(args, kwargs, out) -> [bytes, ...]``.

This module holds the registry's handlers for convolution and the smaller kernels; each model they use is a
module of its own: ``cpu_conv_backend`` (which backend ATen picks), ``cpu_slow2d`` (im2col + GEMM, rule by
rule), ``cpu_kernel_probe`` (oneDNN kernels measured once on this CPU), ``cpu_mkldnn_estimate`` (the estimate
without a probe), ``cpu_norm_workspace`` (batch and layer norm handlers) and ``cpu_buffers`` (byte counting
they share).

How an entry is read. The recorder allocates each entry right after the op's outputs and frees it
at once, one entry after the other (see ``Recorder._transient``). So buffers that are live
*together* inside the kernel are summed into one entry, and what an entry has to get right is the
kernel's peak: ``entry = (peak of the kernel's own allocations) - (bytes of its outputs)``. That
is exact for the peak even where the kernel allocates a buffer *before* its output (slow_conv2d's
im2col columns) or frees part of it before allocating the output (oneDNN reorders): the trace's
peak inside the op is ``outputs + entry`` = the kernel's peak. :class:`Timeline` replays a
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

import torch

from memgraph.facts.ops.cpu_buffers import copy_bytes, tensor_args_conv, tensor_args_conv_bwd
from memgraph.facts.ops.cpu_conv_backend import conv_backend
from memgraph.facts.ops.cpu_kernel_probe import probe_kernel_peak
from memgraph.facts.ops.cpu_mkldnn_estimate import mkldnn_estimate
from memgraph.facts.ops.cpu_slow2d import slow2d_backward, slow2d_forward


# --------------------------------------------------------------------------------------------
# handlers
# --------------------------------------------------------------------------------------------
def _need_backward(*tensors) -> bool:
    """Convolution.cpp: ``GradMode::is_enabled() && (input/weight/bias requires_grad)``."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def convolution(args: tuple, kwargs: dict, out) -> list[int]:
    """``aten.convolution`` on CPU (see the module docstring)."""
    a = tensor_args_conv(args, kwargs)
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
    a = tensor_args_conv_bwd(args, kwargs)
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
# embedding backward (aten/src/ATen/native/Embedding.cpp) and GELU backward (Activation.cpp)
# --------------------------------------------------------------------------------------------
def embedding_dense_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``embedding_dense_backward_cpu``: ``grad_weight = at::zeros(...)`` (the output), then
    ``indices.contiguous()`` and ``grad_.contiguous()`` (copies of strided ones, held to the end);
    the ``scale_grad_by_freq`` counts are a ``new index_t[]`` array, not c10 memory."""
    grad, indices = args[0], args[1]
    extra = copy_bytes(indices) + copy_bytes(grad)
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


def mse_loss(args: tuple, kwargs: dict, out) -> list[int]:
    """``mse_loss`` (aten/src/ATen/native/Loss.cpp, torch 2.13): the elementwise loss goes into a new tensor of the
    broadcast shape (``TensorIterator::borrowing_binary_op(loss, input, target)``), which ``apply_loss_reduction``
    then means or sums into the output; without a reduction (0) that tensor is the output. ``mse_loss_backward``
    writes into its output only. Measured: [2, 50, 32] fp32, mean -> 12,800 B."""
    x, target = args[0], args[1]
    reduction = kwargs.get("reduction", args[2] if len(args) > 2 else 1)
    if reduction == 0:
        return []
    return [torch.broadcast_shapes(x.shape, target.shape).numel() * x.element_size()]


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
