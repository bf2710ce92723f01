"""Mixture-of-experts on meta: ``aten._grouped_mm`` with the dtypes the real kernels accept.

transformers 5.23 runs the experts of every ``@use_experts_implementation`` MoE block (Mixtral, GPT-OSS,
GLM-4 MoE, Granite MoE, MiniMax, DeepSeek, Qwen MoE, ...) through ``grouped_mm_experts_forward``
(``transformers/integrations/moe.py``), the default ``config._experts_implementation`` whenever
``torch.nn.functional.grouped_mm`` exists (``PreTrainedModel.get_correct_experts_implementation``). That
function sorts the (token, expert) pairs by expert, gathers the hidden states in that order
(``hidden_states[perm // top_k]``), computes ``offsets = cumsum(histc(expert_ids))`` and calls
``F.grouped_mm(input.to(weight.dtype), weight, offs=offsets)`` (``_grouped_mm``, ``_can_use_grouped_mm``:
true on CPU for torch > 2.10 and on CUDA sm80+). So the routing buffers (sorted ids, permutation, gathered
and weighted rows, the inverse permutation) are ordinary ops the trace records; only the GEMM needs help.

Why: PyTorch 2.13's meta kernel of ``aten._grouped_mm`` (``torch/_meta_registrations.py``,
``_meta_grouped_mm_common``) copies the check of the CUDA *fast* path (``bf16bf16_grouped_mm``) and
rejects anything but bfloat16, while the real kernels accept every floating dtype: the CPU kernel
(``aten/src/ATen/native/GroupedMMUtils.h`` / ``Blas.cpp`` ``_grouped_mm_cpu``) and the CUDA one for other
dtypes or GPUs (``aten/src/ATen/native/cuda/GroupedBlas.cpp``: ``_grouped_mm_fallback``) loop over the
groups with ``mm_out`` into one output tensor. The output shape never depends on ``offs``'s values (the
groups are rows of one ``[S, N]`` output; an empty group writes nothing), so no values are needed.

:func:`grouped_mm_on_meta` (called by :class:`~memgraph.trace.emulate.meta_kernels.MetaKernelFixes`, a dispatch mode
below the recorder): for a non-bfloat16 ``_grouped_mm`` on meta it returns the output the meta kernel would have made for bfloat16 (same shape rules,
``_create_grouped_mm_output_tensor`` without the CUDA-only row padding, which the CPU build of torch does
not apply either), in the input's dtype. Backward (``derivatives.yaml``: ``_grouped_mm`` again on the
transposed operands) goes through the same mode.
"""

from __future__ import annotations

import torch

from memgraph.private_api import disable_current_modes as _disable_current_modes

aten = torch.ops.aten


def grouped_mm_output_shape(a: torch.Tensor, b: torch.Tensor, offs: torch.Tensor | None) -> list[int]:
    """Output shape of ``_grouped_mm(a, b, offs)`` (torch 2.13 ``_create_grouped_mm_output_tensor``)."""
    a2, b2 = a.dim() == 2, b.dim() == 2
    if a2 and b2:  # weight gradients: one [K, N] per group
        return [offs.size(0), a.size(0), b.size(1)]
    if a2:  # the forward: [S, K] rows grouped by offs, one [K, N] per group
        return [a.size(0), b.size(-1)]
    if b2:
        return [a.size(1), b.size(1)]
    return [a.size(0), a.size(1), b.size(-1)]  # batched


def grouped_mm_on_meta(func, args, kwargs):
    """The meta output of a non-bfloat16 ``aten._grouped_mm`` (None: not such a call; let the kernel run)."""
    if func is not aten._grouped_mm.default:
        return None
    a, b = args[0], args[1]
    if a.device.type != "meta" or a.dtype == b.dtype == torch.bfloat16:
        return None
    offs = args[2] if len(args) > 2 else kwargs.get("offs")
    out_dtype = (args[4] if len(args) > 4 else kwargs.get("out_dtype")) or a.dtype
    with _disable_current_modes():
        return torch.empty(grouped_mm_output_shape(a, b, offs), dtype=out_dtype, device="meta")


__all__ = ["grouped_mm_on_meta", "grouped_mm_output_shape"]
