"""``memgraph fit``: does the step fit on the GPU, the largest batch that does, and what to change if not.

Every number here is a prediction of memgraph's own analysis, never a rule of thumb:

* **Your settings**: one analysis of the step as given; the device total (what nvidia-smi would show) is
  compared with the GPU's capacity, at the expected value and at the upper end of the bounded unknowns;
  **why** it needs that much: the peak's phase, module and op, and its largest consumers (fit/why.py).
* **The largest batch** (``--solve batch-size``, the default; fit/solve.py): anchored on two real traces
  (your batch, whose trace is already there, and twice it); where :class:`memgraph.trace.shortcuts.batch.AffineFit` finds
  every storage affine in the batch, the other probes are interpolated logs (an analysis, not a trace),
  otherwise every probe is a real trace; doubling, then bisection; then **confirmed by real traces** at the
  answer and one above (a disagreement sends the search on with real traces).
* **The longest sequence** (``--solve seq-len``): sizes are not affine in the sequence (attention is
  quadratic in eager mode), so it is bisected with real traces, over multiples of ``SEQ_STEP`` tokens.
* **Changes** (fit/candidates.py): each candidate change is applied to your settings alone and analysed
  for real; the table shows its device total, whether it fits, what it saves, and what it costs; then the
  **plans** (fit/plans.py): the smallest sets of changes that fit, cheapest first, each analysed for real and
  printed as a command that can be pasted (fit/command.py).

Analyses are memoised by options and a change the trace does not read (the allocator's configuration) is
only replayed on the trace it shares (fit/analyses.py), so a fit costs a trace per distinct step; with depth
synthesis, the notes-only shallow trace is shared by every setting whose 3- and 4-layer notes are the same
strings (memgraph/trace/shortcuts/depth_run.py ``shared_notes_trace``). What cannot fit by a lower bound read
off a trace fit already has is not traced (fit/bound.py): sets of changes that keep the parameters, gradients
(and optimizer state), single changes that keep all three, and sharded changes (FSDP, ZeRO over N) whose saved
activations alone exceed the card; a set chosen for analysis that holds such a single change has that change
analysed first (fit/plans.py ``_analyse_alone``).
"""

from __future__ import annotations

import time
from dataclasses import replace

from memgraph.errors import MemgraphError
from memgraph.fit.analyses import Analyses, trace_key
from memgraph.fit.candidates import (CANDIDATES, FSDP_WORLD_SIZES, Candidate, analysed_where_known, summary,
                                     try_changes)
from memgraph.fit.command import changed_flags, command_line
from memgraph.fit.outcome import FitReport, Outcome
from memgraph.fit.plans import Plan, find_plans
from memgraph.fit.progress import QUIET, FitProgress
from memgraph.fit.render import render_fit
from memgraph.fit.solve import MAX_BATCH, BatchAnswer, largest_fitting, solve_largest_batch
from memgraph.fit.why import removal_line, why_lines
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.collector import paused_gc
from memgraph.trace.shortcuts.batch import AffineFit
from memgraph.trace.shortcuts.depth_run import shared_notes_trace

SEQ_STEP = 256  # --solve seq-len answers in multiples of this many tokens (flash/efficient kernels tile by 128)


