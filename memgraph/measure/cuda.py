"""Ground truth on an NVIDIA GPU: the CUDA caching allocator's counters and the device total."""

from __future__ import annotations

import subprocess

import torch

from memgraph.errors import MemgraphError
from memgraph.measure.real_step import build_run, collect_compile_garbage, precision_context, run_iteration
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.private_api import (
    dump_memory_history,
    set_allocator_settings,
    start_memory_history,
)

NVIDIA_SMI_QUERY = "name,driver_version,memory.total,memory.used"


SNAPSHOT_MAX_ENTRIES = 200_000  # alloc/free events _record_memory_history keeps (its default, sys.maxsize, keeps all)


def measure_cuda(spec: ModelSpec, opts: TrainingOptions, snapshot: str | None = None) -> dict:
    """Run ``opts.iterations`` iterations on cuda:0; per iteration allocated/reserved peaks and device use.

    ``snapshot``: record the allocator's history (``torch.cuda.memory._record_memory_history``) from
    before the model is built and dump it there at the end, for https://pytorch.org/memory_viz."""
    if not torch.cuda.is_available():
        raise MemgraphError("no CUDA device: run 'memgraph measure --device cuda' on a machine with an NVIDIA GPU")
    if opts.allocator_conf:  # before the first allocation, as PYTORCH_CUDA_ALLOC_CONF would be
        set_allocator_settings(opts.allocator_conf)
    torch.cuda.init()
    context = _device_used()  # before any tensor: the CUDA context (and other processes)
    if snapshot:
        start_memory_history(SNAPSHOT_MAX_ENTRIES)
    run = build_run(spec, opts, "cuda")
    autocast, scaler = precision_context(opts, "cuda")
    torch.cuda.synchronize()
    iterations = []
    for it in range(1, opts.iterations + 1):
        torch.cuda.reset_peak_memory_stats()
        start = torch.cuda.memory_allocated()
        run_iteration(run, autocast=autocast, scaler=scaler)
        torch.cuda.synchronize()
        iterations.append({
            "iteration": it,
            "start_allocated": start,
            "peak_allocated": torch.cuda.max_memory_allocated(),
            "peak_reserved": torch.cuda.max_memory_reserved(),
            "end_allocated": torch.cuda.memory_allocated(),
            "end_reserved": torch.cuda.memory_reserved(),
            "device_used": _device_used(),
            "nvidia_smi": nvidia_smi_query(),
            "memory_stats": {k: v for k, v in torch.cuda.memory_stats().items() if isinstance(v, (int, float))},
        })
        collect_compile_garbage(run)  # after this iteration's figures: the next one starts without Dynamo's garbage
    if snapshot:
        dump_memory_history(snapshot)
    props = torch.cuda.get_device_properties(0)
    return {
        "optimizer_impl": run.optimizer_impl,
        "gpu": {"name": props.name, "total_memory": props.total_memory,
                "compute_capability": [props.major, props.minor], "cuda": torch.version.cuda,
                "cudnn": torch.backends.cudnn.version(),  # cuDNN > 9.15 on sm90/sm100 puts cuDNN SDPA first
                "driver": (nvidia_smi_query() or {}).get("driver_version")},
        "device_used_before_model": context,
        "iterations": iterations,
    }


def _device_used() -> int:
    free, total = torch.cuda.mem_get_info()
    return total - free


def nvidia_smi_query() -> dict | None:
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={NVIDIA_SMI_QUERY}", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    name, driver, total, used = [x.strip() for x in out.split(",")]
    return {"name": name, "driver_version": driver, "memory_total_mib": int(total), "memory_used_mib": int(used)}
