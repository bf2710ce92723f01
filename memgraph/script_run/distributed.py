"""``torch.distributed`` as a script launched by ``torchrun --nproc-per-node N`` sees it, on PyTorch's fake process
group: the script runs as rank 0 of ``--nproc`` ranks.

The launcher's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``,
``MASTER_PORT``; and ``PYTORCH_DDP_USE_SIDE_STREAM=0``, see below) is set while the script runs, and ``torch.distributed.init_process_group`` (whatever backend the
script asks for: ``nccl`` on a GPU) makes the fake process group (``dist.init_process_group("fake")``, collectives
that return at once) of that world, with DDP (given analyze's all-reduce comm hook) and FSDP2 admitted on meta (memgraph/private_api.py
``distributed_on_meta``, as ``analyze --strategy`` uses it). Everything is undone and the group destroyed on exit.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from unittest import mock

import types

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from memgraph.private_api import distributed_on_meta, fake_store
from memgraph.trace.parallel.distributed import fake_group_allreduce_hook  # analyze's DDP bucket all-reduce on the fake group

_REAL_INIT = dist.init_process_group


@contextlib.contextmanager
def fake_world(nproc: int, asked: Counter):
    """While open, the script is rank 0 of ``nproc``; ``asked`` counts the backends it asked for."""
    env = {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": str(nproc), "LOCAL_WORLD_SIZE": str(nproc),
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500",
           # DDP(device_ids=[i]) copies its inputs to cuda:i on a side stream (torch 2.13
           # torch/nn/parallel/distributed.py reads this variable, default "1"); on meta there is no stream to
           # copy on, and a plain .to() of a meta input to the (meta) device returns the input itself
           "PYTORCH_DDP_USE_SIDE_STREAM": "0"}

    def init_process_group(backend=None, *_args, **_kwargs):
        asked[str(backend or "default")] += 1
        _REAL_INIT("fake", store=fake_store(), rank=0, world_size=nproc)

    ddp_init = DDP.__init__

    def init_ddp(self, *args, **kwargs):  # the fake group's futures carry no value: analyze's hook completes them
        ddp_init(self, *args, **kwargs)
        self.register_comm_hook(types.SimpleNamespace(recorder=None), fake_group_allreduce_hook)

    with mock.patch.dict(os.environ, env), mock.patch.object(dist, "init_process_group", init_process_group), \
            mock.patch.object(DDP, "__init__", init_ddp), distributed_on_meta(lambda t: None, lambda t: None):
        try:
            yield
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()


def world_notes(nproc: int, asked: Counter) -> list[str]:
    if not asked:
        return []
    backends = ", ".join(f"{b} x{n}" for b, n in asked.items())
    return [f"torch.distributed: the script asked for init_process_group ({backends}); it ran as rank 0 of {nproc} "
            "(--nproc) on PyTorch's fake process group: collectives allocate what they allocate on rank 0, and take "
            "no time; NCCL's own buffers outside the caching allocator are not counted"]


__all__ = ["fake_world", "world_notes"]
