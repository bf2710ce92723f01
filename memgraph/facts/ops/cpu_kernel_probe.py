"""The live kernel probe: a CPU kernel whose buffers no static rule can reproduce (oneDNN convolutions) run once on
this CPU under torch.profiler at the traced shapes, its peak cached per signature, inputs bounded by
``MEMGRAPH_CPU_PROBE_LIMIT_MB`` (see facts/ops/cpu_workspace.py). The ``cpu`` target's predictions use it, so it
ships with the package; ``MEMGRAPH_CPU_PROBE=0`` turns it off."""

from __future__ import annotations

import os

import torch

from memgraph.cpu_profiler import cpu_memory_events, memory_profile
from memgraph.facts.ops.cpu_buffers import tensor_bytes
from memgraph.private_api import tree_flatten, tree_map
from memgraph.units import MiB


PROBE_ENV = "MEMGRAPH_CPU_PROBE"  # "0" / "false" / "off": never run kernels, use the estimates
PROBE_LIMIT_ENV = "MEMGRAPH_CPU_PROBE_LIMIT_MB"
PROBE_LIMIT_MB = 512  # default bound on the bytes of a probe's input tensors


# --------------------------------------------------------------------------------------------
# probe: run the kernel once on this CPU under torch.profiler
# --------------------------------------------------------------------------------------------
_PROBE_CACHE: dict = {}


def probing_enabled() -> bool:
    return os.environ.get(PROBE_ENV, "1").strip().lower() not in ("0", "false", "off", "no")


def _probe_limit_bytes() -> int:
    try:
        return int(float(os.environ.get(PROBE_LIMIT_ENV, PROBE_LIMIT_MB)) * MiB)
    except ValueError:
        return PROBE_LIMIT_MB * MiB


def _signature(x):
    if isinstance(x, torch.Tensor):
        return ("T", tuple(x.shape), tuple(x.stride()), str(x.dtype), bool(x.requires_grad))
    if isinstance(x, (list, tuple)):
        return tuple(_signature(v) for v in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _signature(v)) for k, v in x.items()))
    return x


def _restride(t: torch.Tensor, shape) -> tuple[int, ...]:
    """Dense strides for ``shape`` that keep ``t``'s dimension order (like ``empty_like``); stride-0
    (expanded) dims stay 0."""
    order = sorted(range(t.dim()), key=lambda i: (-t.stride(i) if t.stride(i) else 1, i))
    strides = [0] * t.dim()
    step = 1
    for i in reversed(order):
        if t.stride(i) == 0 and t.dim() > 0:
            continue
        strides[i] = step
        step *= shape[i]
    return tuple(strides)


def _materialize(t: torch.Tensor, batch: int | None = None) -> torch.Tensor:
    shape = list(t.shape)
    stride = tuple(t.stride())
    if batch is not None and t.dim() > 0:
        shape[0] = batch
        stride = _restride(t, shape)
    real = torch.empty_strided(shape, stride, dtype=t.dtype, device="cpu")
    real.zero_()  # defined values (no NaN/denormal slow paths); zero_ of an expanded view is fine
    if t.requires_grad and real.is_floating_point():
        real.requires_grad_(True)
    return real


def _meta_output_bytes(op, args: tuple, kwargs: dict) -> int:
    """Bytes of ``op``'s outputs, from running it on meta copies of the arguments (nothing allocated)."""
    meta_args, meta_kwargs = tree_map(lambda a: a.to("meta") if isinstance(a, torch.Tensor) else a, (args, kwargs))
    return _alloc_bytes(op(*meta_args, **meta_kwargs))


def _alloc_bytes(args) -> int:
    flat, _ = tree_flatten(args)
    return sum(tensor_bytes(t) for t in flat if isinstance(t, torch.Tensor))


def _run_profiled(op, args, kwargs, batch: int | None, batched: tuple[int, ...]) -> int:
    """Kernel peak minus what it still holds at the end (its outputs), from profiler memory events."""
    real_args = tuple(
        _materialize(a, batch if i in batched else None) if isinstance(a, torch.Tensor) else a
        for i, a in enumerate(args)
    )
    real_kwargs = tree_map(lambda a: _materialize(a) if isinstance(a, torch.Tensor) else a, kwargs)
    with memory_profile() as prof:
        out = op(*real_args, **real_kwargs)
    live = peak = 0
    for _, b in cpu_memory_events(prof):
        live += b
        peak = max(peak, live)
    del out
    return max(0, peak - live)


MIN_BATCH_TO_EXTRAPOLATE = 4  # two smaller batches n1 < n2 <= batch / 2 exist


def probe_kernel_peak(op, args: tuple, kwargs: dict, batched: tuple[int, ...] = (0,)) -> int | None:
    """Bytes the CPU kernel of ``op`` holds above its outputs at its peak, measured by running it.

    ``args`` may be meta tensors: they are replaced by zero-filled CPU tensors with the same shapes,
    strides, dtypes and requires_grad. ``batched`` are the positions of the arguments whose dim 0
    is the batch: when the inputs exceed the probe limit the op runs at two batch sizes that fit
    and the result is extrapolated linearly to the real batch. None when probing is off, when the
    inputs exceed the limit and the batch cannot shrink below it, or when the probe fails (e.g.
    another profiler is already running).
    """
    if not probing_enabled():
        return None
    key = (str(op), _signature(args), _signature(kwargs), torch.get_num_threads(),
           torch.backends.mkldnn.enabled)
    if key in _PROBE_CACHE:
        return _PROBE_CACHE[key]
    result = None
    try:
        outputs = _meta_output_bytes(op, args, kwargs)
        total = _alloc_bytes((args, kwargs)) + outputs
        limit = _probe_limit_bytes()
        batch = next((args[i].shape[0] for i in batched if isinstance(args[i], torch.Tensor) and args[i].dim()), None)
        if total <= limit:
            result = _run_profiled(op, args, kwargs, None, batched)
        elif batch and batch >= MIN_BATCH_TO_EXTRAPOLATE:
            # every output is counted as per-sample (grad_weight is not): n2 errs small, the probe stays bounded
            batched_bytes = sum(tensor_bytes(args[i]) for i in batched if isinstance(args[i], torch.Tensor)) + outputs
            per_sample = max(1, batched_bytes // batch)
            fixed = total - per_sample * batch
            n2 = min(batch // 2, (limit - fixed) // per_sample)
            if n2 >= 2:  # two batch sizes within the limit: extrapolate; else no probe
                n1 = max(1, n2 // 2)
                y1 = _run_profiled(op, args, kwargs, n1, batched)
                y2 = _run_profiled(op, args, kwargs, n2, batched)
                result = max(0, round(y2 + (y2 - y1) * (batch - n2) / (n2 - n1)))
    except Exception:
        result = None
    _PROBE_CACHE[key] = result
    return result
