"""Hand-computed checks of the CUDA caching allocator model (memgraph.allocator.caching_model).

Every expected number is worked out beside its assertion from the rules of
c10/cuda/CUDACachingAllocator.cpp: requests round to 512 B; <= 1 MiB goes to the small pool
(2 MiB segments); large requests < 10 MiB get a 20 MiB segment, others round up to 2 MiB;
large blocks split only if the request is below max_split_size and > 1 MiB remains.
"""

import pytest

from memgraph.allocator.caching_model import CachingAllocatorModel, OutOfMemoryError
from memgraph.allocator.replay import replay
from memgraph.facts.cuda_allocator import (
    AllocatorOptions,
    get_allocation_size,
    round_size,
    roundup_power2_next_division,
)
from memgraph.units import KiB, MiB


def snap(m):
    """Blocks of each segment as (MiB size, allocated), segments in address order."""
    return [[(size / MiB, alloc) for size, alloc in s["blocks"]] for s in m.snapshot()]


# --- sizes -----------------------------------------------------------------------------------

def test_round_size_and_allocation_size():
    assert round_size(1) == 512                        # below kMinBlockSize -> 512
    assert round_size(512) == 512
    assert round_size(513) == 1024                     # next multiple of 512
    assert round_size(600 * KiB) == 600 * KiB          # 614400 = 1200 * 512 exactly
    assert get_allocation_size(1 * MiB) == 2 * MiB     # <= kSmallSize -> kSmallBuffer
    assert get_allocation_size(1 * MiB + 512) == 20 * MiB  # large, < 10 MiB -> kLargeBuffer
    assert get_allocation_size(10 * MiB - 512) == 20 * MiB
    assert get_allocation_size(10 * MiB) == 10 * MiB   # >= kMinLargeAlloc -> round to 2 MiB
    assert get_allocation_size(11 * MiB) == 12 * MiB


def test_roundup_power2_divisions_rounding():
    # Source comment: 1200 with 4 divisions -> 1024, 1280, 1536, 1792 -> 1280.
    assert roundup_power2_next_division(1200, 4) == 1280
    m = CachingAllocatorModel(AllocatorOptions(roundup_power2_divisions=4))
    # round_size only uses divisions when size > 512 * divisions = 2048: 1200 -> 512 rule -> 1536.
    assert m.round_size(1200) == 1536
    # 3 MiB + 1: floor 2 MiB, step 2 MiB / 4 = 512 KiB -> 3 MiB + 512 KiB.
    assert m.round_size(3 * MiB + 1) == 3 * MiB + 512 * KiB
    assert m.round_size(3 * MiB) == 3 * MiB            # already on a division
    assert m.round_size(4 * MiB) == 4 * MiB            # power of two stays
    # 5 MiB + 1: floor 4 MiB, step 1 MiB -> 6 MiB; a 6 MiB request gets a 20 MiB segment.
    m.malloc("a", 5 * MiB + 1)
    assert m.allocated_bytes == 6 * MiB
    assert m.reserved_bytes == 20 * MiB


def test_roundup_power2_divisions_per_interval_list():
    o = AllocatorOptions.from_env_string(
        "roundup_power2_divisions:[64:8,128:2,256:4,512:2,1024:4,>:1]")
    # Intervals are powers of two from 1 MiB: index = log2(MB boundary). The first entry also
    # fills everything below it; '>' fills everything after the last entry (the C++ test's values).
    assert o.roundup_power2_divisions == (8, 8, 8, 8, 8, 8, 8, 2, 4, 2, 4, 1, 1, 1, 1, 1)
    m = CachingAllocatorModel(o)
    # 100 MiB + 1 lies in [64, 128) MiB -> 8 divisions of 8 MiB: floor 96 MiB -> 104 MiB.
    m.malloc("a", 100 * MiB + 1)
    assert m.allocated_bytes == 104 * MiB
    assert m.reserved_bytes == 104 * MiB               # >= 10 MiB: segment = 104 MiB (2 MiB multiple)


# --- small pool ------------------------------------------------------------------------------

def test_one_byte_allocation():
    m = CachingAllocatorModel()
    m.malloc("x", 1)
    assert m.allocated_bytes == 512                    # round_size(1) = kMinBlockSize
    assert m.reserved_bytes == 2 * MiB                 # small pool -> one kSmallBuffer segment
    assert m.stats()["num_segments"] == 1
    assert m.stats()["num_cuda_malloc"] == 1
    assert m.stats()["requested_bytes"] == 1