def fit(model: str, opts: TrainingOptions, solve: str = "batch-size", progress: FitProgress | None = None,
        max_gpus: int = max(FSDP_WORLD_SIZES)) -> FitReport:
    """The whole ``memgraph fit`` answer (see the module docstring); multi-GPU changes use at most ``max_gpus``."""
    if isinstance(max_gpus, bool) or not isinstance(max_gpus, int) or max_gpus < 1:
        raise MemgraphError(f"--max-gpus {max_gpus!r}: pass a whole number >= 1 (1: no multi-GPU changes)")
    if opts.target != "cuda":
        raise MemgraphError(f"memgraph fit answers for a GPU: drop --target {opts.target}")
    if solve not in ("batch-size", "seq-len"):
        raise MemgraphError(f"--solve {solve!r}: pass batch-size or seq-len")
    progress = progress or QUIET
    start = time.perf_counter()
    spec = resolve(model)
    given = opts
    # Every 'auto' resolved first (attention, loop, optimizer implementation), so a change is compared with
    # what your settings really run, and the flags of the best combination are explicit.
    opts = resolve_defaults(spec, opts).options
    analyses = Analyses(spec)
    # paused_gc: memgraph/collector.py says why; shared_notes_trace: depth synthesis' notes-only trace
    # (BASE_DEPTH - 1 layers) once per pair of 3- and 4-layer notes, shared by every setting with that pair
    # (memgraph/trace/shortcuts/depth_run.py says why the notes, and so every number, are the same)
    with paused_gc(), shared_notes_trace():
        progress.stage("your settings")
        yours = analyses.outcome(opts, "your settings")
        progress.done(f"your settings: {summary(yours)}")
        report = FitReport(model, yours.result.device.gpu_name, yours.capacity, yours, solve, None, "")
        report.why = why_lines(yours, analyses.traces[trace_key(opts)], getattr(spec.config, "vocab_size", None))
        if solve == "batch-size":
            _solve_batch(analyses, opts, yours, report, progress)
        else:
            _solve_seq(analyses, opts, yours, report, progress)
        report.changes = try_changes(analyses, opts, yours, progress, max_gpus)
        report.why += removal_line(yours, next((o for o in report.changes if o.result is not None), None))
        if not yours.fits_with_margin:
            report.plans = find_plans(analyses, yours, report.changes, progress)
            report.changes = analysed_where_known(analyses, report.changes)  # a bound the plans analysed: its figure
            report.commands = [command_line("analyze", model, replace(given, **dict(p.outcome.changes)))
                               for p in report.plans]
    report.timings = analyses.timings
    report.seconds = time.perf_counter() - start
    return report


# -- the largest batch -----------------------------------------------------------------------------

class _StepCurve:
    """The step's peak as a function of the batch, for fit/solve.py: real traces through the memoised analyses."""

    def __init__(self, analyses: Analyses, opts: TrainingOptions):
        self.analyses, self.opts = analyses, opts

    def _at(self, b: int) -> TrainingOptions:
        return replace(self.opts, batch_size=b)

    def real(self, b: int):
        return self.analyses.trace(self._at(b))

    def fits_real(self, b: int) -> bool:
        return self.analyses.outcome(self._at(b), f"batch {b}").fits_with_margin

    def fits_interpolated(self, fit: AffineFit, b: int) -> bool:
        opts = self._at(b)
        trace = fit.trace_at(b, self.analyses.spec, opts)
        return self.analyses.interpolated(opts, trace, f"batch {b}").fits_with_margin


def _solve_batch(analyses: Analyses, opts: TrainingOptions, yours: Outcome, report: FitReport,
                 progress: FitProgress) -> None:
    answer = solve_largest_batch(_StepCurve(analyses, opts), opts.batch_size, yours.fits_with_margin, MAX_BATCH,
                                 progress.stage)
    report.largest, report.largest_source = answer.largest or None, answer.source
    if answer.largest and answer.largest < MAX_BATCH:  # the confirming traces (memoised: already analysed)
        for b in (answer.largest, answer.largest + 1):
            report.confirmations.append(analyses.outcome(replace(opts, batch_size=b), f"batch {b} (traced)"))
        progress.done(f"largest batch {answer.largest}: " + ", ".join(
            f"{o.label} {'fits' if o.fits_with_margin else 'does not fit'}" for o in report.confirmations))


# -- the longest sequence --------------------------------------------------------------------------

def _solve_seq(analyses: Analyses, opts: TrainingOptions, yours: Outcome, report: FitReport,
               progress: FitProgress) -> None:
    if opts.seq_len is None:
        raise MemgraphError("--solve seq-len starts from a sequence length: pass --seq-len")
    report.largest_source = f"bisected with real traces over multiples of {SEQ_STEP} tokens"

    def fits(s: int) -> bool:
        progress.stage(f"sequence {s}")
        try:
            return analyses.outcome(replace(opts, seq_len=s), f"seq {s}").fits_with_margin
        except MemgraphError:  # past the model's positions: the answer is below
            return False

    steps = largest_fitting(lambda k: fits(k * SEQ_STEP), max(1, opts.seq_len // SEQ_STEP),
                            yours.fits_with_margin and opts.seq_len % SEQ_STEP == 0, (1 << 21) // SEQ_STEP)
    report.largest = steps * SEQ_STEP or None


__all__ = ["CANDIDATES", "BatchAnswer", "Candidate", "FitProgress", "FitReport", "Outcome", "Plan", "changed_flags",
           "command_line", "fit",
           "largest_fitting", "render_fit", "solve_largest_batch"]
