"""Ground truth on the CPU: every allocation and free from torch.profiler's memory events."""

from __future__ import annotations

import gc

from torch.profiler import record_function

from memgraph.cpu_profiler import cpu_memory_events, memory_profile
from memgraph.measure.real_step import build_run, collect_compile_garbage, run_iteration
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.private_api import kineto_events


def measure_cpu(spec: ModelSpec, opts: TrainingOptions) -> dict:
    """Run ``opts.iterations`` iterations on the CPU; peak bytes of the CPU allocator per iteration."""
    gc.collect()
    with memory_profile() as prof:
        run = build_run(spec, opts, "cpu")
        impl = run.optimizer_impl
        for it in range(1, opts.iterations + 1):
            with record_function(f"memgraph_iteration_{it}"):
                run_iteration(run)
            collect_compile_garbage(run)
        del run
    return {"optimizer_impl": impl, "iterations": per_iteration(prof, opts.iterations)}


def per_iteration(prof, iterations: int) -> list[dict]:
    memory = cpu_memory_events(prof)
    ranges = {int(e.name().rsplit("_", 1)[1]): (e.start_ns(), e.end_ns())
              for e in kineto_events(prof) if e.name().startswith("memgraph_iteration_")}
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
