"""ZeRO optimizer offload to the CPU (``offload_optimizer: {device: cpu}``) on meta: host memory as meta stand-ins.

With the offload, DeepSpeed's ZeRO-1/2 optimizer (deepspeed 0.19.8 runtime/zero/stage_1_and_2.py,
``self.device = ... if not self.cpu_offload else 'cpu'``) keeps this rank's fp32 master partition, its gradient
partition (``single_partition_of_fp32_groups[i].grad``), the optimizer's state and a staging buffer of the
largest parameter (``temp_grad_buffer_for_cpu_offload``) in host memory, made with ``device='cpu'``, ``.to('cpu')``
and ``.cpu()``, pinned when ``pin_memory`` is set; the device keeps the 16-bit weights, the reduce buckets and
ZeRO-2's device gradients. On meta a copy of a meta tensor to the host has no data to copy, so
:class:`HostStandIns` (a dispatch mode above the recorder, open while DeepSpeed builds its engine, runs backward
and steps) makes every host tensor a meta tensor known to be on the host:

- ``device='cpu'`` in an op's arguments becomes ``'meta'`` (``pin_memory`` dropped), and the result is host memory;
- an op whose tensor arguments include host stand-ins and that returns a new tensor (``zeros_like`` of a master
  partition, the optimizer's arithmetic) makes host memory too; an in-place op writes where its destination is
  (``copy_`` of the updated master weights into the device's 16-bit partition stays a device op);
- ``.to(device)`` back to the accelerator (meta) is a device copy.

On the ``cuda`` target host memory is not device memory: host ops run without the recorder, their storages are
kept out of it (``Recorder.not_device``), and their bytes are tallied here (current and peak, a note). On the
``cpu`` target host and device are one allocator, as in the gloo ground truth: the stand-ins are recorded like any
tensor, and ``.to('cpu')`` of a tensor already there is that tensor (``Tensor.to`` returns ``self``,
aten/src/ATen/native/TensorConversions.cpp ``to_impl``), so it becomes an alias, not a copy.

Pinning: on a GPU DeepSpeed's CUDA accelerator ``pin_memory`` returns a page-locked copy of the host tensor
(deepspeed/accelerator/cuda_accelerator.py); the copy replaces the unpinned one, so the host figure is the pinned
buffers' bytes (the transient unpinned original is not counted). Pinned memory is host memory, not device memory.
"""

from __future__ import annotations

import weakref

import torch

from memgraph.private_api import TorchDispatchMode, deepspeed_offload_on_host, disable_current_modes, op_schema
from memgraph.units import human_bytes

_TO_COPY = torch.ops.aten._to_copy.default
_CAT_OUT = torch.ops.aten.cat.out
_HOST = torch.device("cpu")


def _is_host_device(value) -> bool:
    return value == "cpu" or isinstance(value, torch.device) and value.type == "cpu"


def offloads_optimizer(zero: dict) -> bool:
    """Whether a config's ``zero_optimization`` section offloads the optimizer to the CPU."""
    return str((zero.get("offload_optimizer") or {}).get("device", "none")).lower() == "cpu"


def offloads_param(zero: dict) -> bool:
    """Whether a config's ``zero_optimization`` section offloads ZeRO-3's parameter partitions to the CPU."""
    return str((zero.get("offload_param") or {}).get("device", "none")).lower() == "cpu"


