"""Measure: run the identical training step for real and record what the allocator reports."""

from __future__ import annotations

import platform
import sys

import torch

from memgraph.errors import MemgraphError
from memgraph.frame_stack import on_deep_frame_stack
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec

MEASUREMENT_SCHEMA = 1


@on_deep_frame_stack  # the real step's compile too (memgraph/frame_stack.py)
def run_measurement(spec: ModelSpec, opts: TrainingOptions, device: str, snapshot: str | None = None) -> dict:
    """Measure ``spec`` trained with ``opts`` on ``device`` ('cpu' or 'cuda'); returns the JSON record."""
    if device == "cpu":
        if snapshot is not None:
            raise MemgraphError(f"--snapshot {snapshot!r} records the CUDA allocator's history: "
                                "use it with --device cuda")
        from memgraph.measure.cpu import measure_cpu as run
        from memgraph.measure.memory_guard import check_cpu_measurement_fits

        check_cpu_measurement_fits(spec, opts)
        if opts.strategy is not None or opts.deepspeed is not None:  # one gloo process per rank (measure/distributed.py)
            from memgraph.measure.distributed import measure_cpu_distributed as run
    elif device == "cuda":
        if opts.strategy is not None or opts.deepspeed is not None:
            raise MemgraphError(f"--strategy {opts.strategy or '--deepspeed'} is measured with gloo on the CPU: use --device cpu "
                                "(memgraph measures one GPU, not a multi-GPU job)")
        from memgraph.measure.cuda import measure_cuda

        def run(spec, opts):
            return measure_cuda(spec, opts, snapshot)
    else:
        raise MemgraphError(f"unknown device {device!r}: pass --device cpu or --device cuda")
    resolved = resolve_defaults(spec, opts)  # the record stores what ran: no 'auto' left to re-resolve
    opts = resolved.options
    record = {
        "kind": "memgraph.measurement",
        "schema_version": MEASUREMENT_SCHEMA,
        "model": spec.name,
        "device": device,
        "options": opts.to_dict(),
        "assumptions": resolved.assumptions,
        "environment": environment(),
    }
    record.update(run(spec, opts))
    return record


def environment() -> dict:
    env = {"python": sys.version.split()[0], "platform": platform.platform(), "torch": torch.__version__,
           "cpu": platform.processor() or platform.machine()}
    try:
        import transformers

        env["transformers"] = transformers.__version__
    except ImportError:
        pass
    from memgraph.version import __version__

    env["memgraph"] = __version__
    return env

