"""cuDNN convolution workspaces (forward, backward-data, backward-filter) on a CUDA GPU.

How PyTorch allocates them (torch 2.13, ``aten/src/ATen/native/cudnn/Conv_v8.cpp``; the cuDNN v8 API
is the default, ``cudnnv8_enabled_check_debug``, unless ``TORCH_CUDNN_V8_API_DISABLED`` is set):

* ``run_conv_plan``: ``c10::cuda::CUDACachingAllocator::get()->allocate(plan.getWorkspaceSize())``
  right before ``cudnnBackendExecute`` and freed when it returns: a transient block of the caching
  allocator, alive while the convolution's operands and result are, one per direction (the backward
  runs backward-data, then backward-filter: ``cudnn_convolution_backward`` in ConvShared.cpp).
* Which engine (and so which workspace) runs is cuDNN's choice. ``torch.backends.cudnn.benchmark``
  off (the default): ``get_configs_from_heuristics`` (``CUDNN_HEUR_MODE_INSTANT``) lists engine
  configs, ``try_configs`` runs the first one that builds and whose workspace can be allocated (a
  ``c10::OutOfMemoryError`` skips to the next config). PyTorch applies no cap of its own on this
  path (``CUDNN_CONV_WS_CAP_DBG`` exists only in the v7 path, Conv_v7.cpp), so the only hard limit is
  the free device memory; a workspace never makes the step fail by itself, it only raises the peak
  when it fits (pytorch/pytorch#49207 reports heuristic workspaces of several GiB).
* benchmark on (not modelled as an option): ``get_plans_from_find`` allocates, once per shape,
  the largest workspace among the engines that fit in the largest free cached block
  (``get_available_workspace`` = ``CUDACachingAllocator::cacheInfo``), times them, frees it, then
  runs the fastest plan with its own workspace. That try never grows the reserved memory (it fits in
  a cached block), but it does raise the allocated peak of the first iteration.

The bytes depend on cuDNN's closed heuristics, so the prediction uses an expected value from one
documented mechanism and records the rest as a bounded unknown:

* expected (:func:`layout_transform_bytes`): NVIDIA's tensor-core convolution kernels work on NHWC
  data; an NCHW (``torch.contiguous_format``) convolution is run by transposing its operands to NHWC
  and the result back (NVIDIA Deep Learning Performance Guide, "Convolutional Layers User's Guide",
  Tensor Layouts In Memory: NCHW vs NHWC; profiles of PyTorch float16 NCHW convolutions show cuDNN's
  ``cudnn::ops::genericTranspose_kernel`` around them, pytorch/pytorch#54324). cuDNN allocates nothing
  itself during execution, so the transposed copies live in the workspace: input + weight + output bytes,
  in every direction (each direction reads two of the three tensors and writes the third). (That issue's
  transposes also convert float16 to float32, which would double them: not modelled.) Tensor cores are used for float16
  and bfloat16 (sm70+/sm80+) and for float32 when TF32 is allowed (``torch.backends.cudnn.allow_tf32``,
  default True; ``filterEngineConfigs`` drops tensor-core engines otherwise) on sm80+. Channels-last
  convolutions need no transposes: expected 0, as for float32 without TF32 (the FMA implicit-GEMM
  engines, "CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ... does not need any memory workspace",
  cuDNN API reference, cudnnConvolutionFwdAlgo_t).
* upper (:func:`explicit_gemm_bytes`): the explicit-GEMM algorithm ("expresses the convolution as an
  explicit matrix product. A significant memory workspace is needed to store the matrix that holds
  the input tensor data", cudnnConvolutionFwdAlgo_t ``CUDNN_CONVOLUTION_FWD_ALGO_GEMM``) holds the
  whole unfolded input, N x (C x prod(kernel)) x prod(output spatial) elements, plus the transposes.
  FFT-based engines can exceed it for some shapes; the bound is the documented GEMM family's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DIRECTIONS = ("forward", "backward-data", "backward-filter")
UNKNOWN_NAME = "cuDNN convolution workspace"
SOURCE = ("torch 2.13 aten/src/ATen/native/cudnn/Conv_v8.cpp run_conv_plan / try_configs (no cap on the "
          "heuristics path); expected: NCHW<->NHWC transposes of tensor-core engines (NVIDIA Convolutional "
          "Layers User's Guide); upper: explicit-GEMM unfolded input (cuDNN cudnnConvolutionFwdAlgo_t GEMM)")

TENSOR_CORE_DTYPES = {"float16": (7, 0), "bfloat16": (8, 0)}  # first architecture with tensor-core support
TF32_MIN_CC = (8, 0)  # TF32 tensor cores: Ampere and newer


@dataclass(frozen=True)
class ConvGeometry:
    """One cuDNN convolution, as cuDNN sees it: x (N, C, *in) * w (K, C/groups, *kernel) -> y (N, K, *out).

    For a transposed convolution cuDNN's x is the (larger) output of the transposed op and y its input
    (Convolution.cpp runs a transposed forward as a backward-data), so the roles are swapped by the caller.
    """

    batch: int
    in_channels: int  # C of x
    kernel: tuple[int, ...]  # spatial sizes of w
    out_spatial: tuple[int, ...]  # spatial sizes of y
    x_bytes: int
    w_bytes: int
    y_bytes: int
    itemsize: int
    dtype: str  # "float32" | "float16" | "bfloat16" | ...
    channels_last: bool  # cudnn_conv_suggest_memory_format is ChannelsLast / ChannelsLast3d


def uses_tensor_cores(dtype: str, compute_capability: tuple[int, int], allow_tf32: bool) -> bool:
    """Whether cuDNN's heuristics may run this dtype on tensor cores (see the module docstring)."""
    cc = tuple(compute_capability)
    if dtype in TENSOR_CORE_DTYPES:
        return cc >= TENSOR_CORE_DTYPES[dtype]
    return dtype == "float32" and allow_tf32 and cc >= TF32_MIN_CC


def layout_transform_bytes(g: ConvGeometry, compute_capability: tuple[int, int], allow_tf32: bool) -> int:
    """Expected workspace of one direction: NHWC copies of x, w and y for an NCHW tensor-core convolution."""
    if g.channels_last or not uses_tensor_cores(g.dtype, compute_capability, allow_tf32):
        return 0
    return g.x_bytes + g.w_bytes + g.y_bytes


def explicit_gemm_bytes(g: ConvGeometry) -> int:
    """The unfolded input matrix of the explicit-GEMM algorithm: N x C*prod(kernel) x prod(out) elements."""
    return g.batch * g.in_channels * math.prod(g.kernel) * math.prod(g.out_spatial) * g.itemsize


def workspace_bytes(g: ConvGeometry, compute_capability: tuple[int, int], allow_tf32: bool) -> tuple[int, int]:
    """(expected, upper) workspace bytes of one direction of ``g`` (all three directions are alike)."""
    expected = layout_transform_bytes(g, compute_capability, allow_tf32)
    upper = expected + explicit_gemm_bytes(g)
    return expected, upper


__all__ = ["DIRECTIONS", "SOURCE", "UNKNOWN_NAME", "ConvGeometry", "explicit_gemm_bytes", "layout_transform_bytes",
           "uses_tensor_cores", "workspace_bytes"]
