"""Ground truth for ``--nproc N --strategy ...``: the distributed step run for real, N processes on the CPU.

``memgraph measure MODEL --device cpu --nproc 2 --strategy ddp`` starts N processes (``torch.multiprocessing``
with the ``spawn`` start method), each a rank of a real ``gloo`` process group on 127.0.0.1 and a free TCP
port. Every rank builds the same model, batch and optimizer as single-process ``measure --device cpu``
(memgraph/measure/real_step.py), wraps them with the same :class:`~memgraph.trace.parallel.distributed.DistributedRun`
code the trace uses (DDP, FSDP2 ``fully_shard``, ``ZeroRedundancyOptimizer``), and measures its own CPU
allocator under ``torch.profiler`` exactly as memgraph/measure/cpu.py does. Unlike the fake process group
of the trace, gloo moves the data: whatever the collectives allocate on a rank is in its figures.

The one difference from the trace's wrapper: DDP runs its C++ default all-reduce (``_AllReduceBySumCommHook``
on gloo) rather than the Python hook the fake process group needs (trace/parallel/distributed.py ``fake_group_allreduce_hook``).

The record's ``iterations`` are rank 0's (what ``memgraph analyze`` predicts); ``ranks`` holds every rank's.

gloo is not NCCL: its collectives run on its worker threads (two by default) and allocate buffers there
(torch 2.13 torch/csrc/distributed/c10d/ProcessGroupGloo.cpp: ``AsyncAllgatherWork::allgather`` gathers into
a flat tensor of the whole output, ``newLikeFlat(outputs[0])``, copies it out and frees it, all on the worker
thread; NCCL gathers into the output itself). FSDP2 issues the next unit's all-gather while the current
unit computes, so whether a worker's flat buffer is alive at the step thread's peak depends on scheduling.
Measured (tiny-llama, FSDP2, 2 ranks; torch.profiler's memory events carry their thread): each rank's gloo
worker threads allocate and free eight 147,968-byte buffers (one decoder layer's gathered parameters, 2
iterations x forward and backward x 2 layers) and two of 512,256 (the root unit), and nothing else; the
xfailed CI run's +147,992 B on both ranks is one such buffer at the peak (+24 B of scalars). So each
iteration has two figures: ``peak_allocated``, every thread's allocations as the CPU allocator saw them, and
``peak_allocated_step_thread``, the allocations and frees made on the thread that ran the step (the one of
the ``memgraph_iteration_*`` ranges), which leaves out the worker threads' collective buffers, deterministic
from run to run. The second is what the prediction (collectives without gloo's staging) is compared with;
the first exceeds it by at most the flat buffers the worker threads hold at once. Some of gloo's copies are
made on the calling thread, inside the collective's op (``c10d::_reduce_scatter_base_`` clones its input,
``c10d::_allgather_base_`` gathers into a buffer of its own: DeepSpeed's ZeRO-3 calls both); a third figure,
``peak_allocated_step_thread_less_staging``, follows the step thread's allocations by address and leaves those
out (what DeepSpeed's runs are compared with; tests/test_deepspeed.py).

A second gloo effect makes a rank read high: frees the profiler never sees. A collective's Work holds its
tensors (a functional all-reduce's output, an all-gather's output, a scatter's chunks); gloo's worker runs it
under the caller's thread-local state (``AsyncWork::execute``, which restores the profiler's state) and then
drops its reference after leaving it (``ProcessGroupGloo::runLoop``: ``workInProgress_[workerIndex].reset()``).
When the step thread has already let go of those tensors, that reset frees them on the worker thread
outside the profiler, and c10's ``ProfiledCPUMemoryReporter::Delete`` reports nothing: the measured running
total keeps those bytes until the end. Measured (tiny-llama, tp, 2 ranks): in some runs one rank's steady
peak read 16,384 or 32,768 bytes high ([2, 32, 64] all-reduce outputs) or 256,000 ([128, 500] gathered
logits), the other rank exact. Which rank and how many depends on scheduling. Every rank deletes the whole
run and collects garbage inside the profile; what was allocated under it and never seen freed, though its
address was allocated again or no live tensor holds it at the end (``unreported_free_bytes``, per rank; by
address, from the profiler's event tree), is what was freed without being reported: the bound on how far that
rank's figures read high. DeepSpeed's ZeRO-3 does the same with its partitioned reduce-scatter
(``c10d::_reduce_scatter_base_``'s clone) and all-gather outputs: measured (tiny-llama, 1 rank) 4,096 to
49,408 B from run to run, the prediction within 12 B of the runs that lost nothing.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import tempfile
from pathlib import Path

import torch

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
            "ranks": [{"rank": r, "iterations": rank["iterations"], "unreported_free_bytes": rank["unreported_free_bytes"]}
                      for r, rank in enumerate(ranks)]}


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
    import contextlib

    import torch.distributed as dist
    from torch.profiler import record_function

    from memgraph.cpu_profiler import memory_profile
    from memgraph.measure.cpu import per_iteration
    from memgraph.measure.real_step import build_run, collect_compile_garbage, run_iteration
    from memgraph.model_spec.defaults import resolve_defaults
    from memgraph.private_api import allocation_events
    from memgraph.trace.parallel.distributed import distributed_run

    gc.collect()
    with memory_profile() as prof:
        # the resolved options, as the trace's wrapper gets them (trace/tracer.py _trace_all_layers)
        setup = distributed_run(resolve_defaults(spec, opts).options, rank=dist.get_rank(), real=True)
        with setup if opts.deepspeed else contextlib.nullcontext():
            run = build_run(spec, opts, "cpu", distributed=setup)
            impl = run.optimizer_impl
            for it in range(1, opts.iterations + 1):
                with record_function(f"memgraph_iteration_{it}"):
                    run_iteration(run, scaler=setup.engine_loop if opts.deepspeed else None)
                collect_compile_garbage(run)
            del run
        gc.collect()
    iterations = per_iteration(prof, opts.iterations)
    for figures, step_thread in zip(iterations, _step_thread_peaks(prof, opts.iterations)):
        figures["peak_allocated_step_thread"] = step_thread
    events, ops = allocation_events(prof)
    for figures, peak in zip(iterations, _peaks_less_staging(events, ops, opts.iterations)):
        figures["peak_allocated_step_thread_less_staging"] = peak
    unreported = _unreported_free_bytes(events)
    return {"optimizer_impl": impl, "iterations": iterations, "unreported_free_bytes": unreported}


def _unreported_free_bytes(events) -> int:
    """The bytes this rank allocated under the profile whose free it never reported: allocations without a free
    whose address was allocated again, and those left at the end that no live tensor holds (DeepSpeed keeps its
    engine's buffers referenced beyond the run, so the running total at the end is not the figure)."""
    live, lost = {}, 0
    for _, ptr, nbytes, _, _ in events:
        if nbytes > 0:
            lost += live.get(ptr, 0)  # allocated again: the earlier block was freed without a report
            live[ptr] = nbytes
        else:
            live.pop(ptr, None)
    held = set()
    for t in _cpu_tensors():
        try:
            held.add(t.untyped_storage().data_ptr())
        except RuntimeError:  # a fake tensor Dynamo's caches keep after a compiled run (--compile): holds no memory
            continue
    return lost + sum(nbytes for ptr, nbytes in live.items() if ptr not in held)


def _peaks_less_staging(events, ops: dict, iterations: int) -> list[int]:
    """Per iteration, the step thread's peak by address without gloo's staging: the allocations the step's
    thread made, each alive until its free (reported on any thread), leaving out those made inside a ``c10d::``
    collective (gloo's own copies: ``_reduce_scatter_base_`` clones its input, ``_allgather_base_`` gathers into
    a buffer of its own; NCCL works in the caller's tensors)."""
    thread = ops["memgraph_iteration_1"][2]
    live, cur, peaks = {}, 0, []
    bounds = [ops[f"memgraph_iteration_{it}"][:2] for it in range(1, iterations + 1)]
    it, peak = 0, None
    for t, ptr, nbytes, tid, outer in events:
        while it < len(bounds) and t > bounds[it][1]:
            peaks.append(cur if peak is None else peak)
            it, peak = it + 1, None
        if peak is None and it < len(bounds) and t >= bounds[it][0]:
            peak = cur  # the iteration's start
        if nbytes > 0:
            cur -= live.pop(ptr, 0)  # an unreported free: the block is gone by now
            if tid == thread and not any(name.startswith("c10d::") for name in outer):
                live[ptr] = nbytes
                cur += nbytes
        else:
            cur -= live.pop(ptr, 0)
        if it < len(bounds) and t >= bounds[it][0]:
            peak = cur if peak is None else max(peak, cur)
    while it < len(bounds):
        peaks.append(cur if peak is None else peak)
        it, peak = it + 1, None
    return peaks


def _cpu_tensors() -> list[torch.Tensor]:
    """The CPU tensors the garbage collector can reach now."""
    import warnings

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # module objects that warn when touched (torch.distributed.reduce_op)
        for obj in gc.get_objects():
            try:
                if isinstance(obj, torch.Tensor) and obj.device.type == "cpu":
                    out.append(obj)
            except Exception:  # noqa: BLE001,S112 - objects whose isinstance check raises are no tensors
                continue
    return out


def _step_thread_peaks(prof, iterations: int) -> list[int]:
    """Per iteration, the peak of the allocations and frees made on the thread that ran the step (gloo's worker
    threads left out: their buffers are allocated and freed on the worker, see the module docstring)."""
    from memgraph.cpu_profiler import MEMORY_EVENT
    from memgraph.private_api import kineto_events

    events = list(kineto_events(prof))
    ranges = {int(e.name().rsplit("_", 1)[1]): (e.start_ns(), e.end_ns(), e.start_thread_id())
              for e in events if e.name().startswith("memgraph_iteration_")}
    thread = ranges[1][2]
    memory = sorted(((e.start_ns(), e.nbytes()) for e in events
                     if e.name() == MEMORY_EVENT and e.device_type() == torch.autograd.DeviceType.CPU
                     and e.start_thread_id() == thread), key=lambda m: m[0])  # stable: cpu_memory_events' order
    peaks = []
    for it in range(1, iterations + 1):
        lo, hi, _ = ranges[it]
        cur = sum(b for t, b in memory if t < lo)
        peak = cur
        for t, b in memory:
            if lo <= t <= hi:
                cur += b
                peak = max(peak, cur)
        peaks.append(peak)
    return peaks


__all__ = ["free_port", "measure_cpu_distributed", "measure_rank"]