def test_three_600k_allocations_share_a_small_segment():
    m = CachingAllocatorModel()
    size = 600 * KiB                                   # 614400 <= 1 MiB -> small pool
    for k in range(3):
        m.malloc(k, size)
    # 2 MiB segment: 2097152 - 3 * 614400 = 253952 left (each split leaves >= 512 B)
    assert m.allocated_bytes == 3 * 614400 == 1843200
    assert m.reserved_bytes == 2 * MiB
    assert m.stats()["inactive_split_bytes"] == 2097152 - 1843200 == 253952
    m.malloc(3, size)                                  # 253952 < 614400 -> new 2 MiB segment
    assert m.allocated_bytes == 4 * 614400
    assert m.reserved_bytes == 4 * MiB
    assert m.stats()["num_segments"] == 2


def test_small_pool_best_fit_picks_smallest_block():
    m = CachingAllocatorModel()
    m.malloc("a", 1 * MiB)       # seg1: [a 1 MiB][free 1 MiB]
    m.malloc("b", 1 * MiB)       # exact fit of seg1's remainder
    m.malloc("c", 512 * KiB)     # seg2: [c 0.5][free 1.5]
    m.free("a")                  # free blocks: 1 MiB (seg1), 1.5 MiB (seg2)
    m.malloc("d", 1 * MiB)       # best fit: the 1 MiB block, not the 1.5 MiB one
    assert snap(m) == [[(1.0, True), (1.0, True)], [(0.5, True), (1.5, False)]]
    assert m.reserved_bytes == 4 * MiB
    assert m.allocated_bytes == 2.5 * MiB              # b 1 + c 0.5 + d 1 (a was freed)


# --- large pool ------------------------------------------------------------------------------

def test_5mib_gets_20mib_segment_and_second_5mib_shares_it():
    m = CachingAllocatorModel()
    m.malloc("a", 5 * MiB)
    assert m.allocated_bytes == 5 * MiB
    assert m.reserved_bytes == 20 * MiB                # 1 MiB < 5 MiB < 10 MiB -> kLargeBuffer
    m.malloc("b", 5 * MiB)                             # split from the 15 MiB remainder
    assert m.allocated_bytes == 10 * MiB
    assert m.reserved_bytes == 20 * MiB
    assert m.stats()["num_segments"] == 1
    assert snap(m) == [[(5.0, True), (5.0, True), (10.0, False)]]


def test_12mib_gets_its_own_segment():
    m = CachingAllocatorModel()
    m.malloc("a", 12 * MiB)                            # >= 10 MiB -> round to 2 MiB = 12 MiB
    assert m.allocated_bytes == 12 * MiB
    assert m.reserved_bytes == 12 * MiB


def test_large_block_not_split_when_at_most_1mib_remains():
    m = CachingAllocatorModel()
    # 11 MiB -> 12 MiB segment, 1 MiB remains: not > kSmallSize -> whole block allocated.
    m.malloc("a", 11 * MiB)
    assert m.allocated_bytes == 12 * MiB
    # 11 MiB - 512 -> 12 MiB segment, 1 MiB + 512 remains: > 1 MiB -> split.
    m.malloc("b", 11 * MiB - 512)
    assert m.allocated_bytes == 12 * MiB + 11 * MiB - 512
    assert m.reserved_bytes == 24 * MiB
    # 19 MiB + 1 -> 19 MiB + 512 in a 20 MiB segment, 1 MiB - 512 remains -> whole 20 MiB allocated.
    m.malloc("c", 19 * MiB + 1)
    assert m.allocated_bytes == 12 * MiB + (11 * MiB - 512) + 20 * MiB
    assert m.reserved_bytes == 44 * MiB


def test_free_then_realloc_reuses_cached_block():
    m = CachingAllocatorModel()
    m.malloc("a", 12 * MiB)
    m.free("a")
    assert m.allocated_bytes == 0
    assert m.reserved_bytes == 12 * MiB                # cached, not released
    m.malloc("b", 12 * MiB)
    assert m.reserved_bytes == 12 * MiB                # same block reused
    assert m.stats()["num_cuda_malloc"] == 1
    assert m.peak_reserved_bytes == 12 * MiB


