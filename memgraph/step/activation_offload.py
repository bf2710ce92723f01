"""``--activation-offload``: forward and loss under ``torch.autograd.graph.save_on_cpu(pin_memory=True)``.

PyTorch's hooks (torch 2.13, torch/autograd/graph.py ``save_on_cpu``)::

    def pack_to_cpu(tensor):                       # called for every tensor autograd saves
        packed = torch.empty(tensor.size(), dtype=tensor.dtype, layout=tensor.layout,
                             pin_memory=torch.cuda.is_available() and not tensor.is_sparse)
        packed.copy_(tensor, non_blocking=...)
        return (tensor.device, packed)
    def unpack_from_cpu(packed):                   # called when a backward node reads it
        device, tensor = packed
        return tensor.to(device, non_blocking=pin_memory)

So autograd holds a host copy instead of the device tensor (the device tensor is freed once forward drops it;
parameters and inputs, which stay referenced, are copied too), and backward makes a new contiguous device copy
at each unpack, which the node holds until it has run.

On meta, :class:`OffloadEmulation` runs these hooks with the target's memory:

- ``cuda`` target: the host copy is not device memory: pack keeps only the shape and dtype, and counts its
  bytes as pinned host memory (live from pack until autograd releases the saved variable); unpack allocates the
  device copy, ``torch.empty(size, dtype)`` on meta, which the recorder sees in backward.
- ``cpu`` target: host and device are one allocator. The host copy is a new tensor in it (``torch.empty`` +
  ``copy_``: it counts, as in the real CPU run), and unpack's ``tensor.to(device)`` to the device it is already
  on returns the same tensor: no second copy. The prediction there is the CPU allocator's peak with the copies:
  offload moves nothing off the CPU, it duplicates what autograd saves that is still referenced elsewhere.

The real run (``memgraph measure``) uses PyTorch's own ``save_on_cpu(pin_memory=True)``.
"""

from __future__ import annotations

import weakref
from typing import Callable

import torch

from memgraph.notes import Note



def real_offload_context():
    """The context of a real run: PyTorch's own hooks."""
    return torch.autograd.graph.save_on_cpu(pin_memory=True)


class _HostCopy:
    """The pinned host tensor of a cuda-target pack: its size only (it holds no device memory)."""

    __slots__ = ("device", "shape", "dtype", "__weakref__")

    def __init__(self, t: torch.Tensor):
        self.device, self.shape, self.dtype = t.device, t.shape, t.dtype


class OffloadEmulation:
    """``save_on_cpu(pin_memory=True)`` on meta for ``target`` (module docstring); tallies the host bytes."""

    def __init__(self, target: str, mark_saved: Callable[[torch.Tensor], None] = lambda t: None):
        self.target, self.mark_saved = target, mark_saved
        self.host_bytes = self.peak_host_bytes = 0
        self.packed = 0

    def context(self):
        """A fresh hooks context for one forward (``train_iteration``'s ``saved_tensors``)."""
        if self.target == "cpu":
            return torch.autograd.graph.saved_tensors_hooks(self._pack_same_memory, _same_device)
        return torch.autograd.graph.saved_tensors_hooks(self._pack_to_host, _copy_to_device)

    def _pack_same_memory(self, t: torch.Tensor):
        packed = torch.empty(t.size(), dtype=t.dtype, layout=t.layout, device=t.device)
        packed.copy_(t)
        self.mark_saved(packed)
        self.packed += 1
        return t.device, packed

    def _pack_to_host(self, t: torch.Tensor):
        nbytes = t.numel() * t.element_size()
        copy = _HostCopy(t)
        self.packed += 1
        self.host_bytes += nbytes
        self.peak_host_bytes = max(self.peak_host_bytes, self.host_bytes)
        weakref.finalize(copy, self._release, nbytes)
        return copy

    def _release(self, nbytes: int) -> None:
        self.host_bytes -= nbytes

    def notes(self, iterations: int) -> list[str]:
        if self.target == "cpu":
            return [f"--activation-offload: {self.packed // iterations} saved tensors per iteration copied by "
                    "save_on_cpu's pack; on the cpu target host and device are one allocator, so the copies count "
                    "and unpack returns them as they are (step/activation_offload.py)"]
        # a typed note: both numbers follow the depth (each layer saves the same tensors, all held at the end of
        # forward), so depth synthesis moves them without a third, notes-only trace
        return [Note("--activation-offload: {count} saved tensors per iteration held in pinned host memory by "
                     "save_on_cpu (peak {peak:,} B of host RAM, not in the device figures); each is copied back to the "
                     "device when backward reads it (step/activation_offload.py)", per_layer=("count", "peak"),
                     count=self.packed // iterations, peak=self.peak_host_bytes)]


def _same_device(packed):
    device, tensor = packed
    return tensor.to(device)  # already there: the same tensor


def _copy_to_device(copy: _HostCopy) -> torch.Tensor:
    return torch.empty(copy.shape, dtype=copy.dtype, device=copy.device)  # tensor.to(device): a contiguous copy
