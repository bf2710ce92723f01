"""The analyses of one ``memgraph fit`` run, each done once, and the traces they share.

* **Memoised by options**: a setting reached twice (a change that equals another, a combination step
  that equals a table entry, the confirmation trace at your own batch) is analysed once.
* **Replay-only changes reuse the trace**: the fields in :data:`REPLAY_ONLY` are read by the allocator
  replay and the device total only (memgraph/api.py ``add_device_peaks``), never by the trace, so a
  setting that differs from an analysed one only there is the same trace replayed again (a tenth of a
  second instead of a trace). The GPU is not one of them: the trace reads it (memgraph/trace/tracer.py
  builds its ``CudaRuntime`` and picks the attention kernel from its compute capability).
"""

from __future__ import annotations

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

    def trace(self, opts: TrainingOptions) -> Trace:
        """The real trace of ``opts`` (traced, and analysed, when first asked)."""
        self.outcome(opts, f"batch {opts.batch_size}" if opts.batch_size else "")
        return self.traces[trace_key(opts)]

    def interpolated(self, opts: TrainingOptions, trace: Trace, label: str) -> Outcome:
        """The analysis of an interpolated trace (memgraph/sweep.py): not memoised, since it is not a real trace."""
        start = time.perf_counter()
        result = result_of_trace(self.spec.name, opts, trace)
        seconds = time.perf_counter() - start
        self.timings.append((label, "interpolated", seconds))
        return outcome_of(label, opts, result, seconds, how="interpolated")
