"""The predicted step as a PyTorch memory snapshot, for PyTorch's own memory viewer.

``torch.cuda.memory._snapshot()`` returns a dict that https://pytorch.org/memory_viz and
``torch.cuda._memory_viz`` read: ``segments`` (the allocator's segments at the time of the snapshot,
each with its blocks) and ``device_traces`` (one list per device of the allocator's actions:
``alloc``, ``free_requested``, ``free_completed``, ``segment_alloc``, ``segment_free``, ``segment_map``,
``segment_unmap``, ``oom``). Field names follow ``torch/cuda/memory.py`` (``_Segment``, ``_Block``,
``_TraceEntry`` TypedDicts) and ``torch/csrc/cuda/memory_snapshot.cpp`` (torch 2.13).

memgraph makes the same structure by replaying the predicted alloc/free stream through its model of
the caching allocator with history on: addresses are the model's (a bump pointer, see
:mod:`memgraph.allocator.caching_model`), ``time_us`` is the event index, and each allocation's
``frames`` name the op (or parameter/input) that made the tensor, the module, the phase and the
iteration, so the viewer's tooltip says what a block is. The segments are the state after the last
traced iteration.
"""

from __future__ import annotations

from memgraph.allocator.caching_model import CachingAllocatorModel, OutOfMemoryError
from memgraph.allocator.replay import log_stream
from memgraph.facts.cuda_allocator import K_SMALL_SIZE, AllocatorOptions
from memgraph.trace.record.event_log import EventLog


def _frames(log: EventLog, sid) -> list[dict]:
    if sid is None:
        return []
    rec = log.storages[sid]
    category = rec.category.value if rec.category is not None else "unknown"
    return [  # innermost first, as CapturedTraceback frames are
        {"name": f"{rec.name} [{category}]", "filename": rec.module or "(top level)", "line": 0},
        {"name": f"{rec.phase}, iteration {rec.iteration}", "filename": "memgraph", "line": 0},
    ]


def memory_snapshot(log: EventLog, options: AllocatorOptions = AllocatorOptions(),
                    capacity_bytes: int | None = None) -> dict:
    """The snapshot dict of the predicted step (see the module docstring). Stops at an out-of-memory
    event, as the real step would (the trace then ends with an ``oom`` entry)."""
    history: list = []
    model = CachingAllocatorModel(options, capacity_bytes, history=history)
    for kind, sid, nbytes in log_stream(log):
        try:
            model.malloc(sid, nbytes) if kind == "alloc" else model.free(sid)
        except OutOfMemoryError:
            break
    trace = []
    for t, (action, addr, size, sid) in enumerate(history):
        entry = {"action": action, "addr": addr, "size": size, "stream": 0, "time_us": t,
                 "frames": _frames(log, sid) if action in ("alloc", "free_requested", "free_completed", "oom") else []}
        if action == "oom":
            entry["device_free"] = 0 if capacity_bytes is None else capacity_bytes - model.reserved_bytes
        trace.append(entry)
    live = {addr: (requested, sid) for addr, _, requested, sid in model.live_blocks()}
    segments = []
    for seg in model.segment_ranges():
        blocks = []
        for addr, size, allocated in seg["blocks"]:
            requested, sid = live.get(addr, (0, None)) if allocated else (0, None)
            blocks.append({"address": addr, "size": size, "requested_size": requested,
                           "state": "active_allocated" if allocated else "inactive",
                           "frames": _frames(log, sid)})
        allocated_size = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
        segments.append({
            "device": 0, "address": seg["address"], "total_size": seg["total_size"],
            "allocated_size": allocated_size, "active_size": allocated_size,
            "requested_size": sum(b["requested_size"] for b in blocks), "stream": 0,
            # get_pool: a segment of the small pool holds blocks of at most kSmallSize
            "segment_type": "large" if seg["is_large"] else "small", "segment_pool_id": (0, 0),
            "is_expandable": seg["is_expandable"], "frames": [], "blocks": blocks,
        })
    return {"segments": segments, "device_traces": [trace],
            "allocator_settings": {"memgraph_prediction": True, "small_size": K_SMALL_SIZE}}


def trace_peak(snapshot: dict, device: int = 0) -> int:
    """The most bytes allocated at once in a snapshot's device trace (alloc minus free_completed),
    i.e. what ``max_memory_allocated`` would say over the traced window."""
    current = peak = 0
    for e in snapshot["device_traces"][device]:
        if e["action"] == "alloc":
            current += e["size"]
            peak = max(peak, current)
        elif e["action"] == "free_completed":
            current -= e["size"]
    return peak
