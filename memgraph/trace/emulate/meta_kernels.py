"""Where PyTorch's meta kernels describe another program than the target's kernels run, and the fix.

:class:`MetaKernelFixes` is one dispatch mode entered *below* the recorder (so the recorder records the
corrected outputs, as if the meta kernel had made them):

* ``aten._grouped_mm`` in float32/float16 (mixture-of-experts; the meta kernel accepts bfloat16 only):
  :mod:`memgraph.trace.emulate.moe`;
* convolution outputs in channels-last where the CPU kernels compute in it (``cpu`` target):
  :mod:`memgraph.trace.emulate.conv_layout`;
* pointwise outputs of ambiguous ``[N, C, 1, 1]``-like inputs, contiguous as TensorIterator's fast setup makes
  them (both targets): :mod:`memgraph.trace.emulate.pointwise_layout`;
* autograd's in-place gradient accumulation, which a dispatch mode turns off (both targets: the engine is
  the same): :mod:`memgraph.trace.emulate.inplace_grad_sum`;
* ``gather``'s backward, which a dispatch mode or meta makes out of place (both targets):
  :mod:`memgraph.trace.emulate.gather_backward`.
"""

from __future__ import annotations

import torch

from memgraph.private_api import TorchDispatchMode
from memgraph.trace.emulate.conv_layout import cpu_conv_layout
from memgraph.trace.emulate.gather_backward import GatherBackwardInPlace
from memgraph.trace.emulate.inplace_grad_sum import accumulate_in_place
from memgraph.trace.emulate.moe import grouped_mm_on_meta
from memgraph.trace.emulate.pointwise_layout import contiguous_fast_setup
from memgraph.trace.record.recorder import without_dynamo_wrapper

aten = torch.ops.aten
_CONV = {aten.convolution.default, aten.convolution_backward.default}


@without_dynamo_wrapper  # a per-op cost otherwise (trace/record/recorder.py)
class MetaKernelFixes(TorchDispatchMode):
    """Corrected meta outputs for the ops listed in the module docstring; every other op runs as is."""

    def __init__(self, target: str):
        super().__init__()
        self.target = target
        self.grouped_mm_calls = 0  # non-bf16 grouped GEMMs answered (tests)
        self.restrided_convs = 0  # convolutions given the CPU kernel's channels-last outputs (tests)
        self.stolen_accumulations = 0  # gradient accumulations run in place, as the engine does (tests)
        self.restrided_pointwise = 0  # pointwise outputs given TensorIterator's contiguous fast-setup strides (tests)
        self.gather_backward = GatherBackwardInPlace()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = grouped_mm_on_meta(func, args, kwargs)
        if out is not None:
            self.grouped_mm_calls += 1
            return out
        if func is aten.add.Tensor:
            out = accumulate_in_place(func, args, kwargs)
            if out is not None:
                self.stolen_accumulations += 1
                return out
        out = self.gather_backward.run(func, args, kwargs)
        if out is not None:
            return out
        out = func(*args, **kwargs)
        self.gather_backward.saw(func, out)
        fixed = contiguous_fast_setup(func, args, kwargs, out)
        if fixed is not out:
            self.restrided_pointwise += 1
            return fixed
        if self.target == "cpu" and func in _CONV:
            fixed = cpu_conv_layout(func, args, kwargs, out)
            if fixed is not out:
                self.restrided_convs += 1
            return fixed
        return out


__all__ = ["MetaKernelFixes"]