def test_cached_block_too_small_makes_new_segment():
    m = CachingAllocatorModel()
    m.malloc("a", 12 * MiB)
    m.free("a")
    m.malloc("b", 14 * MiB)                            # cached 12 MiB < 14 MiB
    assert m.reserved_bytes == 12 * MiB + 14 * MiB
    assert m.allocated_bytes == 14 * MiB
    assert m.stats()["cached_free_bytes"] == 12 * MiB


def test_fragmentation_and_inactive_split_bytes():
    m = CachingAllocatorModel()
    for k in range(4):
        m.malloc(k, 5 * MiB)                           # 4 x 5 MiB fill one 20 MiB segment
    assert m.stats()["inactive_split_bytes"] == 0      # 15 -> 10 -> 5 -> 0 MiB left over
    m.free(0)
    m.free(2)                                          # two 5 MiB holes, not adjacent
    assert m.stats()["inactive_split_bytes"] == 10 * MiB
    assert m.stats()["inactive_split"] == 2
    m.malloc("x", 8 * MiB)                             # no hole >= 8 MiB -> new 20 MiB segment
    assert m.reserved_bytes == 40 * MiB
    assert m.allocated_bytes == 3 * 5 * MiB - 5 * MiB + 8 * MiB == 18 * MiB
    assert m.stats()["inactive_split_bytes"] == 10 * MiB + 12 * MiB   # 20 - 8 left in seg2
    m.free(1)                                          # merges holes: 5 + 5 + 5 = 15 MiB
    assert m.stats()["inactive_split_bytes"] == 15 * MiB + 12 * MiB
    assert snap(m) == [[(15.0, False), (5.0, True)], [(8.0, True), (12.0, False)]]
    m.malloc("y", 15 * MiB)                            # best fit: 12 < 15 -> the 15 MiB block
    assert m.reserved_bytes == 40 * MiB
    assert m.allocated_bytes == 18 * MiB - 5 * MiB + 15 * MiB
    m.free(3)
    m.free("x")
    m.free("y")                                        # everything merges back to 2 whole segments
    assert m.stats()["inactive_split_bytes"] == 0
    assert snap(m) == [[(20.0, False)], [(20.0, False)]]
    assert m.peak_allocated_bytes == 28 * MiB          # 3*5 + 15 - ... max was 18 - 5 + 15 = 28


# --- max_split_size_mb -----------------------------------------------------------------------

def test_max_split_size_oversize_rules():
    m = CachingAllocatorModel(AllocatorOptions(max_split_size_mb=40))
    m.malloc("a", 50 * MiB)                            # 50 MiB segment (>= max_split: oversize)
    m.free("a")
    m.malloc("b", 30 * MiB)                            # 30 < 40: the oversize 50 MiB block is refused
    assert m.reserved_bytes == 50 * MiB + 30 * MiB
    assert m.allocated_bytes == 30 * MiB
    m.free("b")
    m.malloc("c", 45 * MiB)                            # 45 >= 40: 50 < 45 + 20 -> takes it, no split
    assert m.allocated_bytes == 50 * MiB
    assert m.reserved_bytes == 80 * MiB
    m.malloc("d", 45 * MiB)                            # only 30 MiB cached -> new 46 MiB segment
    assert m.allocated_bytes == 50 * MiB + 46 * MiB
    assert m.reserved_bytes == 80 * MiB + 46 * MiB


def test_without_max_split_the_big_block_is_split():
    m = CachingAllocatorModel()
    m.malloc("a", 50 * MiB)
    m.free("a")
    m.malloc("b", 30 * MiB)                            # best fit 50 MiB, 20 MiB remains -> split
    assert m.reserved_bytes == 50 * MiB
    assert m.allocated_bytes == 30 * MiB


def test_max_non_split_rounding_limit():
    m = CachingAllocatorModel(AllocatorOptions(max_split_size_mb=40))
    m.malloc("a", 100 * MiB)
    m.free("a")
    m.malloc("b", 60 * MiB)                            # 100 >= 60 + 20 -> refused, new 60 MiB segment
    assert m.reserved_bytes == 160 * MiB
    assert m.allocated_bytes == 60 * MiB
    m = CachingAllocatorModel(AllocatorOptions(max_split_size_mb=40, max_non_split_rounding_mb=50))
    m.malloc("a", 100 * MiB)
    m.free("a")
    m.malloc("b", 60 * MiB)                            # 100 < 60 + 50 -> whole 100 MiB block
    assert m.reserved_bytes == 100 * MiB
    assert m.allocated_bytes == 100 * MiB


