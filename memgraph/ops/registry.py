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
from dataclasses import dataclass, field
from typing import Callable, Iterable

# (args, kwargs, out) -> bytes of each transient buffer the kernel allocates
WorkspaceFn = Callable[[tuple, dict, object], list[int]]


@dataclass(frozen=True)
class OpFacts:
    family: str
    note: str = ""
    workspace: dict[str, WorkspaceFn] = field(default_factory=dict)  # target -> handler


REGISTRY: dict[str, OpFacts] = {}


def register(family: str, *names: str, note: str = "", workspace: dict[str, WorkspaceFn] | None = None) -> None:
    """Add ops to the registry; an op registered twice is a bug, so it raises."""
    for name in names:
        if name in REGISTRY:
            raise ValueError(f"op {name!r} is already registered (family {REGISTRY[name].family!r})")
        REGISTRY[name] = OpFacts(family, note, dict(workspace or {}))


def packet(op: str) -> str:
    """'aten.mm.default' -> 'aten.mm'."""
    parts = op.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else op


def workspace_bytes(op: str, target: str, args: tuple, kwargs: dict, out) -> list[int]:
    """Transient buffers ``op``'s kernel allocates on ``target`` (empty when none are known)."""
    entry = facts(op)
    fn = entry.workspace.get(target) if entry else None
    return fn(args, kwargs, out) if fn else []


def unknown_ops(ops: Iterable[str]) -> Counter:
    """Op packets seen in a trace that have no registry entry, with their counts."""
    _load_defaults()
    return Counter(p for p in map(packet, ops) if p not in REGISTRY)


_loaded = False


def _load_defaults() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from . import defaults  # noqa: F401  (fills REGISTRY)


def facts(op: str) -> OpFacts | None:
    _load_defaults()
    return REGISTRY.get(packet(op))
