"""``torch.cuda`` as the script sees it on the cuda target: the chosen ``--gpu``, answering from the prediction.

A CPU-only build has no CUDA; a script written for one asks ``torch.cuda.is_available()``, the device's name,
capability and memory, opens streams and events, synchronizes, enters ``torch.autocast("cuda")`` and asks
``max_memory_allocated()``. While the script runs these public names answer (each patch undone on exit):

* availability, count (1), current device (0), ``set_device`` (accepted), name, capability, properties
  (``name``, ``total_memory``, ``major``, ``minor``) and bf16 support of the ``--gpu`` (memgraph/facts/gpus.py);
* streams, events, ``synchronize``, ``empty_cache``: no-ops (on meta every op is already "done");
* ``memory_allocated`` / ``max_memory_allocated`` / ``reset_peak_memory_stats`` / ``memory_stats``: the
  recorded storages so far, rounded as the caching allocator rounds them (facts/cuda_allocator.py
  ``cuda_allocated_size``); ``memory_reserved`` answers the same (no allocator replay while the script runs);
  ``mem_get_info``: (capacity - allocated, capacity);
* ``torch.autocast("cuda")``, ``torch.amp.autocast``, ``torch.cuda.amp.autocast``: the emulated CUDA autocast
  (memgraph/trace/autocast_emulation.py) over meta tensors; other device types keep the real one;
  ``torch.is_autocast_enabled`` / ``torch.get_autocast_dtype`` for cuda (and meta) answer from the emulation;
"""

from __future__ import annotations

import contextlib
import types
from unittest import mock

import torch

from memgraph.facts.cuda_allocator import ALLOCATED_SIZE
from memgraph.facts.gpus import GpuSpec
from memgraph.trace.emulate.autocast_emulation import AutocastStats, autocast_region
from memgraph.trace.record.event_log import ALLOC, EventLog

_REAL_AUTOCAST = torch.amp.autocast_mode.autocast
_REAL_IS_ENABLED = torch.is_autocast_enabled
_REAL_GET_DTYPE = torch.get_autocast_dtype
_REAL_AVAILABLE = torch.amp.is_autocast_available


class DeviceCounters:
    """``memory_allocated`` and its peak, from the recorded event log, as the cuda target counts them."""

    def __init__(self, log: EventLog, target: str):
        self.log = log
        self.size = ALLOCATED_SIZE[target]
        self.pos = self.current = self.peak = 0

    def update(self) -> None:
        storages, events = self.log.storages, self.log.events
        for kind, sid in events[self.pos:]:
            self.current += self.size(storages[sid].nbytes) * (1 if kind == ALLOC else -1)
            self.peak = max(self.peak, self.current)
        self.pos = len(events)

    def allocated(self, *_a, **_k) -> int:
        self.update()
        return self.current

    def max_allocated(self, *_a, **_k) -> int:
        self.update()
        return self.peak

    def reset_peak(self, *_a, **_k) -> None:
        self.update()
        self.peak = self.current

    def stats(self, *_a, **_k) -> dict:
        self.update()
        return {f"{name}.all.{when}": value for name in ("allocated_bytes", "reserved_bytes", "active_bytes")
                for when, value in (("current", self.current), ("peak", self.peak))}


class _Stream:
    """A CUDA stream stand-in: every operation is a no-op (meta ops are complete when they return)."""

    def __init__(self, *_a, **_k):
        self.device = torch.device("cuda", 0)

    def wait_stream(self, *_a): return None
    def wait_event(self, *_a): return None
    def record_event(self, event=None): return event or _Event()
    def synchronize(self): return None
    def query(self): return True
    def __enter__(self): return self
    def __exit__(self, *_a): return None


class _Event:
    def __init__(self, *_a, **_k): pass
    def record(self, *_a): return None
    def wait(self, *_a): return None
    def synchronize(self): return None
    def query(self): return True
    def elapsed_time(self, _other) -> float: return 1.0


