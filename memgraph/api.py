"""Python API: ``analyze`` predicts, ``measure`` runs the step for real.

``analyze`` is the whole data flow: model spec -> trace -> analysis passes -> allocator replay.
"""

from __future__ import annotations

import copy
import difflib
from dataclasses import fields, replace

from memgraph.allocator.replay import DevicePeaks, device_peaks
from memgraph.allocator.snapshot import memory_snapshot
from memgraph.analysis.result import Result
from memgraph.analysis.summarize import summarize
from memgraph.analysis.timeline import add_reserved
from memgraph.collector import paused_gc
from memgraph.errors import MemgraphError
from memgraph.facts.cuda_allocator import AllocatorOptions
from memgraph.facts.gpus import get_gpu, process_context
from memgraph.model_spec.input_warnings import input_warnings
from memgraph.model_spec.objects import spec_from_object
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.render.sections import rank_ranges
from memgraph.trace.record import progress
from memgraph.trace.parallel.ranks import rank_groups
from memgraph.trace.tracer import Trace, trace_training
from memgraph.units import human_bytes
from memgraph.validation.band import add_validated_band


def _spec(model):
    """A ModelSpec for a string (zoo name, config path, ``module:function``) or a Python object
    (``nn.Module``, zero-argument factory, ``PretrainedConfig``: model_spec/objects.py)."""
    return resolve(model) if isinstance(model, str) else spec_from_object(model)


def analyze(model, options: TrainingOptions | None = None, **kwargs) -> Result:
    """Predict the memory of ``options.iterations`` training iterations of ``model``.

    ``model`` is a zoo name, a config.json path or model folder, ``module:function``, an ``nn.Module``
    (built on meta is cheapest), a zero-argument function returning one, or a transformers
    ``PretrainedConfig`` with ``architectures`` set; keyword arguments build :class:`TrainingOptions`
    when ``options`` is not given.
    """
    return analyze_traced(model, training_options(options, kwargs, "analyze"))[0]


def training_options(options, kwargs: dict, caller: str) -> TrainingOptions:
    """The API boundary: ``options`` (a TrainingOptions, or None), with ``kwargs`` applied over it.

    A keyword that is no option is Python's TypeError, with the option it probably meant; anything else wrong
    (``options`` of another type, a value of the wrong type or range) is the CLI's one-line MemgraphError."""
    names = [f.name for f in fields(TrainingOptions)]
    for key in kwargs:
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; the options are the fields of TrainingOptions"
            raise TypeError(f"{caller}() got an unexpected keyword argument {key!r}{hint}")
    if options is None:
        return TrainingOptions(**kwargs)
    if not isinstance(options, TrainingOptions):
        raise MemgraphError(f"{caller}(): options is a {type(options).__name__} ({_shown(options)}), not a "
                            f"TrainingOptions: pass TrainingOptions(...) or keyword arguments, e.g. "
                            f"{caller}(model, batch_size=4, seq_len=512)")
    return replace(options, **kwargs) if kwargs else options


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def analyze_traced(model, opts: TrainingOptions) -> tuple[Result, Trace]:
    """:func:`analyze`, also returning the trace (its event log, categorised) for exports such as
    :func:`predicted_snapshot`."""
    progress.stage("resolving the model")
    return analyze_spec(_spec(model), opts)


def analyze_spec(spec, opts: TrainingOptions) -> tuple[Result, Trace]:
    """:func:`analyze_traced` of a resolved :class:`~memgraph.model_spec.sources.ModelSpec`."""
    with paused_gc():  # tracing and analysis: millions of small records that live to the end (collector.py)
        trace = trace_training(spec, opts)
        result = result_of_trace(spec.name, opts, trace, input_warnings(spec, opts))
        if opts.strategy is not None or opts.deepspeed is not None:
            add_rank_figures(result, spec, opts, trace.rank_layouts)
    return result, trace


def add_rank_figures(result: Result, spec, opts: TrainingOptions, traced_layouts: list[tuple] | None = None) -> None:
    """``result.ranks``: the ranks grouped by layout (trace/parallel/ranks.py; ``traced_layouts``: those rank 0's trace
    found, Trace.rank_layouts), each group with its three counters; rank 0's group has ``result``'s figures, every
    other group those of a trace of its first rank. DeepSpeed's groups of equal figures are merged: its ranks
    differ in one buffer, which moves the figures only where the buffer is alive at a peak."""
    groups = rank_groups(spec, opts, traced_layouts)
    result.ranks = []
    for ranks in groups:
        if 0 in ranks:
            figures = result
        else:
            differ = "its ZeRO partition's parameters" if opts.deepspeed is not None else "its shards"
            progress.stage(f"tracing rank {ranks[0]} ({differ} differ from rank 0's)")
            figures = result_of_trace(spec.name, opts, trace_training(spec, opts, rank=ranks[0]))
        device = figures.device
        entry = {"ranks": ranks, "first_iteration_peak": figures.first_iteration_peak.bytes,
                 "steady_state_peak": figures.steady_state_peak.bytes,
                 "steady_state_reserved": device.steady_state_reserved if device else None,
                 "steady_state_device_total": device.steady_state_device_total if device else None,
                 "static": dict(figures.static)}
        same = [e for e in result.ranks if {**e, "ranks": ranks} == entry] if opts.deepspeed is not None else []
        if same:
            same[0]["ranks"] = sorted(same[0]["ranks"] + ranks)
        else:
            result.ranks.append(entry)
        if figures is not result and result.fits is not None:
            _every_rank_fits(result, figures, ranks)


