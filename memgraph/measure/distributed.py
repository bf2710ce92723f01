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

gloo's worker threads allocate CPU tensors of their own: ``ProcessGroupGloo``'s all-gather (torch 2.13
torch/csrc/distributed/c10d/ProcessGroupGloo.cpp, ``AsyncAllgatherWork::allgather``: ``flatOutputTensor =
newLikeFlat(outputs[0])``, the whole gathered size, copied out into the caller's output) runs on a gloo thread.
These buffers are gloo's, as NCCL's buffers are NCCL's (outside the caching allocator; a bounded unknown in
the prediction), and when they are freed relative to the step depends on thread timing: on two cores, a
gloo thread's free can land after the step thread's next allocations. So each iteration carries, beside
``peak_allocated`` (every allocation of the process), ``step_peak_allocated``: the peak of the allocations
made and freed on the thread that runs the step, which is what the trace models, and
``backend_thread_bytes`` (the largest single allocation on any other thread, for the record).
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
    return {"optimizer_impl": impl, "iterations": per_iteration_by_thread(prof, opts.iterations)}


def per_iteration_by_thread(prof, iterations: int) -> list[dict]:
    """measure/cpu.py's per-iteration figures over every thread, plus the step thread's own peak
    (``step_peak_allocated``) and the largest allocation made on another thread (``backend_thread_bytes``).
    The step thread is the one that recorded the ``memgraph_iteration_N`` ranges."""
    import torch

    from memgraph.cpu_profiler import MEMORY_EVENT
    from memgraph.measure.cpu import _per_iteration
    from memgraph.private_api import kineto_events

    events = kineto_events(prof)
    ranges = {int(e.name().rsplit("_", 1)[1]): (e.start_ns(), e.end_ns(), e.start_thread_id())
              for e in events if e.name().startswith("memgraph_iteration_")}
    memory = sorted(((e.start_ns(), e.nbytes(), e.start_thread_id()) for e in events
                     if e.name() == MEMORY_EVENT and e.device_type() == torch.autograd.DeviceType.CPU),
                    key=lambda m: m[0])
    out = _per_iteration(prof, iterations)
    for figures in out:
        lo, hi, step_thread = ranges[figures["iteration"]]
        cur = sum(b for t, b, thread in memory if t < lo and thread == step_thread)
        peak, other = cur, 0
        for t, b, thread in memory:
            if lo <= t <= hi:
                if thread == step_thread:
                    cur += b
                    peak = max(peak, cur)
                else:
                    other = max(other, b)
        figures.update(step_peak_allocated=peak, backend_thread_bytes=other)
    return out


__all__ = ["free_port", "measure_cpu_distributed", "measure_rank", "per_iteration_by_thread"]
