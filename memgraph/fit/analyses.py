"""The analyses of one ``memgraph fit`` run, each done once, and the traces they share.

* **Memoised by options**: a setting reached twice (a change that equals another, a combination step
  that equals a table entry, the confirmation trace at your own batch) is analysed once.
* **Replay-only changes reuse the trace**: the fields in :data:`REPLAY_ONLY` are read by the allocator
  replay and the device total only (memgraph/api.py ``add_device_peaks``), never by the trace, so a
  setting that differs from an analysed one only there is the same trace replayed again (a tenth of a
  second instead of a trace). The GPU is not one of them: the trace reads it (memgraph/trace/tracer.py
  builds its ``CudaRuntime`` and picks the attention kernel from its compute capability).
* **Independent analyses in parallel**: the candidate changes do not depend on each other, so
  :meth:`Analyses.prefetch` traces them in forked worker processes, one per CPU this process may use
  (``os.sched_getaffinity``); each worker returns its outcome and its trace, memoised here as if analysed
  here. One CPU, no ``fork`` start method, or a worker that fails for any reason other than a refusal
  (MemgraphError): the analysis is simply done here, in turn. The numbers do not depend on where an
  analysis ran.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from dataclasses import fields, replace

from memgraph.api import analyze_spec, result_of_trace
from memgraph.errors import MemgraphError
from memgraph.fit.outcome import Outcome, outcome_of
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.trace.tracer import Trace

REPLAY_ONLY = ("allocator_conf", "context_bytes", "cuda_version", "module_loading")
_DEFAULTS = {f.name: f.default for f in fields(TrainingOptions) if f.name in REPLAY_ONLY}


def trace_key(opts: TrainingOptions) -> TrainingOptions:
    """``opts`` with the replay-only fields at their defaults: two options with one key have one trace."""
    return replace(opts, **_DEFAULTS)


class Analyses:
    """Every analysis of one fit, memoised; real traces kept by :func:`trace_key`."""

    def __init__(self, spec: ModelSpec):
        self.spec = spec
        self.traces: dict[TrainingOptions, Trace] = {}
        self._outcomes: dict[TrainingOptions, Outcome | MemgraphError] = {}
        self.timings: list[tuple[str, str, float]] = []  # (setting, how, wall seconds) of each analysis done

    def outcome(self, opts: TrainingOptions, label: str, cost: str = "", changes=()) -> Outcome:
        """The analysis of ``opts`` (raises the analysis' MemgraphError, also when memoised)."""
        known = self._outcomes.get(opts)
        if known is None:
            known = self._outcomes[opts] = self._analyse(opts, label, cost, changes)
        if isinstance(known, MemgraphError):
            raise known
        if known.label == label and known.changes == tuple(changes):
            return known
        return replace(known, label=label, cost=cost, changes=tuple(changes), seconds=0.0,
                       how=f"the analysis of {known.label}")

    def analysed(self, opts: TrainingOptions) -> bool:
        """Whether ``opts`` has been analysed (and not refused): :meth:`outcome` then costs nothing."""
        return isinstance(self._outcomes.get(opts), Outcome)

    def _analyse(self, opts: TrainingOptions, label: str, cost: str, changes) -> Outcome | MemgraphError:
        start = time.perf_counter()
        key = trace_key(opts)
        try:
            if key in self.traces:
                result, how = result_of_trace(self.spec.name, opts, self.traces[key]), "replayed on a trace it shares"
            else:
                result, self.traces[key] = analyze_spec(self.spec, opts)
                how = "traced"
        except MemgraphError as e:
            self.timings.append((label, "refused", time.perf_counter() - start))
            return e
        seconds = time.perf_counter() - start
        self.timings.append((label, how, seconds))
        return outcome_of(label, opts, result, seconds, cost, changes, how)

    def prefetch(self, jobs: list[tuple[TrainingOptions, str, str, tuple]], on_done=None) -> None:
        """Analyse the ``(options, label, cost, changes)`` of ``jobs`` that need a trace of their own in
        worker processes; ``on_done(label)`` after each. What a worker could not do is left for :meth:`outcome`."""
        todo, keys = [], set(self.traces)
        for job in jobs:
            key = trace_key(job[0])
            if job[0] not in self._outcomes and key not in keys:
                todo.append(job)
                keys.add(key)
        workers = min(len(todo), usable_cpus())
        if workers < 2 or "fork" not in multiprocessing.get_all_start_methods():
            return
        global _WORKER
        _WORKER = self
        try:
            with multiprocessing.get_context("fork").Pool(workers, initializer=_one_thread) as pool:
                for job, done in zip(todo, pool.imap(_analyse_in_worker, todo)):
                    if done is not None:
                        known, trace, timing = done
                        self._outcomes[job[0]] = known
                        if trace is not None:
                            self.traces[trace_key(job[0])] = trace
                        self.timings.append(timing)
                    if on_done is not None:
                        on_done(job[1])
        finally:
            _WORKER = None

    def trace(self, opts: TrainingOptions) -> Trace:
        """The real trace of ``opts`` (traced, and analysed, when first asked)."""
        self.outcome(opts, f"batch {opts.batch_size}" if opts.batch_size else "")
        return self.traces[trace_key(opts)]

    def interpolated(self, opts: TrainingOptions, trace: Trace, label: str) -> Outcome:
        """The analysis of an interpolated trace (memgraph/trace/shortcuts/batch.py): not memoised, since it is not a real trace."""
        start = time.perf_counter()
        result = result_of_trace(self.spec.name, opts, trace)
        seconds = time.perf_counter() - start
        self.timings.append((label, "interpolated", seconds))
        return outcome_of(label, opts, result, seconds, how="interpolated")


_WORKER: Analyses | None = None  # the Analyses a forked worker inherits from prefetch()


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; os.cpu_count where there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _one_thread() -> None:
    """A forked worker runs ATen's CPU ops (shadow values) on one thread. GNU OpenMP's thread pool does not
    survive fork: a parallel region in a child of a process that has used one waits forever (measured: a
    4000x4000 matmul in the parent, then exp().sum() of 10**7 elements in a forked child, hangs), and ATen
    enters no parallel region when torch.get_num_threads() is 1 (aten/src/ATen/Parallel-inl.h, parallel_for's
    use_parallel). The thread count only sizes the cpu target's per-thread buffers (facts/ops/cpu_workspace.py),
    and fit predicts for a GPU (it refuses --target cpu)."""
    import torch

    torch.set_num_threads(1)


def _analyse_in_worker(job):
    """In a forked worker: one analysis, returned with its trace and timing (None: leave it to the parent)."""
    opts, label, cost, changes = job
    try:
        known = _WORKER._analyse(opts, label, cost, changes)
        return known, _WORKER.traces.get(trace_key(opts)), _WORKER.timings[-1]
    except Exception:  # noqa: BLE001 - anything but a refusal: the parent analyses it itself
        return None
