"""The CPU flash-attention kernels' own buffers (``cpu`` target), from their source in torch 2.13.

``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward (aten/src/ATen/native/transformers/
attention.cpp: ``_scaled_dot_product_flash_attention_cpu`` / ``..._cpu_backward``) allocate their outputs
(``output``, the float32 ``logsumexp``; ``grad_q/k/v = at::zeros(...)``) and then call the kernels of
aten/src/ATen/native/cpu/FlashAttentionKernel.cpp, which take per-thread scratch from c10's CPU allocator
and free it before returning. Split sizes (``flash_attention_kernel_impl`` and
``flash_attention_backward_kernel_impl``): ``q_split_size`` = 256 when the query length >= 768, 64 when it
is >= 192, else 32; ``kv_split_size`` = 512; each is clipped to the sequence length
(``qSplitSize = q_split_size > qSize ? qSize : q_split_size``).

Forward (``cpu_flash_attention``, without oneDNN packing: ``with_pack`` is only tried for float16 on CPUs
where ``cpublas::need_pack(kHalf)``, not modelled):
  ``buf = at::empty({num_thread, qSplit*kvSplit + qSplit + qSplit + qSplit*headSize}, accum dtype)``
  (qk, qk_max, qk_sum, dst) and ``buf_reduced = at::empty({num_thread, qSplit, kvSplit or 0})`` in the
  input dtype (non-empty for bfloat16/float16 only).

Backward (``flash_attention_backward_kernel_impl`` then ``cpu_flash_attention_backward``):
  ``grad_out.contiguous()`` of the [B, L, H, D] view (a copy unless grad_out is the transpose of a
  contiguous tensor, as it is behind transformers' ``attn_output.transpose(1, 2)``);
  ``buf = at::empty({num_thread, 2*qSplit*kvSplit}, accum dtype)`` (attn, grad_attn);
  ``buf_reduced = at::empty({num_thread, 2*qSplit*kvSplit or 0})`` in the input dtype;
  ``dsum = at::empty({qSplit}, accum dtype)`` inside the ``parallel_for`` body, once per worker chunk.

What torch.profiler (the ``cpu`` ground truth) sees, measured on torch 2.13.0+cpu with 2 threads: every
buffer above, but ``dsum`` once only (the worker threads' allocations carry no profiler state), e.g.
float32 [1, 2, 16, 16]: forward +2048 +128 (outputs) +4352 (buf = 2 x 544 x 4); backward +3 x 2048
(grads) +4096 (buf = 2 x 2 x 16 x 16 x 4) +64 (dsum = 16 x 4), +2048 more for a contiguous grad_out.
Not modelled: for bfloat16/float16 the reduced-precision ``cpublas::gemm`` calls inside the backward take
oneDNN scratch of their own (measured: about 20 KB at [1, 2, 40, 16] bf16); the float32 kernels have none.
Buffers sized by the thread count use ``torch.get_num_threads()`` of the analysing process, as the other
cpu workspaces do (:mod:`memgraph.facts.ops.cpu_workspace`).
"""

from __future__ import annotations

import torch

KV_SPLIT = 512  # FlashAttentionKernel.cpp: every instantiation's kv_split_size
Q_SPLITS = ((768, 256), (192, 64), (0, 32))  # (query length at least, q_split_size), flash_attention_*_impl


def split_sizes(q_len: int, kv_len: int) -> tuple[int, int]:
    """(qSplitSize, kvSplitSize) the kernels use for these lengths (clipped to them)."""
    q_split = next(size for least, size in Q_SPLITS if q_len >= least)
    return min(q_split, q_len), min(KV_SPLIT, kv_len)


def _accum_bytes(dtype: torch.dtype) -> int:
    """``toOpMathType``: float for the reduced floating types, the type itself otherwise."""
    return 4 if dtype in (torch.bfloat16, torch.float16) else torch.empty((), dtype=dtype, device="meta").element_size()


def _reduced(dtype: torch.dtype) -> bool:
    return dtype in (torch.bfloat16, torch.float16)


def flash_forward(args: tuple, kwargs: dict, out) -> list[int]:
    """``_scaled_dot_product_flash_attention_for_cpu(q, k, v, ...)``, q/k/v [B, H, L, D]: buf (+ buf_reduced)."""
    q, v = args[0], args[2]
    threads = torch.get_num_threads()
    q_split, kv_split = split_sizes(q.size(2), v.size(2))
    head = q.size(3)
    buf = threads * (q_split * kv_split + 2 * q_split + q_split * head) * _accum_bytes(q.dtype)
    reduced = threads * q_split * kv_split * q.element_size() if _reduced(q.dtype) else 0
    return [buf + reduced]


def flash_backward(args: tuple, kwargs: dict, out) -> list[int]:
    """``_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, lse, ...)``: the
    grad_out copy, buf (+ buf_reduced) and one dsum, all alive together after the three gradients."""
    grad_out, q, v = args[0], args[1], args[3]
    threads = torch.get_num_threads()
    q_split, kv_split = split_sizes(q.size(2), v.size(2))
    accum = _accum_bytes(q.dtype)
    copy = 0 if grad_out.transpose(1, 2).is_contiguous() else grad_out.numel() * grad_out.element_size()
    buf = threads * 2 * q_split * kv_split * accum
    reduced = threads * 2 * q_split * kv_split * q.element_size() if _reduced(q.dtype) else 0
    dsum = q_split * accum
    return [copy + buf + reduced + dsum]


__all__ = ["flash_backward", "flash_forward", "split_sizes"]
