"""The cuda target's device peaks (memgraph.allocator.replay.device_peaks) on hand-made event logs.

Every expected number is worked out in the comments from the caching allocator's rules
(memgraph/facts/cuda_allocator.py, memgraph/allocator/caching_model.py): requests round up to
512 B; a request <= 1 MiB goes to the small pool, whose segments are 2 MiB; a large request below
10 MiB gets a 20 MiB segment, a larger one a segment rounded up to 2 MiB; the best-fitting cached
block (smallest, then lowest address) is reused; a large block splits only when more than 1 MiB
remains. Reserved memory never drops on free; each iteration's reserved peak is
``torch.cuda.max_memory_reserved()`` after ``reset_peak_memory_stats()`` at its start, so the
value just before the iteration counts. Device total = reserved + the GPU's CUDA context estimate.

The step: a 24 MiB parameter P and a 1000 B input X (setup), then two iterations of
forward (activation A 24 MiB, loss L 4 B), backward (gradient G 24 MiB, a 5 MiB temporary T),
optimizer (iteration 1 creates the 24 MiB momentum buffer S) and zero_grad.
"""

from dataclasses import replace

import memgraph.allocator.replay as replay
from memgraph.allocator.replay import device_peaks
from memgraph.facts.gpus import get_gpu
from memgraph.trace.record.event_log import EventLog, Origin

MiB = 1024 * 1024
H100_CAPACITY = 85_028_896_768  # cudaMemGetInfo total of an H100 80GB HBM3 (tests/test_gpu_catalog.py)
SM90_CONTEXT = 600 * MiB  # the catalog's CUDA context estimate for compute capability 9.x


