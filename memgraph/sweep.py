"""Many analyses in one process: ``memgraph analyze MODEL --batch-size 1,2,4,8 --seq-len 2048,4096``.

Modules are imported and the model spec resolved once. For each sequence length, the batch sizes
share their traces: the recorded event stream of a training step does not depend on the batch
size (the same ops run in the same order; only each storage's size changes, and it changes as an
exact affine function of the batch: ``nbytes(b) = nbytes(lo) + (b - lo) * slope``). So the step is
traced at the smallest and the largest requested batch sizes, the two traces are checked to be the
same stream, and every size in between gets an event log whose storage sizes (and shapes) are
interpolated from the two; liveness, peaks and the allocator replay then run on that log as they
would on a traced one. The numbers are those of a trace at that size (tests/test_sweep.py).

What is checked before interpolating (otherwise that size is traced for real):

* same stream: the same events, ops, phases and storages (sid, origin, name, module, dtype, rank,
  saved-for-backward, role, lifetime) at both sizes. Data-dependent models (token layouts read
  through shadow values, MoE routing) can differ; batch 1 may differ from larger batches (a dim of
  size 1 makes ``.contiguous()`` a no-op), in which case batch 1 is traced alone and the rest
  interpolated between the next-smallest and the largest;
* affine in the batch: each storage's bytes and each shape dim must land on an integer at every
  requested size, and at most one dim of a shape may change with the batch (two would make its
  bytes quadratic, e.g. CLIP's ``[b, b]`` logits): such a stream is traced per size;
* with ``check=True`` a third, middle size is also traced and its log compared with the
  interpolated one (any difference: every size is traced for real).

Notes that differ between the two traces (the KV-cache note names its bytes) are reported from
the nearer traced size, prefixed with it.

A deep model's traces are depth-synthesized (trace/shortcuts/depth_run.py): each traced size is traced at 3 and 4
layers, and at 2 layers for the notes only where a plain-str note (not a typed memgraph.notes.Note) differs
between 3 and 4 layers; within one sequence length the 2-layer notes are traced once and reused by every size
whose 3- and 4-layer notes are the same strings (``shared_notes_trace``: why that gives
the notes a separate trace gives is in depth_run's docstring).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from memgraph.api import result_of_trace
from memgraph.collector import paused_gc
from memgraph.model_spec.input_warnings import input_warnings
from memgraph.analysis.result import Result
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec, resolve
from memgraph.errors import MemgraphError
from memgraph.trace.shortcuts.batch import AffineFit, checked
from memgraph.trace.shortcuts.depth_run import shared_notes_trace
from memgraph.trace.tracer import Trace, trace_training
from memgraph.units import human_bytes


@dataclass
class SweepPoint:
    """One analysed size of a sweep and how its event log was obtained."""

    batch_size: int
    seq_len: int | None
    source: str  # "traced" or "interpolated from batch LO and HI"
    result: Result


def analyze_many(model: str, options: TrainingOptions, batch_sizes: list[int], seq_lens: list[int | None],
                 check: bool = False) -> list[SweepPoint]:
    """Analyse ``model`` at every (sequence length, batch size), in that order, sharing traces."""
    with paused_gc():
        spec = resolve(model)
        points = []
        for seq in _unique(seq_lens):
            base = replace(options, seq_len=seq)
            with shared_notes_trace():  # depth synthesis' notes-only trace, once per sweep (trace/shortcuts/depth_run.py)
                points += _batch_sweep(spec, base, _unique(batch_sizes), check)
        return points


def _unique(values: list) -> list:
    return list(dict.fromkeys(values))


def analyze_trace(spec: ModelSpec, opts: TrainingOptions, trace: Trace) -> Result:
    """The analysis of one trace (the same passes as :func:`memgraph.api.analyze`)."""
    return result_of_trace(spec.name, opts, trace, input_warnings(spec, opts))


def _batch_sweep(spec: ModelSpec, base: TrainingOptions, sizes: list[int], check: bool) -> list[SweepPoint]:
    opts = {b: replace(base, batch_size=b) for b in sizes}
    traces: dict[int, Trace] = {}

    def traced(b: int) -> Trace:
        if b not in traces:
            traces[b] = trace_training(spec, opts[b])
        return traces[b]

    logs: dict[int, tuple[Trace, str]] = {}  # batch -> (trace to analyse, source)
    remaining = sorted(sizes)
    while len(remaining) >= 3:
        lo, hi = remaining[0], remaining[-1]
        fit = AffineFit.of(traced(lo), lo, traced(hi), hi, remaining)
        if fit is not None and check:
            fit = checked(fit, remaining, traced)
        if fit is None:  # the smallest differs (or nothing fits): trace it alone, try the rest
            logs[lo] = (traced(lo), "traced")
            remaining = remaining[1:]
            continue
        for b in remaining:
            logs[b] = (traces[b], "traced") if b in traces else (fit.trace_at(b, spec, opts[b]), fit.source)
        remaining = []
    for b in remaining:
        logs[b] = (traced(b), "traced")
    return [SweepPoint(b, base.seq_len, logs[b][1], analyze_trace(spec, opts[b], logs[b][0])) for b in sizes]


SWEEP_COLUMNS = ("batch", "seq len", "peak allocated", "first iteration", "peak reserved", "device total", "fits",
                 "peak at", "log")


def check_sweep_format(fmt: str) -> None:
    """Refuse, before any work, a format that shows one analysis only."""
    if fmt not in ("table", "md", "json"):
        raise MemgraphError(f"--format {fmt} shows one analysis: pass one --batch-size and one --seq-len, or use "
                            "--format table, md or json for a sweep")


def render_sweep(points: list[SweepPoint], fmt: str, depth: int = 3) -> str:
    """``table``/``md``: one row per size; ``json``: the list of full JSON reports, each with ``sweep_source``."""
    if fmt == "json":
        import json

        from memgraph.render.json_report import render_json

        reports = [{**json.loads(render_json(p.result, depth)), "sweep_source": p.source} for p in points]
        return json.dumps(reports, indent=2) + "\n"
    check_sweep_format(fmt)
    from tabulate import tabulate

    rows = [_sweep_row(p) for p in points]
    head = f"{points[0].result.model}: {len(points)} analyses ({points[0].result.metric})"
    table = tabulate(rows, SWEEP_COLUMNS, tablefmt="github" if fmt == "md" else "simple", disable_numparse=True)
    return (f"## {head}\n\n" if fmt == "md" else f"{head}\n\n") + table + "\n"


def _sweep_row(p: SweepPoint) -> list[str]:
    r, dev = p.result, p.result.device
    peak = r.steady_state_peak
    reserved, total, fits = ((human_bytes(dev.steady_state_reserved), human_bytes(dev.steady_state_device_total),
                              "yes" if dev.fits else "no") if dev else ("-", "-", "-"))
    where = f"{peak.phase}: {peak.module or '-'}" if peak.phase else "-"
    seq = r.options.get("seq_len")
    return [str(p.batch_size), "model's" if seq is None else str(seq), human_bytes(peak.bytes),
            human_bytes(r.first_iteration_peak.bytes), reserved, total, fits, where, p.source]


__all__ = ["SweepPoint", "analyze_many", "analyze_trace", "check_sweep_format", "render_sweep"]