# --- expandable segments ---------------------------------------------------------------------

def test_expandable_small_pool_maps_2mib_pages():
    m = CachingAllocatorModel(AllocatorOptions(expandable_segments=True))
    m.malloc(0, 1 * MiB)                               # small pool: one 2 MiB page
    assert (m.allocated_bytes, m.reserved_bytes) == (1 * MiB, 2 * MiB)
    m.malloc(1, 1 * MiB)                               # the free 1 MiB of that page
    assert (m.allocated_bytes, m.reserved_bytes) == (2 * MiB, 2 * MiB)
    m.malloc(2, 1 * MiB)                               # segment grows by one more 2 MiB page
    assert (m.allocated_bytes, m.reserved_bytes) == (3 * MiB, 4 * MiB)
    assert m.stats()["num_segments"] == 1              # still one (growing) segment
    assert m.stats()["num_cuda_malloc"] == 2           # two map calls
    assert snap(m) == [[(1.0, True), (1.0, True), (1.0, True), (1.0, False)]]


def test_expandable_large_pool_maps_20mib_pages():
    m = CachingAllocatorModel(AllocatorOptions(expandable_segments=True))
    m.malloc("a", 30 * MiB)                            # two 20 MiB pages
    assert (m.allocated_bytes, m.reserved_bytes) == (30 * MiB, 40 * MiB)
    m.malloc("b", 12 * MiB)                            # free 10 MiB tail + one more page
    assert (m.allocated_bytes, m.reserved_bytes) == (42 * MiB, 60 * MiB)
    m.malloc("c", 5 * MiB)                             # from the 18 MiB left at the end
    assert (m.allocated_bytes, m.reserved_bytes) == (47 * MiB, 60 * MiB)
    assert snap(m) == [[(30.0, True), (12.0, True), (5.0, True), (13.0, False)]]
    for k in "abc":
        m.free(k)
    assert (m.allocated_bytes, m.reserved_bytes) == (0, 60 * MiB)   # pages stay mapped
    m.empty_cache()
    assert m.reserved_bytes == 0                       # all pages unmapped, segment released
    assert m.stats()["num_segments"] == 0


def test_expandable_best_fit_prefers_block_that_cannot_grow():
    m = CachingAllocatorModel(AllocatorOptions(expandable_segments=True))
    m.malloc("a", 30 * MiB)                            # [a 30][free 10] mapped
    m.malloc("b", 2 * MiB)                             # [a 30][b 2][free 8]
    m.free("a")                                        # [free 30][b 2][free 8 + unmapped tail]
    # Best fit by size is the 8 MiB tail, but its "expandable size" (8 MiB + the unmapped tail)
    # is larger than the 30 MiB block's, so get_free_block moves on to the 30 MiB block.
    m.malloc("c", 5 * MiB)
    assert snap(m) == [[(5.0, True), (25.0, False), (2.0, True), (8.0, False)]]
    assert m.reserved_bytes == 40 * MiB


# --- capacity, retries, OOM ------------------------------------------------------------------

def test_capacity_releases_cached_segments_then_ooms():
    m = CachingAllocatorModel(capacity_bytes=40 * MiB)
    m.malloc("a", 12 * MiB)
    m.malloc("b", 14 * MiB)                            # reserved 26 MiB
    m.free("a")                                        # 12 MiB cached
    m.malloc("c", 16 * MiB)                            # 26 + 16 = 42 > 40 -> release a's segment, retry
    assert m.reserved_bytes == 14 * MiB + 16 * MiB
    assert m.allocated_bytes == 30 * MiB
    s = m.stats()
    assert (s["num_alloc_retries"], s["num_cuda_malloc"], s["num_cuda_free"], s["num_segments"]) == (1, 3, 1, 2)
    with pytest.raises(OutOfMemoryError):
        m.malloc("d", 12 * MiB)                        # 30 + 12 = 42 > 40 and nothing cached
    assert m.stats()["num_ooms"] == 1
    assert (m.allocated_bytes, m.reserved_bytes, m.peak_reserved_bytes) == (30 * MiB, 30 * MiB, 30 * MiB)


