"""Buffers the fused SDPA backward kernels allocate on CUDA that their meta kernels do not.

The meta kernels of ``aten._scaled_dot_product_flash_attention_backward`` and
``..._efficient_attention_backward`` only return dq/dk/dv (and the bias gradient); the CUDA kernels
allocate more through the caching allocator and free it before returning. Sources: torch 2.13,
``aten/src/ATen/native/transformers/cuda/attention_backward.cu`` and
``aten/src/ATen/native/transformers/cuda/flash_attn/flash_api.cpp``, read from a stored
pytorch/pytorch ``main``.

Flash (``_scaled_dot_product_flash_attention_backward_cuda`` -> ``_flash_attention_backward`` ->
``mha_bwd``), all alive together while the kernel runs, freed on return:

* ``grad_out.contiguous()`` and ``out.contiguous()`` of the (B, Lq, H, D) views ("CUDA code assumes
  that dout is contiguous"): a copy only when the view is not contiguous.
* ``softmax_d``: float32 [B, H, round_up(Lq, 128)] (mha_bwd returns it; ``_flash_attention_backward``
  drops it).
* ``dq_accum``: float32 [B, round_up(Lq, 128), H, head_size_rounded] with ``head_size_rounded =
  round_up(D, D <= 128 ? 32 : 64)`` (``loop`` is always true). Older flash_api.cpp versions round to 32
  (224 -> 256); the two agree for every head dim up to 128. With deterministic algorithms it is
  [nsplits, ...] zeros, nsplits = ceil(SM count / (B*H)): not modelled (deterministic is off by default).
* GQA (H != H_kv): ``dk_expanded``/``dv_expanded`` [B, Lk, H, D] in q's dtype, summed into dk/dv by
  ``at::sum_out`` after the kernel.

Memory-efficient (``_scaled_dot_product_efficient_attention_backward_cuda`` -> ``_efficient_attention_backward``):

* ``grad_out_.contiguous()`` of the (B, M, H, Kv) view.
* ``delta`` [B, H, M] float32. Half-precision kernels compute it themselves
  (``Kernel::kKernelComputesDelta = kIsHalf && (kOutputInRF || kMinComputeCapability != 70)``,
  mem_eff_attention/kernel_backward.h); otherwise it is ``(grad_out.to(kFloat) * out.to(kFloat)).sum(-1)
  .transpose(-2, -1).contiguous()``: float32 copies of grad_out and out (half inputs only; ``.to`` of a
  float32 tensor is a no-op), their product [B, M, H, Kv], its sum [B, M, H] and the contiguous delta,
  all alive until the end of that expression.
* ``workspace`` (``p.workspace_size()``): float32 staging areas for dq (``kNeedsAccumGradQ``: the output is
  not float32, or split-keys are on) and for dk/dv (``kNeedsAccumGradK/V``: head dim above the kernel's
  register tile), B*H*(gq + gk + gv) floats with gq = ceil(M / BlockI) tiles of BlockI x kN floats and
  gk/gv = num_splits_key * BlockJ * round_up(D, BlockI). The kernel template (block sizes) is chosen by
  ``dispatch_cutlassB``, so the size is a bounded unknown: expected, for half precision, the dq staging
  area with 64 x 64 tiles (the sm80 kernels' smallest BlockI and kN); upper, float32 staging of dq, dk
  and dv rounded to 128 (the largest block size), num_splits_key * BlockJ <= round_up(N, BlockJ).
"""

from __future__ import annotations

from dataclasses import dataclass

FLASH_SEQ_ROUND = 128  # mha_bwd: seqlen_q_rounded = round_multiple(seqlen_q, 128)
FLOAT32 = 4
EFF_EXPECTED_TILE = 64  # sm80 cutlassB kernels: smallest kBlockSizeI / MatmulGradQ kN
EFF_UPPER_TILE = 128  # largest kBlockSizeI / kBlockSizeJ of the cutlassB kernels
EFFICIENT_UNKNOWN = "memory-efficient attention backward workspace"
EFFICIENT_SOURCE = ("torch 2.13 aten/src/ATen/native/transformers/cuda/attention_backward.cu "
                    "_efficient_attention_backward (p.workspace_size()); mem_eff_attention/kernel_backward.h "
                    "workspace_elements_gq/gk/gv")


