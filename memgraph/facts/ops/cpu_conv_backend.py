"""Which CPU convolution backend ATen picks (aten/src/ATen/native/Convolution.cpp ``_select_conv_backend``):
asked of ATen itself on zero-byte stand-ins, with a transcription as the fallback (see facts/ops/cpu_workspace.py)."""

from __future__ import annotations

import torch

from memgraph.facts.ops.cpu_buffers import expand_param
from memgraph.private_api import suggest_memory_format
from memgraph.private_api import PrivateApiError, nnpack_enabled, select_conv_backend


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
    stride, padding, dilation, output_padding = (expand_param(p, dim) for p in (stride, padding, dilation, output_padding))
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


def thnn_memory_format(input, weight):
    """ConvUtils.h ``thnn_conv_use_channels_last``: channels_last if input or weight suggests it."""
    if input.dim() == 4 and (suggest_memory_format(input) == torch.channels_last
                             or suggest_memory_format(weight) == torch.channels_last):
        return torch.channels_last
    return torch.contiguous_format