def test_capacity_counts_whole_segment_not_request():
    m = CachingAllocatorModel(capacity_bytes=16 * MiB)
    m.malloc("s", 1 * MiB)                             # 2 MiB small segment
    with pytest.raises(OutOfMemoryError):
        m.malloc("x", 4 * MiB)                         # needs a 20 MiB segment: 2 + 20 > 16
    m.malloc("y", 12 * MiB)                            # 12 MiB segment: 2 + 12 <= 16
    assert m.reserved_bytes == 14 * MiB


def test_release_available_frees_largest_oversize_blocks():
    m = CachingAllocatorModel(AllocatorOptions(max_split_size_mb=20), capacity_bytes=100 * MiB)
    m.malloc("a", 30 * MiB)
    m.malloc("b", 40 * MiB)
    m.malloc("c", 24 * MiB)                            # reserved 94 MiB
    m.free("a")
    m.free("b")                                        # oversize cached: 30, 40
    # 50 MiB: no cached block >= 50; 94 + 50 > 100 -> release_available_cached_blocks frees the
    # largest oversize blocks until >= 50 MiB: 40 (40 < 50), then 30 (70 >= 50); no full flush.
    m.malloc("d", 50 * MiB)
    assert m.reserved_bytes == 24 * MiB + 50 * MiB
    s = m.stats()
    assert (s["num_alloc_retries"], s["num_cuda_free"], s["num_segments"]) == (0, 2, 2)


def test_release_available_frees_one_fitting_oversize_block():
    m = CachingAllocatorModel(AllocatorOptions(max_split_size_mb=20), capacity_bytes=100 * MiB)
    m.malloc("a", 60 * MiB)
    m.malloc("b", 30 * MiB)                            # reserved 90
    m.free("a")
    # 30 MiB: cached 60 >= 30 + 20 -> not reused; 90 + 30 > 100 -> the 60 MiB block (first
    # cached block >= 30 MiB) is released, then 30 + 30 fits.
    m.malloc("c", 30 * MiB)
    assert m.reserved_bytes == 60 * MiB
    assert m.stats()["num_cuda_free"] == 1


def test_expandable_capacity_unmaps_free_pages_and_retries():
    m = CachingAllocatorModel(AllocatorOptions(expandable_segments=True), capacity_bytes=60 * MiB)
    m.malloc("a", 30 * MiB)                            # pages [0, 40)
    m.malloc("b", 12 * MiB)                            # pages [0, 60): [a 30][b 12][free 18]
    m.free("a")                                        # [free 30][b 12][free 18]
    # 35 MiB: no free block >= 35; growing the tail needs another 20 MiB page: 80 > 60.
    # release_cached_blocks unmaps whole free pages: page [0, 20) of the 30 MiB hole (the 18 MiB
    # tail holds no whole page) -> reserved 40; the retry maps one page after the tail -> 60.
    m.malloc("c", 35 * MiB)
    assert m.reserved_bytes == 60 * MiB
    assert m.allocated_bytes == 12 * MiB + 35 * MiB
    assert m.stats()["num_alloc_retries"] == 1
    assert snap(m) == [[(10.0, False), (12.0, True), (35.0, True), (3.0, False)]]


def test_per_process_memory_fraction_limits_reserved():
    o = AllocatorOptions.from_env_string("per_process_memory_fraction:0.5")
    m = CachingAllocatorModel(o, capacity_bytes=100 * MiB)   # allowed: 50 MiB
    m.malloc("a", 30 * MiB)
    with pytest.raises(OutOfMemoryError):
        m.malloc("b", 24 * MiB)                        # 30 + 24 > 50
    m.malloc("c", 20 * MiB)                            # 30 + 20 = 50 <= 50
    assert m.reserved_bytes == 50 * MiB


# --- bookkeeping -----------------------------------------------------------------------------

def test_zero_byte_allocations_take_no_block():
    m = CachingAllocatorModel()
    m.malloc("z", 0)
    assert (m.allocated_bytes, m.reserved_bytes, m.stats()["num_segments"]) == (0, 0, 0)
    m.free("z")
    with pytest.raises(KeyError):
        m.free("z")


def test_bad_keys_raise():
    m = CachingAllocatorModel()
    m.malloc("a", 10)
    with pytest.raises(ValueError):
        m.malloc("a", 10)
    with pytest.raises(KeyError):
        m.free("nope")


