"""Per-op memory facts, in one registry keyed by ATen op name ("aten.mm").

The tracer already knows every op's outputs (they are real meta tensors) and which outputs
alias an input (their storage is already known), so most ops need no entry to be counted
right. An entry records that an op was reviewed, its family, and, per target, the scratch
buffers its kernel allocates for itself and frees before returning (a *workspace*: e.g.
CPU convolution's im2col columns). Ops without an entry are counted and reported as
unknown: their outputs are counted, no workspace is assumed.

Users extend the registry with :func:`register` (duplicates are rejected).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable

from memgraph.facts.ops import defaults  # noqa: F401  (fills REGISTRY with the reviewed ops)
from memgraph.facts.ops.table import (
    REGISTRY,
    CudaContext,
    CudaFn,
    KernelBuffers,
    OpFacts,
    WorkspaceFn,
    packet,
    register,
)

__all__ = ["REGISTRY", "CudaContext", "CudaFn", "KernelBuffers", "OpFacts", "WorkspaceFn", "cuda_kernel_buffers",
           "facts", "packet", "register", "unknown_ops", "workspace_bytes"]

def workspace_bytes(op: str, target: str, args: tuple, kwargs: dict, out) -> list[int]:
    """Transient buffers ``op``'s kernel allocates on ``target`` (empty when none are known)."""
    entry = facts(op)
    fn = entry.workspace.get(target) if entry else None
    return fn(args, kwargs, out) if fn else []


def cuda_kernel_buffers(op: str, ctx: CudaContext, args: tuple, kwargs: dict, out) -> KernelBuffers:
    """Buffers ``op``'s CUDA kernel allocates and frees inside the op (none when none are known)."""
    entry = facts(op)
    return entry.cuda(ctx, args, kwargs, out) if entry and entry.cuda else KernelBuffers()


def unknown_ops(ops: Iterable[str]) -> Counter:
    """Op packets seen in a trace that have no registry entry, with their counts."""
    return Counter(p for p in map(packet, ops) if p not in REGISTRY)


def facts(op: str) -> OpFacts | None:
    return REGISTRY.get(packet(op))
