"""Byte units and their formatting, defined once for the whole package."""

from __future__ import annotations

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30

UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def human_bytes(n: int | float) -> str:
    """1536 -> '1.50 KiB' (binary units, as nvidia-smi and PyTorch's memory_summary use)."""
    value, unit = float(n), 0
    while abs(value) >= 1024 and unit < len(UNITS) - 1:
        value /= 1024
        unit += 1
    return f"{int(value)} B" if unit == 0 else f"{value:.2f} {UNITS[unit]}"


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"
