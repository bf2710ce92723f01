"""The allocator replay on a decoder LM's loss, at the sizes of the LLMs-from-scratch rows (issue 28).

reports/published/llms-from-scratch-training-speed: GPT-2 124M, batch 8 x 1024 tokens, vocabulary 50257, the
script's cross-entropy of the bfloat16 logits. Its three logits-sized storages (the logits, log_softmax's output
that autograd saves, and in backward nll_loss_backward's and _log_softmax_backward_data's gradients) are the
largest blocks of the step. Every expected number below is worked out by hand from the rules of
c10/cuda/CUDACachingAllocator.cpp (torch 2.x; the same in 2.6, the rows' version, and 2.13):
round_size to 512 B; get_allocation_size: >= kMinLargeAlloc (10 MiB) rounds up to kRoundLarge (2 MiB);
get_free_block: best fit by (size, address); should_split for the large pool: only when more than
kSmallSize (1 MiB) would remain, else the whole block is handed out and counted as allocated.
"""

from memgraph.allocator.caching_model import CachingAllocatorModel
from memgraph.units import MiB

LOGITS = 8 * 1024 * 50257 * 2  # bf16 [8192, 50257]: 823,410,688 B = 1,608,224 x 512, so round_size keeps it
SEGMENT = 393 * 2 * MiB        # ceil(823,410,688 / 2,097,152) = ceil(392.63) = 393 -> 824,180,736 B
HIDDEN = 8 * 1024 * 768 * 2    # bf16 [8, 1024, 768]: 12,582,912 B = 12 MiB, the gradient into the out_head


def test_logits_sized_blocks_are_handed_out_whole():
    m = CachingAllocatorModel()
    m.malloc("logits", LOGITS)                     # new segment of 824,180,736 B; remaining 770,048 B <= 1 MiB:
    assert m.allocated_bytes == SEGMENT            # not split, the whole block is allocated
    assert m.reserved_bytes == SEGMENT == 824_180_736
    m.malloc("log_softmax", LOGITS)                # saved for backward: a second segment
    m.free("logits")                               # calc_loss_batch returns: the logits go, their segment stays cached
    assert (m.allocated_bytes, m.reserved_bytes) == (SEGMENT, 2 * SEGMENT)
    m.malloc("nll_grad", LOGITS)                   # best fit: the cached logits block, again handed out whole
    assert m.reserved_bytes == 2 * SEGMENT
    m.malloc("log_softmax_grad", LOGITS)           # nothing cached: a third segment, the step's reserved peak
    assert m.peak_allocated_bytes == m.peak_reserved_bytes == 3 * SEGMENT == 2_472_542_208
    m.free("nll_grad")
    m.free("log_softmax")
    m.malloc("hidden_grad", HIDDEN)                # 12 MiB splits a cached 824,180,736 B block (811,597,824 B remain)
    assert m.reserved_bytes == 3 * SEGMENT         # no new segment
    assert m.allocated_bytes == SEGMENT + HIDDEN   # log_softmax_grad's whole block + the 12 MiB split off
    assert m.stats()["inactive_split_bytes"] == SEGMENT - HIDDEN  # 811,597,824 B: the split's free remainder


def test_reserved_never_below_allocated():
    """Blocks are carved out of segments, so at every point allocated <= reserved: a measured reserved figure below
    memgraph's allocated prediction (the rows at +43.9% before issue 28) is a miss of the traced storages, not of the
    allocator model."""
    m = CachingAllocatorModel()
    sizes = [LOGITS, HIDDEN, 3 * MiB, 600 * 1024, LOGITS // 2, 511, HIDDEN * 3]
    for i, n in enumerate(sizes):
        m.malloc(i, n)
        assert m.allocated_bytes <= m.reserved_bytes
    for i in (0, 2, 4):
        m.free(i)
        assert m.allocated_bytes <= m.reserved_bytes
    m.malloc("again", LOGITS // 3)  # 274,470,229 B fits the cached 824,180,736 B segment: split, no new segment
    assert m.reserved_bytes == m.peak_reserved_bytes
