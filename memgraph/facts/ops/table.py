"""The op table: per-op entries keyed by ATen op packet ("aten.mm"); duplicates are rejected.

:mod:`memgraph.facts.ops.defaults` fills it with the reviewed ops; :mod:`memgraph.facts.ops.registry`
answers questions about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable

from memgraph.facts.unknowns import BoundedUnknown

# (args, kwargs, out) -> bytes of each transient buffer the kernel allocates
WorkspaceFn = Callable[[tuple, dict, object], list[int]]


@dataclass(frozen=True)
class CudaContext:
    """What a CUDA kernel's buffers depend on beyond its arguments (the target GPU, global toggles)."""

    compute_capability: tuple[int, int]
    cudnn_allow_tf32: bool = True  # torch.backends.cudnn.allow_tf32 (default True)


@dataclass(frozen=True)
class KernelBuffers:
    """Buffers a CUDA kernel allocates through the caching allocator and frees before it returns.

    ``phases``: the kernel's phases in order; each maps a buffer's name to its bytes, the blocks alive
    together in that phase, allocated after the op's outputs and freed before the next phase starts
    (e.g. a convolution's backward-data, then backward-filter workspace). Zero-byte buffers are left out.
    ``unknowns``: the mechanisms whose bytes are estimates, each with its bound.
    """

    phases: list[dict[str, int]] = field(default_factory=list)
    unknowns: list[BoundedUnknown] = field(default_factory=list)

    @property
    def transients(self) -> list[int]:
        """Bytes alive together in each phase."""
        return [sum(phase.values()) for phase in self.phases]


# (context, args, kwargs, out) -> the kernel's buffers on the cuda target
CudaFn = Callable[[CudaContext, tuple, dict, object], KernelBuffers]


@dataclass(frozen=True)
class OpFacts:
    family: str
    note: str = ""
    workspace: dict[str, WorkspaceFn] = field(default_factory=dict)  # target -> handler
    cuda: CudaFn | None = None  # the cuda target's kernel buffers (memgraph/facts/ops/cuda_workspace.py)


REGISTRY: dict[str, OpFacts] = {}


def register(family: str, *names: str, note: str = "", workspace: dict[str, WorkspaceFn] | None = None,
             cuda: CudaFn | None = None) -> None:
    """Add ops to the registry; an op registered twice is a bug, so it raises."""
    for name in names:
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is already registered (family {REGISTRY[name].family!r})")
        REGISTRY[name] = OpFacts(family, note, dict(workspace or {}), cuda)


@lru_cache(maxsize=None)  # a pure function of the few hundred op names a trace runs, called once per op
def packet(op: str) -> str:
    """'aten.mm.default' -> 'aten.mm'."""
    parts = op.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else op