class HostStandIns(TorchDispatchMode):
    """Host tensors of DeepSpeed's optimizer offload as meta tensors (module docstring), for ``target``."""

    def __init__(self, target: str, recorder=None):
        super().__init__()
        deepspeed_offload_on_host()
        self.target, self.recorder = target, recorder
        self._host: dict[int, int] = {}  # id(untyped storage) -> bytes, while alive
        self._views = weakref.WeakSet()  # cpu target: .to('cpu') of a device tensor, the tensor itself (an alias)
        self.host_bytes = self.peak_host_bytes = 0
        self._in_host_step = False
        self.params_offloaded = False  # set by DeepSpeedRun: the note names what is on the host
        self.optimizer_offloaded = True
        self.fetch_only = False  # while the model's forward runs (DeepSpeedRun.fetching)

    # -- what is host memory ------------------------------------------------------------------
    def is_host(self, t) -> bool:
        return isinstance(t, torch.Tensor) and t.is_meta and (id(t.untyped_storage()) in self._host or t in self._views)

    def _adopt(self, t: torch.Tensor) -> None:
        st = t.untyped_storage()
        key = id(st)
        if key in self._host:
            return
        nbytes = st.nbytes()
        self._host[key] = nbytes
        self.host_bytes += nbytes
        self.peak_host_bytes = max(self.peak_host_bytes, self.host_bytes)
        if self.target == "cuda" and self.recorder is not None:
            self.recorder.not_device.add(key)
        weakref.finalize(st, self._release, key)

    def _release(self, key: int) -> None:
        self.host_bytes -= self._host.pop(key, 0)
        if self.recorder is not None:
            self.recorder.not_device.discard(key)

    def host_step(self, optimizer) -> None:
        """The offloaded optimizer steps on the host: what its ``step`` makes from nothing (AdamW's ``step`` counters,
        ``torch.zeros((), device=p.device)`` of a host parameter) is host memory too."""
        step = optimizer.step

        def host_step(*args, **kwargs):
            self._in_host_step = True
            try:
                return step(*args, **kwargs)
            finally:
                self._in_host_step = False

        optimizer.step = host_step

    # -- dispatch -----------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.fetch_only:  # the model's forward: only ZeRO-3's fetches of host partitions are DeepSpeed's
            leaves = torch.utils._pytree.tree_leaves((args, kwargs))
            if (func.namespace == "c10d" or func is _CAT_OUT) and any(self.is_host(a) for a in leaves):
                return self._fetch(func, args, dict(kwargs or {}))
            return func(*args, **(kwargs or {}))
        kwargs = dict(kwargs or {})
        to_host = _is_host_device(kwargs.get("device"))
        if to_host:
            kwargs["device"] = torch.device("meta")
            kwargs.pop("pin_memory", None)
        tensors = [a for a in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(a, torch.Tensor)]
        if self._in_host_step and not tensors and kwargs.get("device") is not None:  # a factory on the host
            to_host = True
            kwargs.pop("pin_memory", None)
        from_host = any(self.is_host(t) for t in tensors)
        if not (to_host or from_host):
            return func(*args, **kwargs)
        if from_host and (func.namespace == "c10d" or self.params_offloaded and func is _CAT_OUT):
            return self._fetch(func, args, kwargs)  # ZeRO-3 gathering host partitions: see _fetch
        if func is _TO_COPY and not to_host:  # back to the device: a device copy
            return func(*args, **kwargs)
        if func is _TO_COPY and self.target == "cpu" and args[0].is_meta and kwargs.get("dtype") in (
                None, args[0].dtype) and set(kwargs) <= {"device", "dtype", "non_blocking", "layout"}:
            alias = torch.ops.aten.alias.default(args[0])  # .to('cpu') of a tensor already there: itself
            self._views.add(alias)
            return alias
        if op_schema(func).is_mutable and not self.is_host(args[0]):  # written into a device tensor
            return func(*args, **kwargs)
        if self.target == "cuda":  # host memory: not recorded
            with disable_current_modes():
                out = func(*args, **kwargs)
        else:
            out = func(*args, **kwargs)
        for t in torch.utils._pytree.tree_leaves(out):
            if isinstance(t, torch.Tensor) and t.is_meta:
                self._adopt(t)
        return out

    def _fetch(self, func, args, kwargs):
        """A collective, or ``torch.cat(..., out=device buffer)``, whose inputs include host stand-ins: ZeRO-3 gathering
        parameter partitions offloaded to the host (deepspeed 0.19.8 runtime/zero/partition_parameters.py
        ``_all_gather_sequential``: ``param_ds_tensor.to(get_accelerator().current_device_name())`` into
        ``all_gather_into_tensor``; ``_all_gather_dtype``: ``torch.cat([p.ds_tensor.to(device) ...], out=...)``). On a
        GPU each ``.to`` is a host-to-device copy (NCCL reads device memory), on meta a no-op (the stand-in is already
        on meta): the cuda target makes the copies here, alive while the op runs; on the CPU ``.to('cpu')`` returns
        the tensor itself, so the cpu target reads it as it is. What the op writes is device memory."""
        if self.target == "cuda":
            meta = torch.device("meta")
            args, kwargs = torch.utils._pytree.tree_map(
                lambda a: _TO_COPY(a, device=meta) if self.is_host(a) else a, (args, kwargs))
        return func(*args, **kwargs)

    # -- report -------------------------------------------------------------------------------
    def notes(self) -> list[str]:
        where = ("not in the device figures" if self.target == "cuda" else
                 "counted in the figures: on the cpu target host and device are one allocator")
        what = ", ".join(
            (["ZeRO-3's 16-bit parameter partitions (offload_param)"] if self.params_offloaded else [])
            + (["the fp32 master partition, its gradients, the optimizer's state and DeepSpeed's host staging "
                "buffers (offload_optimizer)"] if self.optimizer_offloaded else []))
        return [f"DeepSpeed offload to the CPU: host memory of this rank peak "
                f"{human_bytes(self.peak_host_bytes)} ({self.peak_host_bytes:,} B), {human_bytes(self.host_bytes)} "
                f"({self.host_bytes:,} B) at the end ({what}), {where} (memgraph/ds_engine/offload.py)"]


__all__ = ["HostStandIns", "offloads_optimizer", "offloads_param"]