def test_replay_result_and_timeline():
    events = [("alloc", "a", 1), ("alloc", "b", 5 * MiB), ("free", "a", 1), ("free", "b", 5 * MiB)]
    r = replay(events)
    assert r.timeline == [
        (0, 512, 2 * MiB),                             # small segment
        (1, 512 + 5 * MiB, 22 * MiB),                  # + 20 MiB large segment
        (2, 5 * MiB, 22 * MiB),
        (3, 0, 22 * MiB),                              # cache keeps both segments
    ]
    assert (r.peak_allocated, r.peak_reserved) == (5 * MiB + 512, 22 * MiB)
    assert (r.final_allocated, r.final_reserved) == (0, 22 * MiB)
    assert (r.num_segments, r.num_cuda_malloc, r.oom, r.oom_event_index) == (2, 2, False, None)


def test_replay_stops_at_oom():
    events = [("alloc", "s", 1 * MiB), ("alloc", "x", 4 * MiB), ("free", "s", 1 * MiB)]
    r = replay(events, capacity_bytes=16 * MiB)       # 4 MiB needs a 20 MiB segment
    assert (r.oom, r.oom_event_index) == (True, 1)
    assert r.timeline == [(0, 1 * MiB, 2 * MiB), (1, 1 * MiB, 2 * MiB)]
    assert (r.peak_allocated, r.peak_reserved) == (1 * MiB, 2 * MiB)


def test_timeline_downsampling_keeps_peaks():
    events = []
    for i in range(500):                               # sizes grow then shrink; peak at i = 250
        size = (1 + min(i, 500 - i)) * MiB
        events += [("alloc", i, size), ("free", i, size)]
    r = replay(events, max_points=10)
    assert len(r.timeline) <= 10
    idx = [t[0] for t in r.timeline]
    assert idx == sorted(set(idx))
    # 251 MiB -> 252 MiB segment; 1 MiB left is not > kSmallSize -> the whole 252 MiB is allocated
    assert max(t[1] for t in r.timeline) == r.peak_allocated == 252 * MiB
    assert max(t[2] for t in r.timeline) == r.peak_reserved


def test_segments_count_and_peak_segments():
    m = CachingAllocatorModel(capacity_bytes=30 * MiB)
    m.malloc("a", 12 * MiB)
    m.malloc("b", 12 * MiB)
    m.free("a")
    m.free("b")
    m.malloc("c", 26 * MiB)                            # 24 + 26 > 30 -> flush both, then 26 fits
    s = m.stats()
    assert (s["num_segments"], s["peak_num_segments"], s["num_cuda_free"]) == (1, 2, 2)
    assert m.peak_reserved_bytes == 26 * MiB


# --- options ---------------------------------------------------------------------------------

def test_options_from_env_string():
    o = AllocatorOptions.from_env_string("expandable_segments:True,max_split_size_mb:128")
    assert o == AllocatorOptions(expandable_segments=True, max_split_size_mb=128)
    o = AllocatorOptions.from_env_string(
        " roundup_power2_divisions : 4 , garbage_collection_threshold:0.6,"
        "max_non_split_rounding_mb:64,release_lock_on_cudamalloc:True,backend:native")
    assert o == AllocatorOptions(roundup_power2_divisions=4, garbage_collection_threshold=0.6,
                                 max_non_split_rounding_mb=64)
    assert AllocatorOptions.from_env_string("") == AllocatorOptions()


@pytest.mark.parametrize("conf, names", [
    ("foo:1", "foo"),
    ("expandable_segments:yes", "yes"),
    ("expandable_segments:true", "true"),
    ("max_split_size_mb:10", "max_split_size_mb"),      # must be >= 20 (kLargeBuffer / 1 MiB)
    ("max_split_size_mb:abc", "abc"),
    ("max_split_size_mb", "max_split_size_mb"),         # no value
    ("roundup_power2_divisions:3", "roundup_power2_divisions"),
    ("roundup_power2_divisions:[64:3]", "roundup_power2_divisions"),
    ("garbage_collection_threshold:1.5", "garbage_collection_threshold"),
    ("backend:cudaMallocAsync", "cudaMallocAsync"),
    ("expandable_segments:True max_split_size_mb:128", "expandable_segments"),
])
def test_options_parser_errors(conf, names):
    with pytest.raises(ValueError, match=names):
        AllocatorOptions.from_env_string(conf)


def test_options_validated_on_construction():
    with pytest.raises(ValueError, match="max_split_size_mb"):
        AllocatorOptions(max_split_size_mb=10)
    with pytest.raises(ValueError, match="roundup_power2_divisions"):
        AllocatorOptions(roundup_power2_divisions=6)
