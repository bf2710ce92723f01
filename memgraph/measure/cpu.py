"""Ground truth on the CPU: every allocation and free from torch.profiler's memory events."""

from __future__ import annotations

import gc

import torch
from torch.profiler import record_function

from ..spec.options import TrainingOptions
from ..spec.source import ModelSpec
from ..spec.tasks import loss_from_outputs
from ..trace.step import train_iteration
from .profiler import memory_profile
from .setup import build_run

MEMORY_EVENT = "[memory]"  # name torch.profiler gives allocator events (profile_memory=True)


def measure_cpu(spec: ModelSpec, opts: TrainingOptions) -> dict:
    """Run ``opts.iterations`` iterations on the CPU; peak bytes of the CPU allocator per iteration."""
    gc.collect()
    with memory_profile() as prof:
        model, batch, optimizer, impl = build_run(spec, opts, "cpu")
        for it in range(1, opts.iterations + 1):
            with record_function(f"memgraph_iteration_{it}"):
                train_iteration(model, batch, loss_from_outputs, optimizer, loop=opts.loop)
        del model, batch, optimizer
    return {"optimizer_impl": impl, "iterations": _per_iteration(prof.profiler.kineto_results.events(), opts.iterations)}


def _per_iteration(events, iterations: int) -> list[dict]:
    memory, ranges = [], {}
    for e in events:
        if e.name() == MEMORY_EVENT and e.device_type() == torch.autograd.DeviceType.CPU:
            memory.append((e.start_ns(), e.nbytes()))
        elif e.name().startswith("memgraph_iteration_"):
            ranges[int(e.name().rsplit("_", 1)[1])] = (e.start_ns(), e.end_ns())
    memory.sort(key=lambda m: m[0])  # stable: same-time events keep their recorded order
    out = []
    for it in range(1, iterations + 1):
        lo, hi = ranges[it]
        cur = sum(b for t, b in memory if t < lo)
        start, peak = cur, cur
        for t, b in memory:
            if lo <= t <= hi:
                cur += b
                peak = max(peak, cur)
        out.append({"iteration": it, "start_allocated": start, "peak_allocated": peak, "end_allocated": cur})
    return out
