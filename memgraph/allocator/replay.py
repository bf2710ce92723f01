"""Replay an alloc/free stream through the caching allocator model: the cuda target's three peaks.

allocated    ``torch.cuda.max_memory_allocated``: live blocks, each rounded to 512 bytes (analysis).
reserved     ``torch.cuda.max_memory_reserved``: segments the caching allocator holds, from
             replaying the predicted alloc/free stream through
             :mod:`memgraph.allocator.caching_model`.
device total what nvidia-smi shows for the process: reserved + CUDA context and kernel images
             (``cuda_context_for`` in the catalog, an estimate by architecture, CUDA major and module loading;
             or ``--context-bytes``).

The replay is capped at the GPU's allocator budget (capacity minus the expected context): a stream that
cannot be served even after freeing cached blocks is an out-of-memory error on that GPU. Each peak also
has an upper end, with every bounded unknown at its upper size (:mod:`memgraph.allocator.upper_bound`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from memgraph.allocator.caching_model import CachingAllocatorModel, OutOfMemoryError
from memgraph.analysis.peaks import Locator
from memgraph.facts.cuda_allocator import AllocatorOptions
from memgraph.allocator.upper_bound import (
    PHANTOM_KEY, allocated_slack, context_unknown, phantom_bytes, total_only_slack, unknown_rows,
)
from memgraph.facts.gpus import get_gpu, process_context
from memgraph.facts.unknowns import BoundedUnknown
from memgraph.analysis.device import DevicePeaks  # the device record Result.device holds (defined there)
from memgraph.trace.record.event_log import ALLOC, EventLog


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


def _steady_reserved(log: EventLog, bounds: list[tuple[int, int]], options: AllocatorOptions,
                     capacity: int | None, first_block: int = 0):
    """Replay the log (after one ``first_block``-byte block if given); (run, first-iteration and steady peaks)."""
    stream = log_stream(log)
    if first_block:
        stream = _prepend(("alloc", PHANTOM_KEY, first_block), stream)
    run = replay(stream, options, capacity, max_points=0, keep_reserved=True)
    shift = 1 if first_block else 0
    first = _peak_in(run.reserved_after, bounds[0][0] + shift, bounds[0][1] + shift)
    steady = _peak_in(run.reserved_after, bounds[1][0] + shift, bounds[-1][1] + shift)
    return run, first, steady


def _prepend(event: tuple, stream):
    yield event
    yield from stream


def device_peaks(log: EventLog, bounds: list[tuple[int, int]], gpu_key: str, allocator_conf: str, *,
                 steady_allocated: int | None = None, unknowns: list[BoundedUnknown] = (),
                 cuda_version: int | str | None = None, module_loading: str = "lazy",
                 context_bytes: int | None = None) -> DevicePeaks:
    """The reserved and device-total peaks of the logged step on ``gpu_key``, each with its upper end.

    ``steady_allocated``: the analysis' steady-state allocated peak (None: the replay's peak over the run);
    ``unknowns``: the trace's bounded unknowns; ``cuda_version`` / ``module_loading`` pick the context estimate,
    which ``context_bytes`` (``--context-bytes``) replaces: then the context is no unknown.
    """
    gpu = get_gpu(gpu_key)
    options = AllocatorOptions.from_env_string(allocator_conf) if allocator_conf else AllocatorOptions()
    estimate, context = process_context(gpu, cuda_version, module_loading, context_bytes)
    all_unknowns = list(unknowns) + ([context_unknown(estimate)] if context_bytes is None else [])
    budget = gpu.capacity_bytes - context
    run, first, steady = _steady_reserved(log, bounds, options, budget)
    oom_event = run.oom_event_index
    oom = _oom_point(log, run) if oom_event is not None else {}
    if oom_event is not None:  # how much it would need: replay again without a cap
        run, first, steady = _steady_reserved(log, bounds, options, None)
    total = steady + context
    fits = oom_event is None and total <= gpu.capacity_bytes
    allocated = run.peak_allocated if steady_allocated is None else steady_allocated
    block = phantom_bytes(allocated_slack(all_unknowns), options)
    # the uncapped replay with the block, also when there is no block but the capped replay released segments
    # near capacity; never below the expected value plus the block
    released = run.stats.get("num_cuda_free", 0) > 0
    reserved_upper = (max(_steady_reserved(log, bounds, options, None, block)[2], steady + block)
                      if block or released else steady)
    context_upper = estimate.high_bytes if context_bytes is None else context_bytes
    total_upper = reserved_upper + context + total_only_slack(all_unknowns)
    assumption = (f"given by --context-bytes ({context:,} B)" if context_bytes is not None else
                  f"estimated for {estimate.assumption()}, range {_mib(estimate.low_bytes)}-{_mib(estimate.high_bytes)} MiB")
    return DevicePeaks(
        gpu=gpu.key, gpu_name=gpu.name, capacity_bytes=gpu.capacity_bytes, allocator_options=allocator_conf,
        first_iteration_reserved=first, steady_state_reserved=steady, context_bytes=context,
        steady_state_device_total=total, headroom_bytes=gpu.capacity_bytes - total,
        fits=fits, oom_event=oom_event, segments=run.num_segments, cuda_malloc_calls=run.num_cuda_malloc,
        steady_state_allocated=allocated, allocated_upper=allocated + allocated_slack(all_unknowns),
        reserved_upper=reserved_upper, unknowns_block_bytes=block, context_upper_bytes=context_upper,
        steady_state_device_total_upper=total_upper, fits_with_margin=fits and total_upper <= gpu.capacity_bytes,
        context_estimated=context_bytes is None, context_assumption=assumption, cuda_version=estimate.cuda_major,
        module_loading=estimate.module_loading, unknowns=unknown_rows(all_unknowns),
        allocator_budget_bytes=budget, **oom, reserved_after=run.reserved_after,
    )


def _oom_point(log: EventLog, run: ReplayResult) -> dict:
    """Where the capped replay raised out-of-memory: iteration, phase, module, op, and the allocator's state."""
    index = run.oom_event_index
    iteration, phase, module, op = Locator(log)(index)
    return dict(oom_iteration=iteration, oom_phase=phase, oom_module=module, oom_op=op,
                oom_request_bytes=log.storages[log.events[index][1]].nbytes,
                oom_allocated_bytes=run.final_allocated, oom_reserved_bytes=run.final_reserved)


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f}"