class Step:
    """Builds an EventLog the way the tracer does: phase marks, allocations, frees, iteration bounds."""

    def __init__(self):
        self.log = EventLog()
        self.sids: dict[str, int] = {}
        self.bounds: list[tuple[int, int]] = []
        self.iteration = 0

    def phase(self, name: str) -> None:
        self.log.phase_marks.append((len(self.log.events), self.iteration, name))

    def alloc(self, name: str, nbytes: int, origin: Origin = Origin.OP) -> None:
        phase = self.log.phase_marks[-1][2]
        rec = self.log.allocate(nbytes, "float32", (nbytes // 4,), origin, name, "", phase, self.iteration, -1)
        self.sids[name] = rec.sid

    def free(self, name: str) -> None:
        self.log.free(self.sids.pop(name))

    def iterate(self, body) -> None:
        self.iteration += 1
        first = len(self.log.events)
        body(self)
        self.bounds.append((first, len(self.log.events)))


def training_step() -> Step:
    s = Step()
    s.phase("setup")
    s.alloc("P", 24 * MiB, Origin.PARAMETER)  # event 0
    s.alloc("X", 1000, Origin.INPUT)  # event 1

    def iteration(s: Step) -> None:
        s.phase("forward")
        s.alloc("A", 24 * MiB)
        s.alloc("L", 4)
        s.phase("backward")
        s.alloc("G", 24 * MiB)
        s.alloc("T", 5 * MiB)
        s.free("T")
        s.free("A")
        s.phase("optimizer")
        if s.iteration == 1:
            s.alloc("S", 24 * MiB)  # the momentum buffer, created by the first step
        s.phase("zero_grad")
        s.free("L")
        s.free("G")

    s.iterate(iteration)  # events 2..10
    s.iterate(iteration)  # events 11..18
    assert s.bounds == [(2, 11), (11, 19)]
    return s


def test_first_iteration_and_steady_state_reserved_by_hand():
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "")
    # reserved after each event (MiB), segments by creation order seg1..seg6:
    #  e0  P 24 MiB: large pool, >= 10 MiB -> a segment of 24 (a 2 MiB multiple), seg1          24
    #  e1  X 1000 B -> 1024 B, small pool -> a 2 MiB segment, seg2                               26
    #  -- iteration 1 (events 2..10)
    #  e2  A 24 MiB: no cached large block -> seg3 (24)                                          50
    #  e3  L 4 B -> 512 B from seg2's free 2 MiB - 1024 B                                         50
    #  e4  G 24 MiB -> seg4 (24)                                                                  74
    #  e5  T 5 MiB: large (> 1 MiB) and < 10 MiB -> a 20 MiB segment seg5, split: T 5 + free 15   94
    #  e6  free T (seg5 whole again, cached), e7 free A (seg3 cached)                             94
    #  e8  S 24 MiB: best fit among cached 24 (seg3) and 20 (seg5) -> seg3 is reused            94
    #  e9  free L, e10 free G (seg4 cached)                                                       94
    assert d.first_iteration_reserved == 94 * MiB
    #  -- iteration 2 (events 11..18); the reserved value at its start (94, after e10) counts
    #  e11 A 24 MiB: cached 24 (seg4) fits exactly -> reused                                      94
    #  e13 G 24 MiB: the only cached large block is seg5 (20 < 24) -> new seg6 (24)              118
    #  e14 T 5 MiB: seg5's 20 MiB, split                                                          118
    # S now holds A's old segment, so the gradient needs one more: steady state is 24 MiB above iteration 1.
    assert d.steady_state_reserved == 118 * MiB
    assert (d.segments, d.cuda_malloc_calls) == (6, 6)  # seg1..seg6, none released
    # device total = steady reserved + the sm90 context estimate = 118 + 600 = 718 MiB
    assert d.context_bytes == SM90_CONTEXT
    assert d.steady_state_device_total == 718 * MiB == 752_877_568
    # headroom = 85,028,896,768 - 752,877,568 = 84,276,019,200
    assert (d.capacity_bytes, d.headroom_bytes) == (H100_CAPACITY, 84_276_019_200)
    assert d.fits and d.oom_event is None
    assert (d.gpu, d.gpu_name, d.allocator_options) == ("h100-80gb", "NVIDIA H100 80GB HBM3", "")


def test_expandable_segments_map_20_mib_pages_instead():
    """expandable_segments:True: one segment per pool, grown by 20 MiB pages (large) and 2 MiB pages (small);
    reserved is the pages mapped, and a block splits whenever 512 B remain. Large-pool addresses in MiB."""
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "expandable_segments:True")
    #  e0  P 24: map ceil(24/20) = 2 pages: [P 0-24][free 24-40]                         large 40, total 40
    #  e1  X: one 2 MiB small page                                                                  42
    #  e2  A 24: the free tail (16) is too small -> map 1 page: [A 24-48][free 48-60]                 62
    #  e3  L: the small page
    #  e4  G 24: tail 12 -> map 1 page: [G 48-72][free 72-80]                                         82
    #  e5  T 5: fits the mapped tail (8): [T 72-77][free 77-80] -- no 20 MiB segment this time          82
    #  e6  free T -> [free 72-80]; e7 free A -> [free 24-48]
    #  e8  S 24: best fit [24-48] (the tail holds only 8 mapped)                                      82
    #  e9  free L; e10 free G -> merges with the tail: [free 48-80]
    assert d.first_iteration_reserved == 82 * MiB  # 94 without expandable segments
    #  e11 A 24: [A 48-72][free 72-80]                                                                82
    #  e13 G 24: tail 8 -> map 1 page: [G 72-96][free 96-100]                                        102
    #  e14 T 5: tail 4 -> map 1 page: [T 96-101][free 101-120]                                       122
    assert d.steady_state_reserved == 122 * MiB  # 118 without: T no longer reuses a cached 20 MiB segment
    # two segments (one per pool); six map calls: e0, e1, e2, e4, e13, e14
    assert (d.segments, d.cuda_malloc_calls) == (2, 6)
    assert d.steady_state_device_total == (122 + 600) * MiB
    assert d.allocator_options == "expandable_segments:True"


