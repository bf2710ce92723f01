"""Operands the CPU GEMM copies because BLAS cannot take them as laid out (``--target cpu``).

``aten.mm`` (``mm_out_cpu``) and ``aten.addmm`` (``addmm_out_cpu``) both run ``addmm_impl_cpu_``
(torch 2.13, aten/src/ATen/native/LinearAlgebra.cpp). It reads the result as a column- or row-major
matrix (else it computes into ``result.transpose(0, 1).contiguous().transpose_(0, 1)`` and copies back), then
each operand as a matrix with a leading dimension of at least its rows (or columns, transposed); an operand
that is neither, e.g. the zero-stride gradient ``logits.sum().backward()`` sends back through the LM head
(``expand`` of a scalar), is first copied with ``clone(at::MemoryFormat::Contiguous)``. The copies are held
until the GEMM returns and freed with the op; the meta kernels make none, so the trace does not see them.
Measured (torch.profiler, tiny Llama ``--loss sum``, fp32): two ``[64, 1000]`` copies of 256,000 B, one in
each of the head's two backward ``mm``s. bmm/baddbmm (other CPU paths) are not modelled here.

bfloat16/float16 GEMMs go to oneDNN (mkldnn_matmul), whose scratch depends on the CPU's ISA and oneDNN's
primitive choice (measured: +50,816 B beside a contiguous [64, 64] x [64, 128] bf16 mm; the zero-stride grad
above is first copied, then +146,048 / +149,120 B of scratch), so no static rule reproduces it: as for oneDNN
convolutions (facts/ops/cpu_workspace.py), the kernel is measured once on this CPU at the traced shapes and
strides (:func:`memgraph.facts.ops.cpu_kernel_probe.probe_kernel_peak`); the stride rule is the fallback when
probing is off or the operands exceed the probe limit.
"""

from __future__ import annotations

import torch

from memgraph.facts.ops.cpu_buffers import tensor_bytes
from memgraph.facts.ops.cpu_kernel_probe import probe_kernel_peak


def _gemm_copies(result: torch.Tensor, m1: torch.Tensor, m2: torch.Tensor) -> list[int]:
    """The bytes ``addmm_impl_cpu_`` copies for ``result = m1 @ m2`` (its casts, in source order)."""
    if result.numel() == 0 or m1.size(1) == 0:  # the two early returns: nothing multiplied
        return []
    rs, rn = result.stride(), result.shape
    copies = []
    if rs[0] == 1 and (rn[1] == 1 or rs[1] >= max(1, rn[0])):
        transpose_c = False
    elif rs[1] == 1 and (rn[0] == 1 or rs[0] >= max(1, rn[1])):
        m1, m2 = m2, m1
        transpose_c = True
    else:  # "make c FORTRAN contiguous"
        transpose_c = False
        copies.append(tensor_bytes(result))
    m = rn[1 if transpose_c else 0]
    n = rn[0 if transpose_c else 1]
    k = m1.size(0 if transpose_c else 1)
    for mat, lead in ((m1, (m, k)), (m2, (k, n))):
        s = mat.stride()
        first, second = (s[1], s[0]) if transpose_c else (s[0], s[1])
        if not ((first == 1 and second >= max(1, lead[0])) or (second == 1 and first >= max(1, lead[1]))):
            copies.append(tensor_bytes(mat))  # clone(at::MemoryFormat::Contiguous)
    return [sum(copies)] if copies else []  # all held together until the GEMM returns


def _reduced_precision(out) -> bool:
    return out.dtype in (torch.bfloat16, torch.float16)


def _probed(op, args: tuple, kwargs: dict) -> list[int] | None:
    measured = probe_kernel_peak(op, tuple(args), dict(kwargs), batched=())
    return None if measured is None else ([measured] if measured else [])


def _gemm(op, args: tuple, kwargs: dict, out, mat1, mat2) -> list[int]:
    """The CPU scratch of ``op``: measured once for bf16/fp16 outputs where the probe runs, else the operand
    copies of ``mat1 @ mat2`` (:func:`_gemm_copies`)."""
    if not isinstance(out, torch.Tensor):
        return []
    if _reduced_precision(out):
        probed = _probed(op, args, kwargs)
        if probed is not None:
            return probed
    return _gemm_copies(out, mat1, mat2)


def mm(args: tuple, kwargs: dict, out) -> list[int]:
    """``aten.mm(self, mat2)``: ``addmm_impl_cpu_(result, result, self, mat2, 0, 1)``; bf16/fp16 measured once."""
    return _gemm(torch.ops.aten.mm.default, args, kwargs, out, args[0], args[1])


def addmm(args: tuple, kwargs: dict, out) -> list[int]:
    """``aten.addmm(self, mat1, mat2)``: the bias is expanded (a view) and copied into the result, no block;
    bf16/fp16 measured once."""
    return _gemm(torch.ops.aten.addmm.default, args, kwargs, out, args[1], args[2])
