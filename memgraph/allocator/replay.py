"""Replay an alloc/free stream through the caching allocator model: the cuda target's three peaks.

allocated    ``torch.cuda.max_memory_allocated``: live blocks, each rounded to 512 bytes (analysis).
reserved     ``torch.cuda.max_memory_reserved``: segments the caching allocator holds, from
             replaying the predicted alloc/free stream through
             :mod:`memgraph.allocator.caching_model`.
device total what nvidia-smi shows for the process: reserved + CUDA context and kernel images
             (``GpuSpec.cuda_context_bytes``, an estimate; see the catalog).

The replay is capped at the GPU's allocator budget (capacity minus context): a stream that
cannot be served even after freeing cached blocks is an out-of-memory error on that GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from memgraph.allocator.caching_model import CachingAllocatorModel, OutOfMemoryError
from memgraph.facts.cuda_allocator import AllocatorOptions
from memgraph.facts.gpus import get_gpu
from memgraph.trace.event_log import ALLOC, EventLog


@dataclass
class DevicePeaks:
    gpu: str
    gpu_name: str
    capacity_bytes: int
    allocator_options: str
    first_iteration_reserved: int
    steady_state_reserved: int
    context_bytes: int  # estimate
    steady_state_device_total: int
    headroom_bytes: int  # capacity - device total (negative: does not fit)
    fits: bool
    oom_event: int | None  # first event the allocator could not serve within capacity
    segments: int
    cuda_malloc_calls: int


@dataclass
class ReplayResult:
    peak_allocated: int
    peak_reserved: int
    final_allocated: int
    final_reserved: int
    num_segments: int        # segments held at the end (segment.all.current)
    num_cuda_malloc: int     # device allocations: cudaMalloc calls, or cuMemMap calls if expandable
    oom: bool
    timeline: list[tuple[int, int, int]]  # (event index, allocated, reserved) after that event
    oom_event_index: int | None = None     # the event that raised OutOfMemoryError
    stats: dict = field(default_factory=dict)
    reserved_after: list[int] = field(default_factory=list)  # reserved bytes after every event (keep_reserved)


def replay(events: Iterable[tuple], options: AllocatorOptions = AllocatorOptions(),
           capacity_bytes: int | None = None, max_points: int = 2000, keep_reserved: bool = False) -> ReplayResult:
    """Replay ``("alloc", key, nbytes)`` / ``("free", key, nbytes)`` events through the model.

    The one replay driver: the tests' hand-made streams and the trace's event log both come here.
    Stops at the first out-of-memory (``oom=True``), as the real step would raise there. The
    timeline holds (event index, allocated, reserved) after every event, downsampled to at most
    ``max_points`` points that keep each bucket's allocated and reserved maxima; with
    ``keep_reserved`` the full reserved curve is kept too.
    """
    m = CachingAllocatorModel(options, capacity_bytes)
    malloc, free = m.malloc, m.free
    alloc_trace: list[int] = []
    reserved_trace: list[int] = []
    a_append, r_append = alloc_trace.append, reserved_trace.append
    oom, oom_index = False, None
    for i, ev in enumerate(events):
        kind = ev[0]
        try:
            if kind == "alloc":
                malloc(ev[1], ev[2])
            elif kind == "free":
                free(ev[1])
            else:
                raise ValueError(f"event {i}: unknown event kind {kind!r}")
        except OutOfMemoryError:
            oom, oom_index = True, i
            a_append(m.allocated_bytes)
            r_append(m.reserved_bytes)
            break
        a_append(m.allocated_bytes)
        r_append(m.reserved_bytes)
    return ReplayResult(
        peak_allocated=m.peak_allocated_bytes, peak_reserved=m.peak_reserved_bytes,
        final_allocated=m.allocated_bytes, final_reserved=m.reserved_bytes,
        num_segments=m.num_segments, num_cuda_malloc=m.num_device_alloc, oom=oom,
        timeline=_downsample(alloc_trace, reserved_trace, max_points),
        oom_event_index=oom_index, stats=m.stats(), reserved_after=reserved_trace if keep_reserved else [])


def _downsample(alloc: list[int], reserved: list[int], max_points: int) -> list[tuple[int, int, int]]:
    n = len(alloc)
    if max_points <= 0 or n == 0:
        return []
    if n <= max_points:
        return list(zip(range(n), alloc, reserved))
    if max_points == 1:
        i = max(range(n), key=reserved.__getitem__)
        return [(i, alloc[i], reserved[i])]
    buckets = max_points // 2
    keep: set[int] = set()
    for j in range(buckets):
        lo, hi = j * n // buckets, (j + 1) * n // buckets
        idx = range(lo, hi)
        keep.add(max(idx, key=alloc.__getitem__))
        keep.add(max(idx, key=reserved.__getitem__))
    return [(i, alloc[i], reserved[i]) for i in sorted(keep)]


def log_stream(log: EventLog):
    """The event log as replay events: ``("alloc", sid, nbytes)`` and ``("free", sid, 0)``."""
    storages = log.storages
    for kind, sid in log.events:
        yield ("alloc", sid, storages[sid].nbytes) if kind == ALLOC else ("free", sid, 0)


def _peak_in(values: list[int], lo: int, hi: int) -> int:
    """max_memory_reserved over events [lo, hi) after a reset at lo (the value before lo counts)."""
    window = values[max(lo - 1, 0):hi]
    return max(window, default=0)


def device_peaks(log: EventLog, bounds: list[tuple[int, int]], gpu_key: str, allocator_conf: str) -> DevicePeaks:
    gpu = get_gpu(gpu_key)
    options = AllocatorOptions.from_env_string(allocator_conf) if allocator_conf else AllocatorOptions()
    run = replay(log_stream(log), options, gpu.allocator_budget_bytes, max_points=0, keep_reserved=True)
    oom_event = run.oom_event_index
    if oom_event is not None:  # how much it would need: replay again without a cap
        run = replay(log_stream(log), options, None, max_points=0, keep_reserved=True)
    first = _peak_in(run.reserved_after, *bounds[0])
    steady = _peak_in(run.reserved_after, bounds[1][0], bounds[-1][1])
    total = steady + gpu.cuda_context_bytes
    return DevicePeaks(
        gpu=gpu.key, gpu_name=gpu.name, capacity_bytes=gpu.capacity_bytes, allocator_options=allocator_conf,
        first_iteration_reserved=first, steady_state_reserved=steady, context_bytes=gpu.cuda_context_bytes,
        steady_state_device_total=total, headroom_bytes=gpu.capacity_bytes - total,
        fits=oom_event is None and total <= gpu.capacity_bytes, oom_event=oom_event,
        segments=run.num_segments, cuda_malloc_calls=run.num_cuda_malloc,
    )
