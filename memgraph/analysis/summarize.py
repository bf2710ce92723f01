"""From a trace to a :class:`Result`: the analysis passes, in order.

categorize -> allocated sizes -> liveness -> peaks (first iteration, steady state, each phase)
-> one group-by (totals, per module, per modality) -> timeline. Each pass reads the event log
(and the earlier passes' plain outputs) and nothing else. The cuda target's allocator replay
(reserved, device total) comes after, in :mod:`memgraph.allocator.replay`.
"""

from __future__ import annotations

import importlib.metadata
import sys
import time

import torch

from memgraph.analysis.categorize import categorize
from memgraph.analysis.group_by import group_by, module_rows, vars_of
from memgraph.analysis.liveness import alive_after, argmax_in, live_bytes
from memgraph.analysis.peaks import Locator, peak_at, phase_peaks
from memgraph.analysis.result import SCHEMA_VERSION, ModalityRow, Result
from memgraph.analysis.timeline import timeline
from memgraph.facts.cuda_allocator import ALLOCATED_SIZE
from memgraph.facts.ops.registry import unknown_ops
from memgraph.model_spec.modality import SHARED, with_video
from memgraph.model_spec.options import AUTOCAST_DTYPE_NAME
from memgraph.trace.tracer import Trace
from memgraph.units import human_bytes
from memgraph.version import __version__

METRIC = {"cuda": "torch.cuda.max_memory_allocated", "cpu": "peak of CPU allocator bytes (torch.profiler)"}


def summarize(trace: Trace, model_name: str, options: dict, target: str) -> Result:
    start = time.perf_counter()
    log = trace.log
    categorize(log)
    sizes = [ALLOCATED_SIZE[target](s.nbytes) for s in log.storages]
    live = live_bytes(log.events, sizes)
    bounds = trace.iteration_bounds
    where = Locator(log)
    first = peak_at(log, live, sizes, where, argmax_in(live, *bounds[0]))
    steady_index = argmax_in(live, bounds[1][0], bounds[-1][1])
    alive = alive_after(log.events, steady_index)
    steady = peak_at(log, live, sizes, where, steady_index, alive)
    last = len(bounds)

    def totals_by(key):
        return group_by(log, sizes, key, alive, trace.trainable_sids, last, options.get("quantize"))

    total = totals_by(lambda module: "")[""]
    groups = with_video(trace.modalities, options)  # --video-frames: the vision tower is the video's encoder
    modalities = totals_by(lambda module: groups.get(module, SHARED))
    return Result(
        schema_version=SCHEMA_VERSION, model=model_name, target=target, metric=METRIC[target],
        options=options, batch=trace.batch, optimizer_impl=trace.optimizer_impl,
        parameters=trace.parameter_count, trainable_parameters=trace.trainable_parameter_count,
        static={"parameters": total.parameter_bytes, "buffers": total.buffer_bytes,
                "gradients": total.gradient_bytes, "optimizer_state": total.optimizer_state_bytes},
        first_iteration_peak=first, steady_state_peak=steady,
        modules=module_rows(totals_by(lambda module: module)),
        timeline=timeline(where, live, log, sizes),
        iteration_starts=[lo for lo, _ in bounds],
        ops={"count": len(log.ops), "unknown": dict(unknown_ops(o.op for o in log.ops))},
        trace_seconds=round(trace.seconds, 3), analysis_seconds=round(time.perf_counter() - start, 3),
        versions=_versions(), notes=list(trace.notes) + mixed_precision_note(options.get("precision"), steady),
        modalities=[ModalityRow(modality=m, **vars_of(t)) for m, t in
                    sorted(modalities.items(), key=lambda kv: (kv[0] == SHARED, kv[0]))],
        peak_modality=groups.get(steady.module, SHARED),
        phase_peaks=phase_peaks(log, live, sizes, where, bounds[-1]),
        assumptions=list(trace.assumptions),
    )


def mixed_precision_note(precision: str | None, steady) -> list[str]:
    """Why a mixed-precision step can need more than fp32, when autocast's weight copies are alive at its peak.

    The mechanism, from PyTorch 2.13: autocast's ``cached_cast`` (aten/src/ATen/autocast_mode.cpp) keeps one
    low-precision copy of each float32 leaf that requires grad (a trainable weight) until the outermost region
    exits (``torch.autocast.__exit__`` -> ``clear_autocast_cache()``), and autograd keeps the copies it saved until
    backward; a non-leaf tensor (an activation) is cast again, uncached, by every op that reads it. The float32
    weights, gradients and optimizer state stay what fp32 training holds. So mixed precision saves only through
    smaller activations, and where they are few it needs more (trace/emulate/autocast_emulation.py emulates this)."""
    cache = steady.by_category.get("autocast_cache", 0)
    if precision not in AUTOCAST_DTYPE_NAME or not cache:
        return []
    dtype = AUTOCAST_DTYPE_NAME[precision]
    return [f"{precision} can need more than fp32: it keeps the float32 weights, gradients and optimizer state of "
            f"fp32 training, adds autocast's {dtype} copy of every weight forward uses ({human_bytes(cache)} alive at "
            "the steady-state peak: kept until forward ends, longer where backward needs it), and casts a float32 "
            "activation again for every op that reads it (q, k and v projections reading one float32 hidden state "
            f"make three {dtype} copies); only the activations get smaller, so with a small batch, short sequences "
            "or gradient checkpointing it can cost more than it saves: compare with --precision fp32 (memgraph fit "
            "analyses both)"]


def _versions() -> dict[str, str]:
    """The versions the report was made with. transformers' is read from its package metadata unless the
    step imported it: importing it only for its version costs a CPU second a plain nn.Module never needs."""
    out = {"memgraph": __version__, "torch": torch.__version__}
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        out["transformers"] = transformers.__version__
    else:
        try:
            out["transformers"] = importlib.metadata.version("transformers")
        except importlib.metadata.PackageNotFoundError:
            pass
    return out
