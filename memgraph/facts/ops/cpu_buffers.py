"""Byte counting shared by the CPU workspace models (facts/ops/cpu_workspace.py): tensor and copy sizes,
the allocation timeline of one kernel (:class:`Timeline`), and the arguments of the convolution ops."""

from __future__ import annotations

from dataclasses import dataclass

import torch


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def copy_bytes(t: torch.Tensor | None, memory_format=torch.contiguous_format) -> int:
    """Bytes ``t.contiguous(memory_format)`` allocates: a full copy unless ``t`` already is."""
    if t is None or t.is_contiguous(memory_format=memory_format):
        return 0
    return tensor_bytes(t)


@dataclass
class Timeline:
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


def tensor_args_conv(args, kwargs):
    """aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)."""
    names = ("input", "weight", "bias", "stride", "padding", "dilation", "transposed", "output_padding", "groups")
    a = dict(zip(names, args))
    a.update(kwargs)
    return a


def tensor_args_conv_bwd(args, kwargs):
    """aten.convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    names = ("grad_output", "input", "weight", "bias_sizes", "stride", "padding", "dilation", "transposed",
             "output_padding", "groups", "output_mask")
    a = dict(zip(names, args))
    a.update(kwargs)
    return a


def expand_param(p, dim: int) -> list[int]:
    """Convolution.cpp ``expand_param_if_needed``: one value for every spatial dim."""
    p = list(p) if isinstance(p, (list, tuple)) else [int(p)]
    return p * dim if len(p) == 1 else p