class AutocastEmulations:
    """The script's ``torch.autocast`` calls: emulated for the cuda device (meta tensors), real otherwise."""

    def __init__(self, on_cache, target: str = "cuda"):
        self.target = target  # cpu target: meta tensors are the CPU's, whose real autocast state answers
        self.stats: dict[torch.dtype, AutocastStats] = {}
        self.on_cache = on_cache
        self.open: list[torch.dtype] = []  # dtypes of the emulated regions open now, innermost last

    def is_enabled(self, device_type=None) -> bool:
        """``torch.is_autocast_enabled``: the emulation's state for cuda (and meta, the cuda tensors' device)."""
        if self.target == "cpu":
            return _REAL_IS_ENABLED("cpu" if device_type == "meta" else device_type or "cuda")
        if device_type in (None, "cuda", "meta"):
            return bool(self.open)
        return _REAL_IS_ENABLED(device_type)

    def dtype(self, device_type):
        """``torch.get_autocast_dtype``: the innermost emulated region's dtype for cuda / meta."""
        if self.target == "cpu":
            return _REAL_GET_DTYPE("cpu" if device_type == "meta" else device_type)
        if device_type in ("cuda", "meta"):
            return self.open[-1] if self.open else torch.float16
        return _REAL_GET_DTYPE(device_type)

    def region(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        device_type = getattr(device_type, "type", device_type)
        if device_type not in ("cuda", "meta"):
            return _REAL_AUTOCAST(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
        if not enabled:  # a disabled region inside an emulated one is not modelled (autocast_emulation.py)
            return contextlib.nullcontext()
        dtype = dtype or torch.float16  # torch.get_autocast_dtype("cuda")'s default
        stats = self.stats.get(dtype)
        if stats is None:
            stats = self.stats[dtype] = AutocastStats(dtype, on_cache=self.on_cache)
        return _Region(lambda: autocast_region(stats, "meta", cache_enabled is not False), dtype, self.open)

    def cuda_amp(self, enabled=True, dtype=torch.float16, cache_enabled=True):
        return self.region("cuda", dtype, enabled, cache_enabled)

    def notes(self) -> list[str]:
        return [s.describe() for s in self.stats.values()]


class _Region(contextlib.ContextDecorator):
    """An emulated autocast region usable as ``with`` and as a decorator, like ``torch.autocast``."""

    def __init__(self, factory, dtype, dtypes: list):
        self.factory, self.dtype_, self.dtypes = factory, dtype, dtypes
        self.open: list = []

    def __enter__(self):
        ctx = self.factory()
        ctx.__enter__()
        self.open.append(ctx)
        self.dtypes.append(self.dtype_)
        return self

    def __exit__(self, *exc):
        self.dtypes.pop()
        return self.open.pop().__exit__(*exc)


@contextlib.contextmanager
def cuda_stand_in(gpu: GpuSpec, counters: DeviceCounters, autocasts: AutocastEmulations):
    """While open, ``torch.cuda`` answers for ``gpu``; see the module docstring."""
    cc = gpu.compute_capability
    props = types.SimpleNamespace(name=gpu.name, total_memory=gpu.capacity_bytes, major=cc[0], minor=cc[1],
                                  is_integrated=False, is_multi_gpu_board=False)

    cuda = torch.cuda
    patches = {
        (cuda, "is_available"): lambda: True, (cuda, "device_count"): lambda: 1,
        (cuda, "current_device"): lambda: 0, (cuda, "set_device"): lambda *_a: None,
        (cuda, "get_device_name"): lambda *_a: gpu.name, (cuda, "get_device_capability"): lambda *_a: cc,
        (cuda, "get_device_properties"): lambda *_a: props,
        (cuda, "is_bf16_supported"): lambda *_a, **_k: gpu.bf16_supported,
        (cuda, "synchronize"): lambda *_a: None, (cuda, "empty_cache"): lambda: None,
        # No CUDA graph is ever captured on meta. torch.optim.Optimizer.step asks this once torch.cuda.is_available()
        # answers True (_accelerator_graph_capture_health_check, torch 2.12/2.13 torch/optim/optimizer.py); a CPU
        # build answers False, a CUDA build on a machine without a GPU asks the driver and raises.
        (cuda, "is_current_stream_capturing"): lambda: False,
        (cuda, "Stream"): _Stream, (cuda, "Event"): _Event, (cuda, "stream"): lambda s=None: contextlib.nullcontext(s),
        (cuda, "current_stream"): lambda *_a: _Stream(), (cuda, "default_stream"): lambda *_a: _Stream(),
        (cuda, "memory_allocated"): counters.allocated, (cuda, "max_memory_allocated"): counters.max_allocated,
        (cuda, "memory_reserved"): counters.allocated, (cuda, "max_memory_reserved"): counters.max_allocated,
        (cuda, "reset_peak_memory_stats"): counters.reset_peak, (cuda, "reset_max_memory_allocated"): counters.reset_peak,
        (cuda, "memory_stats"): counters.stats,
        (cuda, "mem_get_info"): lambda *_a: (gpu.capacity_bytes - counters.allocated(), gpu.capacity_bytes),
        (torch, "autocast"): autocasts.region, (torch.amp, "autocast"): autocasts.region,
        (cuda.amp, "autocast"): autocasts.cuda_amp,
        # torch.utils.checkpoint re-enters the forward's autocast state for the recompute only where autocast is
        # available for the inputs' device type (torch 2.13 torch/utils/checkpoint.py): meta, the cuda tensors'
        (torch.amp, "is_autocast_available"): lambda device_type: device_type == "meta" or _REAL_AVAILABLE(device_type),
    }
    with contextlib.ExitStack() as stack:
        for (owner, name), value in patches.items():
            stack.enter_context(mock.patch.object(owner, name, value))
        stack.enter_context(autocast_queries(autocasts))
        yield


@contextlib.contextmanager
def autocast_queries(autocasts: AutocastEmulations):
    """``torch.is_autocast_enabled`` / ``get_autocast_dtype`` answer for meta tensors (both targets): TRL's fused LM
    head asks them for its input's device type, which the real functions refuse for meta."""
    with mock.patch.object(torch, "is_autocast_enabled", autocasts.is_enabled), \
            mock.patch.object(torch, "get_autocast_dtype", autocasts.dtype):
        yield


__all__ = ["AutocastEmulations", "DeviceCounters", "cuda_stand_in"]