def _every_rank_fits(result: Result, other: Result, ranks: list[int]) -> None:
    """``result.fits`` / ``fits_with_margin`` (rank 0's replay) for the whole job: a job runs out of memory where any
    rank does, so a group of ``ranks`` that does not fit makes it not fit, with a note naming them."""
    who, do = (f"rank {ranks[0]}", "does") if len(ranks) == 1 else (f"ranks {rank_ranges(ranks)}", "do")
    for attr, what in (("fits", "not fit"), ("fits_with_margin", "not fit with the margin")):
        if getattr(result, attr) and not getattr(other, attr):
            setattr(result, attr, False)
            result.notes.append(f"{who} {do} {what} on the {other.gpu['name']} although rank 0 "
                                f"does: their device total is {human_bytes(other.required_bytes)} (upper end "
                                f"{human_bytes(other.required_bytes_upper)}), rank 0's "
                                f"{human_bytes(result.required_bytes)}; the job fits where every rank does")
            return


def result_of_trace(name: str, opts: TrainingOptions, trace: Trace, warnings: list[str] = ()) -> Result:
    """The analysis passes and, for the cuda target, the allocator replay over one trace (also an
    interpolated one: memgraph/sweep.py); ``warnings``: inputs the model was not made for
    (model_spec/input_warnings.py)."""
    progress.stage("analysing the event log")
    result = summarize(trace, name, opts.to_dict(), opts.target)
    result.warnings = list(warnings)
    if opts.target == "cuda":
        progress.stage("replaying the caching allocator")
        add_device_peaks(result, trace, opts)
    return result


def add_device_peaks(result: Result, trace: Trace, opts: TrainingOptions) -> None:
    """The cuda target's reserved and device-total peaks with their upper ends, and the scheduler fields."""
    device = device_peaks(trace.log, trace.iteration_bounds, opts.gpu, opts.allocator_conf,
                          steady_allocated=result.steady_state_peak.bytes, unknowns=trace.unknowns,
                          cuda_version=opts.cuda_version, module_loading=opts.module_loading,
                          context_bytes=opts.context_bytes)
    add_reserved(result.timeline, device.reserved_after, len(trace.log.events))
    _scheduler_fields(result, replace(device, reserved_after=[]))
    add_validated_band(result, trace.model_kind)


def check_snapshot_target(opts: TrainingOptions) -> None:
    """A snapshot describes the CUDA caching allocator: refuse other targets (the CLI asks before tracing)."""
    if opts.target != "cuda":
        raise MemgraphError(f"--format snapshot describes the CUDA caching allocator: not with --target {opts.target}")


def predicted_snapshot(trace: Trace, opts: TrainingOptions) -> dict:
    """The predicted step as a PyTorch memory snapshot (``torch.cuda.memory._snapshot()``'s dict), for
    https://pytorch.org/memory_viz; see :mod:`memgraph.allocator.snapshot`. The cuda target only."""
    check_snapshot_target(opts)
    options = AllocatorOptions.from_env_string(opts.allocator_conf) if opts.allocator_conf else AllocatorOptions()
    gpu = get_gpu(opts.gpu)
    context = process_context(gpu, opts.cuda_version, opts.module_loading, opts.context_bytes)[1]
    return memory_snapshot(trace.log, options, gpu.capacity_bytes - context)


def _scheduler_fields(result: Result, device: DevicePeaks) -> None:
    """The device peaks, and the top-level fields a scheduler reads (README: JSON report schema)."""
    result.unknowns = copy.deepcopy(device.unknowns)  # once, at the top level (DevicePeaks.to_dict leaves them out)
    result.device = replace(device, unknowns=[], reserved_after=[])  # per event: the timeline's points carry it
    result.required_bytes = device.steady_state_device_total
    result.required_bytes_upper = device.steady_state_device_total_upper
    result.fits, result.fits_with_margin = device.fits, device.fits_with_margin
    result.gpu = {"key": device.gpu, "name": device.gpu_name, "capacity_bytes": device.capacity_bytes}


def measure(model, device: str = "cpu", options: TrainingOptions | None = None, snapshot: str | None = None,
            **kwargs) -> dict:
    """Run the same step for real on ``device`` and return the measured record.

    ``snapshot`` (cuda only): write the caching allocator's recorded history there
    (``torch.cuda.memory._dump_snapshot``)."""
    from memgraph.measure import run_measurement

    if options is None:
        kwargs = {"target": device, **kwargs}
    opts = training_options(options, kwargs, "measure")
    if opts.target != device:  # the measured step must be the one the same-named target predicts
        opts = replace(opts, target=device)
    return run_measurement(_spec(model), opts, device, snapshot=snapshot)
