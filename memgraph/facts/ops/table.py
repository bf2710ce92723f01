"""The op table: per-op entries keyed by ATen op packet ("aten.mm"); duplicates are rejected.

:mod:`memgraph.facts.ops.defaults` fills it with the reviewed ops; :mod:`memgraph.facts.ops.registry`
answers questions about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

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
