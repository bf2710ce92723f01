"""The CPU flash-attention kernels' buffers (memgraph/facts/ops/cpu_attention.py): by hand, and against
torch.profiler on the real kernels (exact for float32: the buffers are the kernels' only c10 allocations)."""

import pytest
import torch

from memgraph.cpu_profiler import cpu_memory_events, memory_profile
from memgraph.facts.ops.cpu_attention import flash_backward, flash_forward, split_sizes
from memgraph.facts.ops.registry import workspace_bytes

aten = torch.ops.aten


def test_split_sizes_from_source():
    # FlashAttentionKernel.cpp: q_split 256 / 64 / 32 by query length >= 768 / >= 192, kv_split 512, both clipped
    assert split_sizes(16, 16) == (16, 16)
    assert split_sizes(191, 1000) == (32, 512)
    assert split_sizes(192, 192) == (64, 192)
    assert split_sizes(1500, 1500) == (256, 512)


def test_backward_buffers_by_hand():
    """float32 q/k/v [1, 2, 1500, 16] (Whisper's 1500 encoder positions), grad_out a contiguous [1, 2, 1500, 16]."""
    t = torch.get_num_threads()
    q = torch.empty(1, 2, 1500, 16, device="meta")
    g = torch.empty(1, 2, 1500, 16, device="meta")  # contiguous: its [B, L, H, D] view is not -> a copy
    copy = 1 * 2 * 1500 * 16 * 4  # grad_out.contiguous(): 192,000 B
    buf = t * 2 * 256 * 512 * 4  # {num_thread, 2 * qSplit * kvSplit} float32: t x 1 MiB
    dsum = 256 * 4  # {qSplit} float32, seen once by the profiler
    args = (g, q, q, q, q, torch.empty(1, 2, 1500, device="meta"), 0.0, False)
    assert flash_backward(args, {}, None) == [copy + buf + dsum]
    # grad_out behind transformers' attn_output.transpose(1, 2): already contiguous in [B, L, H, D], no copy
    gt = torch.empty(1, 1500, 2, 16, device="meta").transpose(1, 2)
    assert flash_backward((gt, *args[1:]), {}, None) == [buf + dsum]
    # the registry answers the same for the cpu target, nothing for cuda
    op = "aten._scaled_dot_product_flash_attention_for_cpu_backward.default"
    assert workspace_bytes(op, "cpu", args, {}, None) == [copy + buf + dsum]
    assert workspace_bytes(op, "cuda", args, {}, None) == []


def test_forward_buffers_by_hand():
    t = torch.get_num_threads()
    q = torch.empty(1, 2, 16, 16, device="meta")  # qSplit = kvSplit = 16, head 16
    assert flash_forward((q, q, q), {}, None) == [t * (16 * 16 + 16 + 16 + 16 * 16) * 4]
    qb = torch.empty(1, 2, 40, 16, device="meta", dtype=torch.bfloat16)  # qSplit 32, kvSplit 40
    assert flash_forward((qb, qb, qb), {}, None) == [t * (32 * 40 + 64 + 32 * 16) * 4 + t * 32 * 40 * 2]


def _kernel_extra(fn, outputs_bytes: int) -> int:
    """Peak of the real kernel's allocations above its outputs, from torch.profiler."""
    with memory_profile() as prof:
        fn()
    live = peak = 0
    for _, n in cpu_memory_events(prof):
        live += n
        peak = max(peak, live)
    return peak - outputs_bytes


@pytest.mark.parametrize("shape", [(1, 2, 16, 16), (2, 4, 300, 8), (1, 2, 1500, 16)])
@pytest.mark.parametrize("transposed_grad", [True, False])
def test_float32_kernels_match_the_profiler(shape, transposed_grad):
    b, h, length, d = shape
    q, k, v = (torch.randn(shape) for _ in range(3))
    out, lse = aten._scaled_dot_product_flash_attention_for_cpu(q, k, v)
    g = torch.randn(b, length, h, d).transpose(1, 2) if transposed_grad else torch.randn(shape)
    nbytes = q.numel() * 4
    fwd = _kernel_extra(lambda: aten._scaled_dot_product_flash_attention_for_cpu(q, k, v), nbytes + lse.numel() * 4)
    bwd = _kernel_extra(lambda: aten._scaled_dot_product_flash_attention_for_cpu_backward(g, q, k, v, out, lse, 0.0,
                                                                                          False), 3 * nbytes)
    meta = lambda t: torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")  # noqa: E731
    assert flash_forward((meta(q), meta(k), meta(v)), {}, None) == [fwd]
    assert flash_backward((meta(g), meta(q), meta(k), meta(v), meta(out), meta(lse), 0.0, False), {}, None) == [bwd]
