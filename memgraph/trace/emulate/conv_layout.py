"""Memory format of CPU convolution outputs on meta (the ``cpu`` target).

PyTorch 2.13's meta kernels of ``aten.convolution`` (``torch/_meta_registrations.py`` ``meta_conv``: "Memory
format is left as contiguous: meta tensors have no device info") and ``aten.convolution_backward`` return
contiguous tensors. The CPU kernels do not: oneDNN (``ConvBackend::Mkldnn``, aten/src/ATen/native/mkldnn/Conv.cpp
``mkldnn_convolution`` / ``mkldnn_convolution_backward``, ``mkldnn_conv_use_channels_last``) and THNN
(``Slow2d``, native/ConvolutionMM2d.cpp, ``thnn_conv_use_channels_last``) compute in channels-last when the
input or the weight suggests it (``suggest_memory_format``), and return the output, grad_input and grad_weight
in that format. A model whose activations are channels-last (ConvNeXt: ``permute`` back from its channels-last
LayerNorm/MLP) so keeps channels-last convolutions on the real CPU, and their backward kernels pick other
algorithms with other scratch (a depthwise 7x7 backward on a channels-last [2, 128, 2, 2] input takes 6.4 MB
instead of 0.2 MB; measured with torch.profiler). Without this the trace is contiguous from the first
convolution on, and both the layouts downstream and the probed convolution scratch
(:mod:`memgraph.facts.ops.cpu_workspace`) are those of another program.

:func:`cpu_conv_layout` restrides the meta outputs as the CPU kernel lays them out: channels-last
(``channels_last_3d`` for 5-d) when the backend is Mkldnn, or Slow2d without groups, and the input or weight
suggests channels-last; other backends (the grouped/dilated/transposed slow paths) stay contiguous, as their
kernels allocate. Measured on HF ConvNeXt's step: every convolution output, grad_input and grad_weight then
has the real run's strides.
"""

from __future__ import annotations

import torch

from memgraph.facts.ops.cpu_conv_backend import conv_backend
from memgraph.private_api import disable_current_modes as _disable_current_modes
from memgraph.private_api import suggest_memory_format

aten = torch.ops.aten

_CHANNELS_LAST_BACKENDS = ("Mkldnn",)  # Slow2d counts when groups == 1 (see _wants_channels_last)


def _wants_channels_last(x: torch.Tensor, w: torch.Tensor, backend: str, groups: int) -> bool:
    if x.dim() not in (4, 5):
        return False
    if backend not in _CHANNELS_LAST_BACKENDS and not (backend == "Slow2d" and groups == 1):
        return False
    cl = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    return suggest_memory_format(x) == cl or suggest_memory_format(w) == cl


def _restrided(t, memory_format):
    """``t`` with exactly the strides ``empty(..., memory_format=...)`` gives: compared stride by stride, since a
    [1, C, 1, 1] tensor is "contiguous" in both formats but the CPU kernel's (128, 1, 128, 128) strides make the
    next kernel suggest channels-last where (128, 1, 1, 1) would not."""
    if not isinstance(t, torch.Tensor):
        return t
    with _disable_current_modes():
        want = torch.empty(t.shape, dtype=t.dtype, device=t.device, memory_format=memory_format)
    return t if tuple(want.stride()) == tuple(t.stride()) else want


def cpu_conv_layout(func, args, kwargs, out):
    """``out`` with the memory format the CPU kernel would give it (``out`` itself when nothing changes)."""
    forward = func is aten.convolution.default
    if not forward and func is not aten.convolution_backward.default:
        return out
    names = (("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
             if forward else ("grad_output", "input", "weight", "bias_sizes", "stride", "padding", "dilation",
                              "transposed", "output_padding", "groups", "output_mask"))
    a = dict(zip(names, args))
    a.update(kwargs)
    x, w = a["input"], a["weight"]
    if x.device.type != "meta":
        return out
    groups = int(a["groups"])
    backend = conv_backend(x, w, a["stride"], a["padding"], a["dilation"], a["transposed"], a["output_padding"],
                           groups, need_backward=True)
    if not _wants_channels_last(x, w, backend, groups):
        return out
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    if forward:
        return _restrided(out, fmt)
    grad_input, grad_weight, grad_bias = out
    return (_restrided(grad_input, fmt), _restrided(grad_weight, fmt), grad_bias)


__all__ = ["cpu_conv_layout"]
