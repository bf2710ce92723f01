"""NCCL's own device buffers: outside PyTorch's caching allocator, inside each rank's nvidia-smi total.

NCCL allocates its communication buffers with cudaMalloc (or cuMem) when a communicator connects its
peers, not through ``torch.cuda``'s caching allocator: they never show in ``max_memory_allocated`` or
``max_memory_reserved``, but they count against the GPU's memory. How much depends on the channels and
peers NCCL picks at run time from the topology (NVLink, PCIe, network), which a CPU cannot see: a
:class:`~memgraph.facts.unknowns.BoundedUnknown` on the ``total`` counter, with 0 expected and this
module's upper bound.

Source: NCCL 2.30.7 (github.com/NVIDIA/nccl), src/init.cc ``computeBuffSizes`` and the
``DEFAULT_*BUFFSIZE`` macros, src/include/device.h for the constants. Each connection to a peer has
one buffer per protocol (LL, LL128, Simple), per channel; the environment variables ``NCCL_LL_BUFFSIZE``,
``NCCL_LL128_BUFFSIZE``, ``NCCL_BUFFSIZE`` override them.
"""

from __future__ import annotations

from memgraph.facts.unknowns import BoundedUnknown

# src/include/device.h
NCCL_STEPS = 8
NCCL_LL_LINES_PER_THREAD = 8
NCCL_LL_MAX_NTHREADS = 512
LL_FIFO_LINE_BYTES = 16  # sizeof(union ncclLLFifoLine): data1, flag1, data2, flag2 (uint32 each)
NCCL_LL128_ELEMS_PER_THREAD = 120
NCCL_LL128_MAX_NTHREADS = 640
MAXCHANNELS = 64
# src/init.cc: DEFAULT_LL_BUFFSIZE, DEFAULT_LL128_BUFFSIZE, DEFAULT_BUFFSIZE
LL_BUFFSIZE = NCCL_LL_LINES_PER_THREAD * NCCL_LL_MAX_NTHREADS * NCCL_STEPS * LL_FIFO_LINE_BYTES  # 512 KiB
LL128_BUFFSIZE = NCCL_LL128_ELEMS_PER_THREAD * NCCL_LL128_MAX_NTHREADS * NCCL_STEPS * 8  # sizeof(uint64_t)
SIMPLE_BUFFSIZE = 1 << 22  # 4 MiB, NCCL_BUFFSIZE
CONNECTION_BYTES = LL_BUFFSIZE + LL128_BUFFSIZE + SIMPLE_BUFFSIZE  # one peer connection, one channel
# Receiving connections per channel that the bound allows: the ring's previous rank (1) and the tree's
# parent and up to two children (3), NCCL's two algorithms for all-reduce, all-gather and reduce-scatter.
CONNECTIONS_PER_CHANNEL = 4

SOURCE = ("NCCL 2.30.7 src/init.cc computeBuffSizes (DEFAULT_LL_BUFFSIZE 512 KiB, DEFAULT_LL128_BUFFSIZE "
          "4.69 MiB, DEFAULT_BUFFSIZE 4 MiB per connection per channel) and src/include/device.h "
          f"(MAXCHANNELS {MAXCHANNELS}); bound: {MAXCHANNELS} channels x {CONNECTIONS_PER_CHANNEL} receiving "
          "connections (ring + tree); NVLS/CollNet buffers not covered")


def nccl_buffers(world_size: int) -> list[BoundedUnknown]:
    """The bounded unknown of one rank's NCCL buffers in a world of ``world_size`` ranks (none alone)."""
    if world_size <= 1:
        return []
    upper = MAXCHANNELS * CONNECTIONS_PER_CHANNEL * CONNECTION_BYTES
    return [BoundedUnknown("NCCL communication buffers (outside the caching allocator)", 0, upper, SOURCE,
                           counter="total")]


__all__ = ["CONNECTION_BYTES", "nccl_buffers"]
