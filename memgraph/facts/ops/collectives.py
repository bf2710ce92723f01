"""Registry entries of torch.distributed's collectives and FSDP2's copy ops (--strategy ddp|fsdp).

Reviewed against torch 2.13.0: the ``c10d`` ops are the dispatcher ops of ``torch.distributed``'s
collectives (torch/csrc/distributed/c10d/Ops.cpp); they write into tensors their caller allocated
(in-place all-reduce, ``_allgather_base_`` into the all-gather output, ``_reduce_scatter_base_`` into
the shard-sized output), so they allocate nothing through the caching allocator; NCCL's own buffers
are outside it (memgraph/facts/nccl.py). The ``fsdp`` ops are FSDP2's custom ops in
torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py: ``all_gather_copy_in`` allocates the flat
all-gather output (seen by the recorder as the ``aten.empty`` it calls) and copies the shards into it;
``split_with_sizes_copy`` and ``chunk_cat`` write into ``out=`` tensors allocated before them.

The ``_c10d_functional`` ops are the functional collectives DTensor redistributes with (--strategy tp;
torch/csrc/distributed/c10d/Functional.cpp): ``all_reduce`` clones its input and all-reduces the clone in
place, ``all_gather_into_tensor`` and ``reduce_scatter_tensor`` allocate their output (world size x the input,
or 1/world size of it); ``wait_tensor`` returns its input. ``_wrap_tensor_autograd``
(torch/distributed/_functional_collectives.py) wraps its input's storage in an AsyncCollectiveTensor: the
distributed recorder traces it as an alias (trace/parallel/distributed.py), not as its fake kernel's empty_like.
"""

from __future__ import annotations

from memgraph.facts.ops.table import register

register(
    "collective", "c10d.allreduce_", "c10d._allgather_base_", "c10d._reduce_scatter_base_", "c10d.broadcast_",
    "c10d.allgather_", "c10d.reduce_scatter_",
    note="writes into tensors its caller allocated; NCCL's buffers are outside the caching allocator",
)
register(
    "fsdp copy", "fsdp.all_gather_copy_in", "fsdp.split_with_sizes_copy", "fsdp.chunk_cat",
    note="FSDP2 copy-in/copy-out: outputs allocated by aten.empty (seen) or given as out=; no scratch",
)
register(
    "functional collective", "_c10d_functional.all_reduce", "_c10d_functional.all_gather_into_tensor",
    "_c10d_functional.reduce_scatter_tensor", "_c10d_functional.wait_tensor",
    "_c10d_functional._wrap_tensor_autograd",
    note="allocates its output (all_reduce: a clone of the input), or aliases the input (wait_tensor, "
         "_wrap_tensor_autograd); no scratch; NCCL's buffers are outside the caching allocator",
)