def round_up(x: int, m: int) -> int:
    return (x + m - 1) // m * m


def flash_head_size_rounded(head_dim: int) -> int:
    """mha_bwd: ``round_multiple(head_size, head_size <= 128 ? 32 : 64)``."""
    return round_up(head_dim, 32 if head_dim <= 128 else 64)


@dataclass(frozen=True)
class AttentionBackward:
    """One SDPA backward call, as shapes (q: [B, H, Lq, D], k/v: [B, H_kv, Lk, D / Dv])."""

    batch: int
    heads: int
    kv_heads: int
    q_len: int
    kv_len: int
    head_dim: int
    head_dim_v: int
    itemsize: int  # bytes per element of q's dtype
    grad_out_copy_bytes: int = 0  # the .contiguous() copy of grad_out (0 when already contiguous)
    out_copy_bytes: int = 0  # flash only: the .contiguous() copy of out


def flash_backward_buffers(a: AttentionBackward) -> dict[str, int]:
    """Bytes of each buffer mha_bwd holds while its kernel runs (all alive together)."""
    lq_rounded = round_up(a.q_len, FLASH_SEQ_ROUND)
    buffers = {
        "grad_out.contiguous()": a.grad_out_copy_bytes,
        "out.contiguous()": a.out_copy_bytes,
        "softmax_d": a.batch * a.heads * lq_rounded * FLOAT32,
        "dq_accum": a.batch * lq_rounded * a.heads * flash_head_size_rounded(a.head_dim) * FLOAT32,
    }
    if a.kv_heads != a.heads:
        expanded = a.batch * a.kv_len * a.heads * a.head_dim * a.itemsize
        buffers["dk_expanded"] = buffers["dv_expanded"] = expanded
    return buffers


def efficient_delta_phase(a: AttentionBackward, kernel_computes_delta: bool) -> dict[str, int]:
    """Buffers alive while ``delta`` is made (before the workspace exists)."""
    b, h, m = a.batch, a.heads, a.q_len
    buffers = {"grad_out.contiguous()": a.grad_out_copy_bytes, "delta": b * h * m * FLOAT32}
    if not kernel_computes_delta:
        product = b * m * h * a.head_dim_v * FLOAT32
        if a.itemsize != FLOAT32:  # .to(kFloat) of half tensors copies; of float32 ones it is a no-op
            buffers["grad_out.to(float32)"] = buffers["out.to(float32)"] = product
        buffers["grad_out * out"] = product
        buffers["sum(-1)"] = b * m * h * FLOAT32
    return buffers


def efficient_workspace(a: AttentionBackward) -> tuple[int, int]:
    """(expected, upper) bytes of the kernel's float32 staging workspace (see the module docstring)."""
    bh = a.batch * a.heads
    expected = 0
    if a.itemsize < FLOAT32:  # output_accum_t (float) != output_t (half): dq is staged in float32
        t = EFF_EXPECTED_TILE
        expected = bh * round_up(a.q_len, t) * round_up(a.head_dim, t) * FLOAT32
    t = EFF_UPPER_TILE
    upper = bh * FLOAT32 * (round_up(a.q_len, t) * round_up(a.head_dim, t)
                            + round_up(a.kv_len, t) * (round_up(a.head_dim, t) + round_up(a.head_dim_v, t)))
    return expected, max(upper, expected)


def kernel_computes_delta(itemsize: int, head_dim: int, compute_capability: tuple[int, int]) -> bool:
    """``kKernelComputesDelta``: half kernels, except sm70 ones whose output does not fit in registers.

    kOutputInRF = kMaxK <= kBlockSizeJ: the k64 kernels (head dim <= 64) keep it in registers.
    """
    if itemsize >= FLOAT32:
        return False
    sm70_kernel = (7, 0) <= tuple(compute_capability) < (7, 5)  # dispatch_cutlassB: sm70 kernels below sm75
    return not sm70_kernel or head_dim <= 64


__all__ = [
    "EFFICIENT_SOURCE",
    "EFFICIENT_UNKNOWN",
    "AttentionBackward",
    "efficient_delta_phase",
    "efficient_workspace",
    "flash_backward_buffers",
    "flash_head_size_rounded",
    "kernel_computes_delta",
    "round_up",
]
