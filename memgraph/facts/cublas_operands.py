"""Operands PyTorch's CUDA GEMMs copy because cuBLAS cannot take them as laid out.

cuBLAS reads a matrix as column- or row-major with a leading dimension >= its rows/columns; any other
layout (a zero stride from ``expand``, e.g. the gradient ``logits.sum().backward()`` sends back, or
an arbitrary strided view) is first copied with ``tensor.clone(at::MemoryFormat::Contiguous)`` inside
the CUDA kernel, a temporary freed when the op returns. The meta kernels do not copy, so the trace
does not see it. Sources: torch 2.13 ``aten/src/ATen/native/cuda/Blas.cpp`` (read from a stored
pytorch/pytorch ``main``):

* ``aten.mm`` / ``addmm`` / ``_addmm_activation`` -> ``addmm_out_cuda_impl`` -> ``cublasCommonArgs``
  -> ``prepare_matrix_for_cublas(tensor, ...)``: no copy when ``is_non_overlapping_and_dense()``, or
  when ``strides[0] == 1 && strides[1] >= max(1, sizes[0])``, or ``strides[1] == 1 && strides[0] >=
  max(1, sizes[1])``; otherwise ``clone(Contiguous)``. (The result is a fresh contiguous tensor; the
  bias of addmm is copied into the result, no new block.)
* ``aten.bmm`` / ``baddbmm`` -> ``baddbmm_out_cuda_impl`` -> ``prepare_batch_matrix_for_cublas``: with
  the fresh row-major result (``transpose_result``), an operand [b, R, C] is taken as is when
  ``strides[2] == 1 && strides[1] >= max(1, C)`` or ``strides[1] == 1 && strides[2] >= max(1, R)``, or
  when it is contiguous with ``strides[1] != 0 && strides[2] != 0``; otherwise ``clone(Contiguous)``.
  A zero batch stride is passed to cuBLAS as is.
"""

from __future__ import annotations

from collections.abc import Sequence


def non_overlapping_and_dense(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """c10 ``TensorImpl::is_non_overlapping_and_dense``: some permutation of the dims is contiguous.

    Dimensions of size 1 are skipped (their stride is irrelevant), as in ``compute_non_overlapping_and_dense``.
    """
    dims = sorted((s, n) for n, s in zip(sizes, strides) if n != 1)
    expected = 1
    for stride, size in dims:
        if stride != expected:
            return False
        expected *= size
    return True


def is_contiguous(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Row-major contiguous, ignoring size-1 dims (c10 ``compute_contiguous``)."""
    expected = 1
    for n, s in reversed(list(zip(sizes, strides))):
        if n == 1:
            continue
        if s != expected:
            return False
        expected *= n
    return True


def matrix_needs_copy(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Blas.cpp ``prepare_matrix_for_cublas`` copies this 2-d operand."""
    if non_overlapping_and_dense(sizes, strides):
        return False
    (r, c), (sr, sc) = sizes, strides
    return not ((sr == 1 and sc >= max(1, r)) or (sc == 1 and sr >= max(1, c)))


def batch_matrix_needs_copy(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """Blas.cpp ``prepare_batch_matrix_for_cublas`` (row-major result) copies this 3-d operand."""
    (_, r, c), (_, s1, s2) = sizes, strides
    if (s2 == 1 and s1 >= max(1, c)) or (s1 == 1 and s2 >= max(1, r)):
        return False
    return not (is_contiguous(sizes, strides) and s1 != 0 and s2 != 0)


__all__ = ["batch_matrix_needs_copy", "is_contiguous", "matrix_needs_copy", "non_overlapping_and_dense"]
