"""Refuse a CPU measurement that cannot fit in this machine's memory, before building the real model.

``memgraph measure --device cpu`` builds the model with real weights and runs the step; a 7B model
would take tens of GB before the kernel kills it. Two checks, cheapest first:

1. a lower bound from the model built on ``meta`` (no memory): parameters, their gradients and the
   optimizer's per-parameter state (``STATE_TENSORS_PER_PARAMETER``) must fit;
2. when that bound is a noticeable share of the machine, memgraph's own ``cpu``-target prediction
   of the step's peak (the number this measurement exists to check) must fit.
"""

from __future__ import annotations

import os
from dataclasses import replace

from memgraph.analysis.summarize import summarize
from memgraph.errors import MemgraphError
from memgraph.model_spec.build import build_model
from memgraph.model_spec.optimizers import STATE_TENSORS_PER_PARAMETER
from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.trace.shadow_values import ShadowValues
from memgraph.trace.tracer import trace_training
from memgraph.units import human_bytes

# Share of the available memory a measurement may plan to use: the rest is for the interpreter,
# torch's own state, the profiler's event buffers and allocator fragmentation. A policy, not a model.
USABLE_SHARE = 0.8
# Below this share of the available memory the lower bound is trusted without a full prediction.
PREDICT_ABOVE_SHARE = 0.125


def available_bytes() -> int:
    """MemAvailable from /proc/meminfo (Linux), else the physical memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def lower_bound_bytes(spec: ModelSpec, opts: TrainingOptions) -> int:
    """Parameters + gradients + optimizer state of the trainable parameters, from a meta build."""
    model = build_model(spec, replace(opts, target="cpu"), "meta", constructor_values=ShadowValues)
    element = PRECISION_DTYPE[opts.precision].itemsize
    params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return element * (params + trainable * (1 + STATE_TENSORS_PER_PARAMETER[opts.optimizer]))


def check_cpu_measurement_fits(spec: ModelSpec, opts: TrainingOptions, available: int | None = None) -> None:
    """Raise a one-line error when measuring ``spec`` on the CPU would not fit in memory."""
    available = available_bytes() if available is None else available
    usable = int(available * USABLE_SHARE)
    # --nproc N (measure/distributed.py): N processes, each building the whole model before wrapping it
    ranks = f" x {opts.nproc} ranks" if opts.nproc > 1 else ""
    need = lower_bound_bytes(spec, opts) * opts.nproc
    what = f"its parameters, gradients and optimizer state{ranks} alone need"
    if usable >= need and need > available * PREDICT_ABOVE_SHARE:  # the bound is not conclusive
        need = _predicted_peak(spec, opts) * opts.nproc
        what = f"memgraph predicts a peak{' per rank' + ranks if ranks else ''} of"
    if need > usable:
        raise MemgraphError(
            f"measuring {spec.name} on the CPU would not fit: {what} {human_bytes(need)}, and this machine has "
            f"{human_bytes(available)} available ({USABLE_SHARE:.0%} usable): measure a smaller configuration "
            "(--batch-size, --seq-len, a smaller model) or use 'memgraph analyze' instead")


def _predicted_peak(spec: ModelSpec, opts: TrainingOptions) -> int:
    cpu = replace(opts, target="cpu")
    result = summarize(trace_training(spec, cpu), spec.name, cpu.to_dict(), "cpu")
    return max(result.first_iteration_peak.bytes, result.steady_state_peak.bytes)
