"""Ground truth for ``--nproc N --strategy ...``: the distributed step run for real, N processes on the CPU.

``memgraph measure MODEL --device cpu --nproc 2 --strategy ddp`` starts N processes (``torch.multiprocessing``
with the ``spawn`` start method), each a rank of a real ``gloo`` process group on 127.0.0.1 and a free TCP
port. Every rank builds the same model, batch and optimizer as single-process ``measure --device cpu``
(memgraph/measure/real_step.py), wraps them with the same :class:`~memgraph.trace.distributed.DistributedRun`
code the trace uses (DDP, FSDP2 ``fully_shard``, ``ZeroRedundancyOptimizer``), and measures its own CPU
allocator under ``torch.profiler`` exactly as memgraph/measure/cpu.py does. Unlike the fake process group
of the trace, gloo moves the data: whatever the collectives allocate on a rank is in its figures.

The one difference from the trace's wrapper: DDP runs its C++ default all-reduce (``_AllReduceBySumCommHook``
on gloo) rather than the Python hook the fake process group needs (trace/distributed.py ``_allreduce_hook``).

The record's ``iterations`` are rank 0's (what ``memgraph analyze`` predicts); ``ranks`` holds every rank's.

gloo is not NCCL: its collectives run on worker threads and hold buffers of their own (torch 2.13
torch/csrc/distributed/c10d/ProcessGroupGloo.cpp: ``reduce_scatter_tensor_coalesced`` clones the whole input
and all-reduces the clone; ``AsyncAllgatherWork::allgather`` gathers into a flat tensor of the whole output,
``newLikeFlat``, and copies it out). When such a buffer is freed depends on when a worker thread drops its
last reference, which on a loaded machine varies from run to run. Observed (tiny-gpt2, FSDP2, 2 ranks, 2
cores shared with other jobs): in 2 of 6 runs one rank, never both, peaked 199,936 or 521,984 bytes higher
in the steady iteration (one GPT-2 block's gathered size; that plus the root unit's), while the other rank
matched the prediction to a few bytes. The record keeps every rank's figures as measured.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import tempfile
from pathlib import Path

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec

MASTER_ADDR = "127.0.0.1"
# gloo finds its network device from the hostname unless told: the loopback device serves 127.0.0.1
# (torch 2.13 torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, GLOO_SOCKET_IFNAME)
GLOO_SOCKET_IFNAME = "lo"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((MASTER_ADDR, 0))
        return s.getsockname()[1]


def measure_cpu_distributed(spec: ModelSpec, opts: TrainingOptions) -> dict:
    """Run ``opts.iterations`` iterations on ``opts.nproc`` gloo ranks; per rank, the CPU allocator's peaks."""
    import pickle

    import torch.multiprocessing as mp

    try:
        pickle.dumps(spec)
    except Exception as e:  # noqa: BLE001 - anything pickle refuses
        raise MemgraphError(f"{spec.name}: a distributed measurement starts one process per rank and must send "
                            f"them the model, which cannot be pickled ({type(e).__name__}): pass a zoo name, a "
                            "config.json or module:function") from None
    with tempfile.TemporaryDirectory(prefix="memgraph-ranks-") as folder:
        env = {"MASTER_ADDR": MASTER_ADDR, "MASTER_PORT": str(free_port()), "WORLD_SIZE": str(opts.nproc)}
        env.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("GLOO_SOCKET_IFNAME", GLOO_SOCKET_IFNAME))
        try:
            mp.spawn(_rank_main, args=(spec, opts, env, folder), nprocs=opts.nproc, join=True)
        except mp.ProcessRaisedException as e:
            last = str(e).strip().splitlines()[-1]
            raise MemgraphError(f"a rank of the distributed measurement failed: {last}") from None
        except mp.ProcessExitedException as e:
            raise MemgraphError(f"a rank of the distributed measurement died ({e}): the machine may be out of "
                                "memory; measure a smaller configuration") from None
        ranks = [json.loads(Path(folder, f"rank{r}.json").read_text()) for r in range(opts.nproc)]
    return {"optimizer_impl": ranks[0]["optimizer_impl"], "backend": "gloo", "world_size": opts.nproc,
            "iterations": ranks[0]["iterations"],
            "ranks": [{"rank": r, "iterations": rank["iterations"]} for r, rank in enumerate(ranks)]}


def _rank_main(rank: int, spec: ModelSpec, opts: TrainingOptions, env: dict, folder: str) -> None:
    """One rank (a spawned process): join the gloo group, measure, write ``rank{rank}.json``."""
    os.environ.update(env, RANK=str(rank))
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=rank, world_size=opts.nproc)
    try:
        result = measure_rank(spec, opts)
        dist.barrier()
    finally:
        dist.destroy_process_group()
    Path(folder, f"rank{rank}.json").write_text(json.dumps(result))


def measure_rank(spec: ModelSpec, opts: TrainingOptions) -> dict:
    """This rank's measurement, in an initialised process group: single-process ``measure_cpu`` with the
    model wrapped (and the optimizer partitioned) by the trace's own :class:`DistributedRun`."""
    from torch.profiler import record_function

    from memgraph.cpu_profiler import memory_profile
    from memgraph.measure.cpu import _per_iteration
    from memgraph.measure.real_step import build_run, run_iteration
    from memgraph.trace.distributed import DistributedRun

    gc.collect()
    with memory_profile() as prof:
        run = build_run(spec, opts, "cpu", distributed=DistributedRun(opts, comm_hook=False))
        impl = run.optimizer_impl
        for it in range(1, opts.iterations + 1):
            with record_function(f"memgraph_iteration_{it}"):
                run_iteration(run)
        del run
    return {"optimizer_impl": impl, "iterations": _per_iteration(prof, opts.iterations)}


__all__ = ["free_port", "measure_cpu_distributed", "measure_rank"]
