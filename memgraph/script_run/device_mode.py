"""The run's device is ``meta``: a ``TorchFunctionMode`` that rewrites device arguments and answers value reads.

On the cuda target the script's ``cuda`` device (``"cuda"``, ``"cuda:0"``, ``torch.device("cuda", 0)``, a bare
index) becomes ``meta`` wherever a device is named: ``.cuda()``, ``.to(device)``, ``nn.Module.to/cuda`` (which call
those per tensor), and every factory or method with a ``device=`` argument. A host tensor moved to the device is
copied to meta (``aten._to_copy``), which the recorder sees as the device allocation it is on a GPU; the host
tensor itself is not device memory and is not recorded. On the cpu target the script sees no CUDA and takes its
CPU path; its explicit moves to ``"cpu"`` become meta the same way, and the recorder (``host_type="cpu"``) counts
host tensors as device memory and a host->meta move as the same storage (Recorder._alias), as on a real CPU where
``.to("cpu")`` returns the tensor itself.

Also here, because they are ``Tensor`` methods: value reads of meta tensors (placeholders, counted by
:class:`~memgraph.script_run.value_reads.ValueReads`; a tensor copied from host data, and the integer tensors
computed from it, keep their real values in :class:`memgraph.trace.shadow_values.ShadowValues` and are read
for real), ``pin_memory()`` / ``record_stream()`` (no device memory;
returned as is), and ``Tensor.backward`` / ``torch.autograd.backward`` (the backward phase begins).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch.overrides import TorchFunctionMode

from memgraph.script_run.value_reads import ValueReads, placeholder

_T = torch.Tensor
_META = torch.device("meta")
# Value reads: each answered with a placeholder for a meta tensor (see value_reads.PLACEHOLDER)
_SCALAR_READS = {_T.item: "Tensor.item()", _T.__bool__: "bool(tensor)", _T.__float__: "float(tensor)",
                 _T.__int__: "int(tensor)", _T.__index__: "tensor as an index"}
_BACKWARD = {_T.backward, torch.autograd.backward}
_AS_IS = {_T.pin_memory, _T.record_stream}  # host pinning and stream bookkeeping: no device memory


class ScriptDeviceMode(TorchFunctionMode):
    """Maps the run's device (``device``: "cuda" or "cpu") to meta; answers value reads of meta tensors."""

    def __init__(self, device: str, reads: ValueReads, on_backward: Callable[[], None], has_value=lambda t: False):
        super().__init__()
        self.device = device
        self.reads = reads
        self.on_backward = on_backward
        self.has_value = has_value  # a meta tensor with known values (trace/shadow_values.py): read for real

    def maps(self, d) -> bool:
        """Whether ``d`` names the run's device."""
        if isinstance(d, str):
            return d == self.device or d.startswith(self.device + ":")
        if isinstance(d, torch.device):
            return d.type == self.device
        return isinstance(d, int) and not isinstance(d, bool) and self.device == "cuda"

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if kwargs and "device" in kwargs and self.maps(kwargs["device"]):
            kwargs = {**kwargs, "device": _META}
        if func is _T.to:
            return self._to(args, kwargs)
        if func is _T.cuda:
            return self._cuda(args, kwargs)
        if func in _SCALAR_READS or func in _BACKWARD or func in _AS_IS:
            return self._special(func, args, kwargs)
        if (func in (_T.copy_, _T.module_load) and len(args) > 1 and isinstance(args[1], _T) and args[1].is_meta
                and not args[0].is_meta and not self.has_value(args[1])):
            # a host tensor filled from a meta one (load_state_dict of a checkpoint loaded on meta): it keeps
            # its own values; counted
            return self._read(args[1], "copy into a host tensor (values not loaded)",
                              lambda: args[0] if func is _T.copy_ else args[0].detach())
        if args and isinstance(args[0], _T) and args[0].is_meta and not self.has_value(args[0]):
            if func is _T.tolist:
                return self._read(args[0], "Tensor.tolist()", lambda: np.full(args[0].shape, placeholder(
                    args[0].dtype)).tolist())
            if func is _T.numpy:
                return self._read(args[0], "Tensor.numpy()", lambda: np.full(args[0].shape, placeholder(
                    args[0].dtype)))
            if func is _T.cpu:
                return args[0] if self.device == "cpu" else self._read(args[0], "Tensor.cpu()", lambda: self._host(
                    args[0]))
            if func is _T.__format__:
                return self._read(args[0], "format(tensor)", lambda: format(
                    placeholder(args[0].dtype) if args[0].dim() == 0 else args[0], *args[1:]))
        return func(*args, **kwargs)

    # -- devices ----------------------------------------------------------------------------
    def _to(self, args, kwargs):
        t, rest = args[0], list(args[1:])
        if rest and self.maps(rest[0]):
            rest[0] = _META
        elif t.is_meta and self.device == "cuda" and not self.has_value(t) and (
                (rest and _names_cpu(rest[0])) or _names_cpu(kwargs.get("device"))):
            return self._read(t, "Tensor.to('cpu')", lambda: self._host(t))
        return _T.to(t, *rest, **kwargs)

    def _cuda(self, args, kwargs):
        t = args[0]
        kwargs = {k: v for k, v in kwargs.items() if k in ("non_blocking", "memory_format")}
        return t.to(_META, **kwargs)

    def _special(self, func, args, kwargs):
        if func in _BACKWARD:
            self.on_backward()
            return func(*args, **kwargs)
        t = args[0] if args else None
        if func in _AS_IS:  # pinned host memory is host memory (and a CPU-only build cannot pin)
            return t if func is _T.pin_memory else None
        if not (isinstance(t, _T) and t.is_meta) or self.has_value(t):
            return func(*args, **kwargs)
        value = placeholder(t.dtype)
        return self._read(t, f"{_SCALAR_READS[func]} -> {value!r}", lambda: value if func is not _T.__index__ else 1)

    # -- values -----------------------------------------------------------------------------
    def _read(self, t: _T, what: str, answer: Callable[[], object]):
        self.reads.read(what if "->" in what else f"{what} of a {str(t.dtype).removeprefix('torch.')}"
                        f"{list(t.shape)} tensor")
        return answer()  # inside this handler the mode is off: the answer's own torch calls are not seen here

    @staticmethod
    def _host(t: _T) -> _T:
        """A host tensor of placeholders standing for a meta tensor copied to the host (not device memory)."""
        return torch.full(t.shape, placeholder(t.dtype), dtype=t.dtype, device="cpu")


def _names_cpu(d) -> bool:
    return (isinstance(d, str) and d.split(":")[0] == "cpu") or (isinstance(d, torch.device) and d.type == "cpu")


__all__ = ["ScriptDeviceMode"]
