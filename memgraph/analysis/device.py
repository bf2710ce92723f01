"""The cuda target's three peaks: allocated, reserved (caching allocator replay), device total.

allocated    ``torch.cuda.max_memory_allocated``: live blocks, each rounded to 512 bytes.
reserved     ``torch.cuda.max_memory_reserved``: segments the caching allocator holds, from
             replaying the predicted alloc/free stream through
             :mod:`memgraph.allocator.cuda_caching`.
device total what nvidia-smi shows for the process: reserved + CUDA context and kernel images
             (``GpuSpec.cuda_context_bytes``, an estimate; see the catalog).

The replay is capped at the GPU's allocator budget (capacity minus context): a stream that
cannot be served even after freeing cached blocks is an out-of-memory error on that GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..allocator.cuda_caching import AllocatorOptions, CachingAllocatorModel, OutOfMemoryError
from ..gpu.catalog import get_gpu
from ..trace.recorder import ALLOC


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


def _replay(rec, options: AllocatorOptions, capacity: int | None) -> tuple[list[int], int | None, CachingAllocatorModel]:
    """Reserved bytes after every event (up to an out-of-memory, whose event index is returned)."""
    model = CachingAllocatorModel(options, capacity)
    reserved = []
    for i, (kind, sid) in enumerate(rec.events):
        try:
            if kind == ALLOC:
                model.malloc(sid, rec.storages[sid].nbytes)
            else:
                model.free(sid)
        except OutOfMemoryError:
            return reserved, i, model
        reserved.append(model.reserved_bytes)
    return reserved, None, model


def _peak_in(values: list[int], lo: int, hi: int) -> int:
    """max_memory_reserved over events [lo, hi) after a reset at lo (the value before lo counts)."""
    window = values[max(lo - 1, 0):hi]
    return max(window, default=0)


def device_peaks(rec, bounds: list[tuple[int, int]], gpu_key: str, allocator_conf: str) -> DevicePeaks:
    gpu = get_gpu(gpu_key)
    options = AllocatorOptions.from_env_string(allocator_conf) if allocator_conf else AllocatorOptions()
    reserved, oom_event, model = _replay(rec, options, gpu.allocator_budget_bytes)
    if oom_event is not None:  # how much it would need: replay again without a cap
        reserved, _, model = _replay(rec, options, None)
    first = _peak_in(reserved, *bounds[0])
    steady = _peak_in(reserved, bounds[1][0], bounds[-1][1])
    total = steady + gpu.cuda_context_bytes
    return DevicePeaks(
        gpu=gpu.key, gpu_name=gpu.name, capacity_bytes=gpu.capacity_bytes, allocator_options=allocator_conf,
        first_iteration_reserved=first, steady_state_reserved=steady, context_bytes=gpu.cuda_context_bytes,
        steady_state_device_total=total, headroom_bytes=gpu.capacity_bytes - total,
        fits=oom_event is None and total <= gpu.capacity_bytes, oom_event=oom_event,
        segments=model.num_segments, cuda_malloc_calls=model.num_device_alloc,
    )
