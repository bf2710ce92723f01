"""Pointwise outputs of ambiguous [N, C, 1, 1] inputs (memgraph/trace/emulate/pointwise_layout.py): the corrected meta
strides equal the real CPU kernel's, op by op."""

import pytest
import torch

from memgraph.trace.emulate.meta_kernels import MetaKernelFixes

aten = torch.ops.aten

CASES = {  # name -> f(x, y): x, y [1, 256, 1, 1] with channels-last strides (256, 1, 256, 256), as a CPU conv returns
    "gelu": lambda x, y: torch.nn.functional.gelu(x),
    "sigmoid": lambda x, y: x.sigmoid(),
    "add": lambda x, y: torch.add(x, y, alpha=2),
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "where": lambda x, y: torch.where(x > 0, x, y),
    "pow": lambda x, y: x.pow(2),
    "gelu_backward": lambda x, y: aten.gelu_backward(x, y),
    "add scalar": lambda x, y: x + 1,  # a wrapped 0-dim operand: no fast setup, the stride order is kept
    "gt scalar": lambda x, y: x > 0,
    "mul 0-d tensor": lambda x, y: x * torch.tensor(2.0, device=x.device),
    "clone": lambda x, y: x.clone(),  # empty_like(preserve_format)
}


def _pair(device):
    return [torch.empty_strided((1, 256, 1, 1), (256, 1, 256, 256), device=device).fill_(0.5) for _ in range(2)]


@pytest.mark.parametrize("name", list(CASES))
def test_meta_strides_equal_the_cpu_kernels(name):
    real = CASES[name](*_pair("cpu"))
    with MetaKernelFixes("cpu"):
        meta = CASES[name](*_pair("meta"))
    assert meta.stride() == real.stride(), (meta.stride(), real.stride())


def test_unambiguous_layouts_untouched():
    """A genuinely channels-last [2, 8, 3, 3] input keeps channels-last (is_contiguous() is false)."""
    x = torch.empty(2, 8, 3, 3, device="meta", memory_format=torch.channels_last)
    with MetaKernelFixes("cpu") as mode:
        y = x.sigmoid()
    assert y.is_contiguous(memory_format=torch.channels_last) and mode.restrided_pointwise == 0
