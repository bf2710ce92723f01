"""Output strides of pointwise ops whose inputs are ambiguous [N, C, 1, 1]-like tensors (both targets).

A TensorIterator op (aten/src/ATen/TensorIterator.cpp, torch 2.13, ``compute_fast_setup_type``) whose operands all
have the output's shape and are all ``is_contiguous()`` takes the CONTIGUOUS fast setup and allocates its output
with contiguous strides ("TODO this leads to ambiguous cases (NC11) to be always treated as contiguous"). A tensor
with size-1 dimensions is contiguous under several stride patterns: the CPU convolution's channels-last
``[1, 256, 1, 1]`` output has strides (256, 1, 256, 256) and ``is_contiguous()`` is true. PyTorch's meta kernels
of the same ops (``torch/_prims_common`` ``compute_elementwise_output_strides``) keep the input's stride order
instead, so on meta ``gelu(x)`` of that tensor is (256, 1, 256, 256) where the real kernel returns (256, 1, 1, 1).
The strides decide ``suggest_memory_format`` of what follows: the next convolution's channels-last choice, its
backend's scratch (:mod:`memgraph.trace.emulate.conv_layout`, the probed workspaces of
:mod:`memgraph.facts.ops.cpu_workspace`). Measured on FocalNet's 1x1 last stage: gelu, add, mul, div, where,
sigmoid, gelu_backward of such a tensor return (256, 1, 1, 1) on the CPU.

The operands are the op's Tensor arguments plus a number passed as ``self``/``other`` (the ``.Scalar``
overloads of binary and comparison ops wrap it into a 0-dim operand, so their shapes differ and the fast setup is
off: ``x + 1`` and ``x > 0`` keep the stride order on the CPU too); other numbers (``pow``'s exponent, ``alpha``,
``threshold``) are not operands. ``clone`` (``empty_like`` with ``preserve_format``) and ops with a
``memory_format`` argument are left alone, as is ``masked_fill`` (a clone, then filled in place).
"""

from __future__ import annotations

import torch

from memgraph.private_api import disable_current_modes as _disable_current_modes

aten = torch.ops.aten
_NOT_TENSOR_ITERATOR = {aten.clone.default, aten.masked_fill.Scalar, aten.masked_fill.Tensor}
_SCALAR_OPERANDS = ("self", "other")


def _operands(func, args, kwargs) -> list | None:
    """The TensorIterator operands of ``func``'s call (None: an op this rule does not cover)."""
    schema = func._schema
    if schema.is_mutable or any(a.name == "memory_format" for a in schema.arguments):
        return None
    out = []
    for i, arg in enumerate(schema.arguments):
        value = args[i] if i < len(args) else kwargs.get(arg.name)
        if isinstance(value, torch.Tensor):
            out.append(value)
        elif isinstance(value, (int, float, bool, complex)) and arg.name in _SCALAR_OPERANDS:
            out.append(value)
    return out


# id(OpOverload) -> (the op, whether the rule may apply): by id, as OpOverload.__hash__ is Python (torch 2.13
# torch/_ops.py); the op is held, so its id is never reused by another op
_POINTWISE: dict = {}


def _pointwise(func) -> bool:
    known = _POINTWISE.get(id(func))
    if known is None:
        known = _POINTWISE[id(func)] = (func, func not in _NOT_TENSOR_ITERATOR and torch.Tag.pointwise in func.tags)
    return known[1]


def _contiguous_strides(shape) -> tuple:
    """The strides ``torch.empty(shape)`` gets (c10 ``contiguous_strides``: each the product of the sizes after
    it, a size 0 counted as 1)."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)


def contiguous_fast_setup(func, args, kwargs, out):
    """``out`` restrided as the real kernel allocates it, when the CONTIGUOUS fast setup applies (else ``out``)."""
    if not isinstance(out, torch.Tensor) or not out.is_meta or out.dim() < 2:
        return out
    if not _pointwise(func):
        return out
    operands = _operands(func, args, kwargs)
    if not operands or not all(isinstance(t, torch.Tensor) and t.shape == out.shape and t.is_contiguous()
                               for t in operands):
        return out
    if out.stride() == _contiguous_strides(out.shape):  # what torch.empty(out.shape) would have
        return out
    with _disable_current_modes():
        want = torch.empty(out.shape, dtype=out.dtype, device="meta")
    return out if tuple(want.stride()) == tuple(out.stride()) else want


__all__ = ["contiguous_fast_setup"]
