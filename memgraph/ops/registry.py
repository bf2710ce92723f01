"""Per-op memory facts, keyed by ATen op name (placeholder; filled below)."""

from __future__ import annotations

from collections import Counter
from typing import Iterable

KNOWN: dict[str, str] = {}


def packet(op: str) -> str:
    """'aten.mm.default' -> 'aten.mm'."""
    parts = op.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else op


def unknown_ops(ops: Iterable[str]) -> Counter:
    return Counter(p for p in map(packet, ops) if p not in KNOWN)
