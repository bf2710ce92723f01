"""The upper end of a cuda prediction: every bounded unknown at its upper size, each one named.

The expected prediction counts each :class:`~memgraph.facts.unknowns.BoundedUnknown` at its
``expected_bytes``; the upper end counts it at ``upper_bytes``:

allocated_upper  allocated + the slacks (upper - expected) of the unknowns that add to the allocated counter
                 (kernel workspaces: they all may be alive at the peak at once, the worst case).
reserved_upper   the replay run again with one more block, allocated before the first event and never freed,
                 of those slacks' sum rounded up to the allocator's segment granularity and to at least
                 ``kMinLargeAlloc`` (:func:`phantom_bytes`). Such a block takes a segment (or expandable-segment
                 pages) of its own that it fills exactly: best-fit never hands it to another request and it is
                 never split, so every other request meets the allocator as in the expected replay, and
                 reserved rises by exactly that segment at every event. Holding the extra bytes for the whole
                 step is the latest any unknown can free them; a transient workspace instead leaves a cached
                 block behind that later requests may reuse. (The caching allocator is not monotone in its
                 input, so this is the worst case of the unknowns' own bytes, argued from its rules, not a theorem
                 over every stream.) The replay is not capped: the upper end says what the step would need.
total_upper      reserved_upper + the CUDA context's upper end (unless ``--context-bytes`` gave it) + the slacks
                 of any other unknowns that add to the device total only.

Allocator options are not unknowns: the replay follows the configured ``PYTORCH_CUDA_ALLOC_CONF``
(``garbage_collection_threshold`` aside, which only releases cached blocks; caching_model.py says why it is
not modelled). Near capacity the expected replay, capped at capacity minus the expected context, may release
cached segments and retry, as the real allocator does; how much it must release depends on the real context
size. ``fits_with_margin`` asks the uncapped upper replay to fit below capacity minus the context's upper end,
so at the upper end no release or retry is ever needed: fragmentation near capacity cannot turn it into an
out-of-memory error within the model. What the replay cannot see (other CUDA streams, other processes, NCCL
buffers) is outside a single-process, single-stream step.
"""

from __future__ import annotations

from dataclasses import asdict

from memgraph.facts.cuda_allocator import K_LARGE_BUFFER, K_MIN_LARGE_ALLOC, K_ROUND_LARGE, AllocatorOptions
from memgraph.facts.gpus import ContextEstimate
from memgraph.facts.unknowns import BoundedUnknown

PHANTOM_KEY = ("memgraph", "unknowns upper bound")  # the extra block's key in the replay (never a storage id)


def segment_granularity(options: AllocatorOptions) -> int:
    """What a large block that fills its own segment is rounded to: 2 MiB segments (``kRoundLarge`` in
    get_allocation_size, CUDACachingAllocator.cpp, torch 2.13) or, with ``expandable_segments``, 20 MiB pages
    (``kLargeBuffer``, the large pool's page size of ExpandableSegment)."""
    return K_LARGE_BUFFER if options.expandable_segments else K_ROUND_LARGE


def phantom_bytes(slack_bytes: int, options: AllocatorOptions) -> int:
    """The block reserved_upper adds: ``slack_bytes`` rounded up to the segment granularity, at least
    ``kMinLargeAlloc`` (10 MiB; smaller large requests get a 20 MiB segment they would share); 0 for no slack."""
    if slack_bytes <= 0:
        return 0
    g = segment_granularity(options)
    return -(-max(slack_bytes, K_MIN_LARGE_ALLOC) // g) * g


def context_unknown(context: ContextEstimate) -> BoundedUnknown:
    """The CUDA context's range as an unknown of the device total."""
    return BoundedUnknown(
        name=f"CUDA context range for {context.arch} (CUDA {context.cuda_major}, {context.module_loading} loading)",
        expected_bytes=context.expected_bytes, upper_bytes=context.high_bytes, source=context.source,
        counter="total")


def allocated_slack(unknowns: list[BoundedUnknown]) -> int:
    return sum(u.slack_bytes for u in unknowns if u.counter == "allocated")


def total_only_slack(unknowns: list[BoundedUnknown]) -> int:
    return sum(u.slack_bytes for u in unknowns if u.counter != "allocated")


def unknown_rows(unknowns: list[BoundedUnknown]) -> list[dict]:
    """The unknowns as report rows (JSON ``unknowns``): name, expected_bytes, upper_bytes, source, counter."""
    return [asdict(u) for u in unknowns]