def _small_gpu(monkeypatch, allocator_budget: int):
    """The H100 entry with a capacity that leaves the allocator ``allocator_budget`` bytes:
    GpuSpec.allocator_budget_bytes = capacity_bytes - cuda_context_bytes (600 MiB on sm90)."""
    small = replace(get_gpu("h100-80gb"), capacity_bytes=SM90_CONTEXT + allocator_budget)
    assert small.allocator_budget_bytes == allocator_budget
    monkeypatch.setattr(replay, "get_gpu", lambda key: small)
    return small


def test_out_of_memory_names_the_event_and_reports_the_uncapped_peaks(monkeypatch):
    gpu = _small_gpu(monkeypatch, 100 * MiB)  # capacity 700 MiB
    s = training_step()
    d = device_peaks(s.log, s.bounds, "h100-80gb", "")
    # Capped at 100 MiB: iteration 1 peaks at 94 (fits). In iteration 2:
    #  e13 G 24: new segment -> 94 + 24 = 118 > 100; release the cached, unsplit seg5 (20): 74 + 24 = 98 <= 100
    #  e14 T 5: nothing cached in the large pool; a new 20 MiB segment -> 98 + 20 = 118 > 100, nothing left
    #       to release -> out of memory at event 14
    assert d.oom_event == 14
    assert s.log.storages[s.log.events[14][1]].name == "T" and s.log.storages[s.log.events[14][1]].iteration == 2
    # the peaks say how much the step needs: the replay without a cap (the first test's numbers), not the
    # capped run's 98 MiB
    assert (d.first_iteration_reserved, d.steady_state_reserved) == (94 * MiB, 118 * MiB)
    assert d.steady_state_device_total == 718 * MiB
    # headroom = 700 - 718 = -18 MiB
    assert (d.capacity_bytes, d.headroom_bytes) == (gpu.capacity_bytes, -18 * MiB)
    assert not d.fits
    assert (d.segments, d.cuda_malloc_calls) == (6, 6)  # of the uncapped replay


def test_steady_state_counts_the_reserved_bytes_at_its_start(monkeypatch):
    """reset_peak_memory_stats() at iteration 2's start sets the peak to the current reserved bytes, so a
    segment released during iteration 2 still counts: the steady-state peak is the value before the window."""
    _small_gpu(monkeypatch, 60 * MiB)  # capacity 660 MiB
    s = Step()
    s.phase("setup")
    s.alloc("P", 12 * MiB, Origin.PARAMETER)  # e0: a 12 MiB segment                                12

    def first(s: Step) -> None:
        s.phase("forward")
        s.alloc("W", 40 * MiB)  # e1: a 40 MiB segment; 12 + 40 = 52 <= 60                            52
        s.free("W")  # e2: cached                                                                       52

    def second(s: Step) -> None:
        s.phase("forward")
        # e3 V 12 MiB with max_split_size_mb:20: the cached 40 MiB block is oversize (>= 20 MiB) and
        # V is below max_split_size, so it may not take it; a new segment: 52 + 12 = 64 > 60 ->
        # release_available_cached_blocks frees the oversize 40 MiB segment -> 12 + 12 = 24          24
        s.alloc("V", 12 * MiB)
        s.free("V")  # e4                                                                              24

    s.iterate(first)
    s.iterate(second)
    d = device_peaks(s.log, s.bounds, "h100-80gb", "max_split_size_mb:20")
    assert d.oom_event is None and d.fits
    assert d.first_iteration_reserved == 52 * MiB  # max of 12 (before), 52, 52
    assert d.steady_state_reserved == 52 * MiB  # max of 52 (at the reset), 24, 24 -- not 24
    # total 52 + 600 = 652 MiB of 660: headroom 8 MiB
    assert (d.steady_state_device_total, d.headroom_bytes) == (652 * MiB, 8 * MiB)
    assert (d.segments, d.cuda_malloc_calls) == (2, 3)  # P and V held; P, W and V allocated

