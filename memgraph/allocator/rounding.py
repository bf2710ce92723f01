"""Request rounding: the bytes an allocator counts as allocated for a tensor storage."""

from __future__ import annotations

# c10/cuda/CUDACachingAllocator.cpp, kMinBlockSize: "all sizes are rounded to at least 512
# bytes"; round_size() rounds every request up to a multiple of it, and allocated_bytes
# (max_memory_allocated) counts the rounded block size.
CUDA_MIN_BLOCK_SIZE = 512


def cuda_allocated_size(nbytes: int) -> int:
    """Bytes ``max_memory_allocated`` counts for an ``nbytes`` request (0 stays 0: no block)."""
    if nbytes == 0:
        return 0
    return -(-nbytes // CUDA_MIN_BLOCK_SIZE) * CUDA_MIN_BLOCK_SIZE


def cpu_allocated_size(nbytes: int) -> int:
    """c10's CPU allocator reports the requested size to the profiler (c10/core/CPUAllocator.cpp)."""
    return nbytes


ALLOCATED_SIZE = {"cuda": cuda_allocated_size, "cpu": cpu_allocated_size}
