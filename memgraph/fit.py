"""``memgraph fit``: does the step fit on the GPU, the largest batch that does, and what to change if not.

Every number here is a prediction of memgraph's own analysis, never a rule of thumb:

* **Your settings**: one analysis of the step as given; the device total (what nvidia-smi would show) is
  compared with the GPU's capacity, at the expected value and at the upper end of the bounded unknowns.
* **The largest batch** (``--solve batch-size``, the default): the step is traced at two batch sizes; the
  event stream of a training step does not depend on the batch size and every storage's bytes are affine
  in it (memgraph/sweep.py checks both per storage), so the log at any batch is exact and its peak costs an
  analysis, not a trace. The largest fitting batch is found by doubling then bisecting over those logs,
  then **confirmed by real traces** at the answer and one above. Where the two traces differ
  (data-dependent models), every probe is a real trace.
* **The longest sequence** (``--solve seq-len``): sizes are not affine in the sequence (attention is
  quadratic in eager mode), so it is bisected with real traces, over multiples of ``SEQ_STEP`` tokens.
* **Changes**: each candidate change is applied to your settings alone and analysed for real; the table
  shows its device total, whether it fits, what it saves, and what it costs. The best combination is
  built greedily: apply the change that saves most, re-analyse with every remaining change on top, until
  the step fits with the margin (each step a real analysis).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, fields, replace

from memgraph.api import analyze_traced
from memgraph.errors import MemgraphError
from memgraph.model_spec.defaults import resolve_defaults
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.units import human_bytes

SEQ_STEP = 256  # --solve seq-len answers in multiples of this many tokens (flash/efficient kernels tile by 128)
MAX_BATCH = 1 << 16  # the doubling search stops here: a batch this large is a data-loader question, not memory


@dataclass(frozen=True)
class Candidate:
    """One setting change ``fit`` tries: the TrainingOptions fields it sets and what it costs."""

    name: str
    changes: tuple[tuple[str, object], ...]
    cost: str

    def applies_to(self, opts: TrainingOptions) -> bool:
        """Whether this memgraph has the option and the change is a change for ``opts``."""
        names = {f.name for f in fields(TrainingOptions)}
        if not all(k in names for k, _ in self.changes) or all(getattr(opts, k) == v for k, v in self.changes):
            return False
        try:  # the option exists but this memgraph may not take the value (e.g. an optimizer it lacks)
            self.apply(opts)
        except MemgraphError:
            return False
        return True

    def apply(self, opts: TrainingOptions) -> TrainingOptions:
        return replace(opts, **dict(self.changes))


# The changes users make to fit a step, most common first. Each is applied only where this memgraph
# has the option (Candidate.applies_to) and only when it changes the user's settings.
CANDIDATES = (
    Candidate("gradient checkpointing", (("gradient_checkpointing", True),),
              "recomputes each layer's forward in backward: about a third more compute"),
    Candidate("SDPA attention", (("attn_implementation", "sdpa"),), "none: same math, fused kernel"),
    Candidate("for-loop optimizer step", (("optimizer_impl", "for-loop"),),
              "no multi-tensor temporaries; a slower optimizer step (one kernel per tensor)"),
    Candidate("bf16 autocast", (("precision", "bf16-mixed"),), "low-precision matmuls (needs bf16 hardware)"),
    Candidate("pure bf16 training", (("precision", "bf16"),),
              "bf16 weights and optimizer state: less exact updates; needs bf16 hardware"),
    Candidate("Trainer loop (outputs dropped after the loss)", (("loop", "trainer"),),
              "none: how Hugging Face's Trainer already runs"),
    Candidate("expandable segments", (("allocator_conf", "expandable_segments:True"),),
              "none: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, less fragmentation"),
    Candidate("8-bit AdamW (bitsandbytes)", (("optimizer", "adamw8bit"), ("optimizer_impl", "auto")),
              "block-wise quantised optimizer state; usually the same accuracy"),
    Candidate("optimizer step in backward", (("optimizer_in_backward", True),),
              "per-parameter steps as gradients arrive; no gradient accumulation or clipping over all"),
    Candidate("LoRA rank 16 on all linear layers", (("lora_rank", 16), ("lora_targets", "all-linear")),
              "trains adapters only: a different fine-tuning method"),
    Candidate("QLoRA (4-bit base, LoRA rank 16)", (("lora_rank", 16), ("lora_targets", "all-linear"),
                                                  ("quantize", "4bit")),
              "4-bit frozen base weights: a different fine-tuning method, some quality loss"),
    Candidate("chunked cross-entropy", (("loss", "chunked-ce"),), "none for the result; a little slower"),
    Candidate("activation offloading", (("activation_offload", True),),
              "saved activations in host memory: PCIe traffic every step"),
)


@dataclass
class Outcome:
    """One analysed setting: its device total, upper end, fit, and the analysis behind it."""

    label: str
    options: TrainingOptions
    allocated: int
    device_total: int
    device_total_upper: int
    capacity: int
    fits: bool
    fits_with_margin: bool
    seconds: float
    cost: str = ""
    result: object = None
    changes: tuple = ()

    def as_dict(self) -> dict:
        return {"setting": self.label, "changes": dict(self.changes), "allocated_bytes": self.allocated,
                "required_bytes": self.device_total, "required_bytes_upper": self.device_total_upper,
                "fits": self.fits, "fits_with_margin": self.fits_with_margin, "cost": self.cost}


@dataclass
class FitReport:
    model: str
    gpu: str
    capacity: int
    yours: Outcome
    solve: str
    largest: int | None  # largest batch size (or sequence length) that fits with the margin, None if none
    largest_source: str
    confirmations: list[Outcome] = field(default_factory=list)
    changes: list[Outcome] = field(default_factory=list)
    best: Outcome | None = None
    why: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _outcome(label: str, opts: TrainingOptions, result, seconds: float, cost: str = "", changes=()) -> Outcome:
    d = result.device
    total = d["steady_state_device_total"]
    upper = d.get("steady_state_device_total_upper") or total
    fits = bool(d["fits"])
    return Outcome(label, opts, result.steady_state_peak.bytes, total, max(upper, total), d["capacity_bytes"],
                   fits, bool(d.get("fits_with_margin", fits)) and fits, seconds, cost, result, tuple(changes))


def _analyze(model: str, opts: TrainingOptions, label: str, cost: str = "", changes=()) -> tuple[Outcome, object]:
    start = time.perf_counter()
    result, trace = analyze_traced(model, opts)
    return _outcome(label, opts, result, time.perf_counter() - start, cost, changes), trace


def fit(model: str, opts: TrainingOptions, solve: str = "batch-size", progress=None) -> FitReport:
    """The whole ``memgraph fit`` answer (see the module docstring). ``progress(text)`` is told each step."""
    if opts.target != "cuda":
        raise MemgraphError(f"memgraph fit answers for a GPU: drop --target {opts.target}")
    if solve not in ("batch-size", "seq-len"):
        raise MemgraphError(f"--solve {solve!r}: pass batch-size or seq-len")
    say = progress or (lambda text: None)
    start = time.perf_counter()
    # Every 'auto' resolved first (attention, loop, optimizer implementation), so a change is compared with
    # what your settings really run, and the flags of the best combination are explicit.
    opts = resolve_defaults(resolve(model), opts).options
    say("your settings")
    yours, trace = _analyze(model, opts, "your settings")
    report = FitReport(model, yours.result.device["gpu_name"], yours.capacity, yours, solve, None, "")
    report.why = why_lines(yours)
    if solve == "batch-size":
        _solve_batch(model, opts, yours, trace, report, say)
    else:
        _solve_seq(model, opts, yours, report, say)
    _try_changes(model, opts, yours, report, say)
    report.seconds = time.perf_counter() - start
    return report


# -- the largest batch -----------------------------------------------------------------------------

def _solve_batch(model: str, opts: TrainingOptions, yours: Outcome, trace, report: FitReport, say) -> None:
    from memgraph.sweep import AffineFit, analyze_trace  # the interpolation of memgraph/sweep.py

    spec = resolve(model)
    lo = max(2, opts.batch_size)  # batch 1 can record a different stream (size-1 dims): interpolate from 2 up
    traces = {opts.batch_size: trace}

    def traced(b: int):
        if b not in traces:
            say(f"tracing batch {b}")
            traces[b] = analyze_traced(model, replace(opts, batch_size=b))[1]
        return traces[b]

    hi = 2 * lo
    fit_ = AffineFit.of(traced(lo), lo, traced(hi), hi, [lo, hi])

    def probe(b: int) -> Outcome:
        b_opts = replace(opts, batch_size=b)
        t0 = time.perf_counter()
        if fit_ is not None and b >= lo and fit_.exact_at(b):
            result = analyze_trace(spec, b_opts, fit_.trace_at(b, spec, b_opts))
        else:
            result, _ = analyze_traced(model, b_opts)
        return _outcome(f"batch {b}", b_opts, result, time.perf_counter() - t0)

    report.largest_source = ("interpolated from real traces at batch "
                             f"{lo} and {hi} (memgraph/sweep.py), confirmed by real traces" if fit_ is not None
                             else "real traces at every probe (the stream depends on the batch)")
    good = largest_fitting(lambda b: probe(b).fits_with_margin, opts.batch_size, yours.fits_with_margin,
                           MAX_BATCH, say, "batch")
    report.largest = good or None
    if good:  # confirm with real traces at the answer and one above
        for b in (good, good + 1):
            say(f"confirming batch {b} with a real trace")
            outcome, _ = _analyze(model, replace(opts, batch_size=b), f"batch {b} (traced)")
            report.confirmations.append(outcome)
        if not report.confirmations[0].fits_with_margin or report.confirmations[1].fits_with_margin:
            report.largest_source += "; the confirmation traces disagree, see below"


def largest_fitting(fits, start: int, fits_start: bool, limit: int, say=None, noun: str = "") -> int:
    """The largest n >= 1 with ``fits(n)`` (0 if none), for a ``fits`` that is true up to some n and false
    after: double from ``start`` until it fails (at most ``limit``), then bisect."""
    good, bad = (start, None) if fits_start else (0, start)
    n = start
    while bad is None:
        n *= 2
        if n > limit:
            return limit
        if say:
            say(f"probing {noun} {n}")
        if fits(n):
            good = n
        else:
            bad = n
    while bad - good > 1:
        mid = (good + bad) // 2
        if say:
            say(f"probing {noun} {mid}")
        if fits(mid):
            good = mid
        else:
            bad = mid
    return good


# -- the longest sequence --------------------------------------------------------------------------

def _solve_seq(model: str, opts: TrainingOptions, yours: Outcome, report: FitReport, say) -> None:
    if opts.seq_len is None:
        raise MemgraphError("--solve seq-len starts from a sequence length: pass --seq-len")
    report.largest_source = f"bisected with real traces over multiples of {SEQ_STEP} tokens"

    def fits(s: int) -> bool:
        say(f"tracing sequence {s}")
        try:
            return _analyze(model, replace(opts, seq_len=s), f"seq {s}")[0].fits_with_margin
        except MemgraphError:  # past the model's positions: the answer is below
            return False

    steps = largest_fitting(lambda k: fits(k * SEQ_STEP), max(1, opts.seq_len // SEQ_STEP),
                            yours.fits_with_margin and opts.seq_len % SEQ_STEP == 0, (1 << 21) // SEQ_STEP, None, "")
    good = steps * SEQ_STEP
    report.largest = good or None


# -- setting changes -------------------------------------------------------------------------------

def _try_changes(model: str, opts: TrainingOptions, yours: Outcome, report: FitReport, say) -> None:
    tried: dict[str, Outcome] = {}
    for c in CANDIDATES:
        if not c.applies_to(opts):
            continue
        say(f"trying {c.name}")
        try:
            outcome, _ = _analyze(model, c.apply(opts), c.name, c.cost, c.changes)
        except MemgraphError as e:  # a change this model cannot take (e.g. SDPA unsupported): say so, go on
            outcome = Outcome(c.name, c.apply(opts), 0, 0, 0, yours.capacity, False, False, 0.0,
                              f"not possible here: {e}", None, c.changes)
        tried[c.name] = outcome
    report.changes = sorted(tried.values(), key=lambda o: (o.device_total == 0, o.device_total))
    if yours.fits_with_margin:
        return
    # Greedy combination: the biggest saver first, then every remaining change on top of it, until it fits.
    current, applied = yours, []
    remaining = [o for o in report.changes if o.device_total and o.device_total < yours.device_total]
    while remaining and not current.fits_with_margin:
        best_step = None
        for o in remaining:
            c_opts = replace(current.options, **dict(o.changes))
            say(f"combining: {', '.join([*applied, o.label])}")
            step, _ = _analyze(model, c_opts, " + ".join([*applied, o.label]), changes=(*current.changes, *o.changes))
            if best_step is None or step.device_total < best_step[0].device_total:
                best_step = (step, o)
        step, chosen = best_step
        if step.device_total >= current.device_total:
            break
        current, applied = step, [*applied, chosen.label]
        remaining = [o for o in remaining if o is not chosen]
        if len(applied) >= 4:  # each round is a full set of analyses: stop after four changes
            break
    report.best = current if current is not yours else None


# -- explanations ----------------------------------------------------------------------------------

def why_lines(o: Outcome, count: int = 4) -> list[str]:
    """The peak in plain words and its largest consumers."""
    peak = o.result.steady_state_peak
    where = f"module {peak.module}" if peak.module else "the top level of the step"
    lines = [f"the peak ({human_bytes(peak.bytes)} allocated) is in the {peak.phase} phase of iteration "
             f"{peak.iteration}, in {where}, at {peak.op}"]
    cats = sorted(peak.by_category.items(), key=lambda kv: -kv[1])
    lines.append("alive then: " + ", ".join(f"{k.replace('_', ' ')} {human_bytes(v)}" for k, v in cats if v)[:400])
    for t in peak.top_tensors[:count]:
        shape = "x".join(str(d) for d in t.shape)
        lines.append(f"{human_bytes(t.bytes)}: {t.dtype} [{shape}] {t.category.replace('_', ' ')} from {t.name} "
                     f"in {t.module or 'the top level'}" + (" (held past its last use)" if t.held_past_last_use else ""))
    return lines


# -- rendering -------------------------------------------------------------------------------------

def changed_flags(base: TrainingOptions, changed: TrainingOptions) -> str:
    """The command-line flags that turn ``base`` into ``changed``, e.g. ``--gradient-checkpointing --precision bf16``."""
    from memgraph.model_spec.options import flag_of

    out = []
    for f in fields(TrainingOptions):
        old, new = getattr(base, f.name), getattr(changed, f.name)
        if old == new:
            continue
        flag = flag_of(f).name
        out.append(flag if new is True else f"{flag} {new}")
    return " ".join(out)


def _verdict(o: Outcome) -> str:
    if o.fits_with_margin:
        return "fits"
    if o.fits:
        return f"fits only at the expected value (upper end {human_bytes(o.device_total_upper)})"
    return "does NOT fit"


def render_fit(r: FitReport, fmt: str = "table") -> str:
    if fmt == "json":
        import json

        return json.dumps({
            "model": r.model, "gpu": r.gpu, "capacity_bytes": r.capacity,
            "fits": r.yours.fits, "fits_with_margin": r.yours.fits_with_margin,
            "required_bytes": r.yours.device_total, "required_bytes_upper": r.yours.device_total_upper,
            "options": r.yours.options.to_dict(), "solve": r.solve, "largest": r.largest,
            "largest_source": r.largest_source, "confirmations": [o.as_dict() for o in r.confirmations],
            "changes": [o.as_dict() for o in r.changes],
            "best": None if r.best is None else {**r.best.as_dict(), "flags": changed_flags(r.yours.options, r.best.options)},
            "why": r.why, "seconds": round(r.seconds, 1),
        }, indent=2) + "\n"
    y = r.yours
    noun = "batch size" if r.solve == "batch-size" else "sequence length"
    lines = ["== memgraph fit ==", f"model: {r.model} on {r.gpu} ({human_bytes(r.capacity)})",
             f"your settings: needs {human_bytes(y.device_total)} (up to {human_bytes(y.device_total_upper)}): "
             f"{_verdict(y)}", "", "why the step needs what it needs:"]
    lines += [f"  {w}" for w in r.why]
    lines += ["", f"largest {noun} that fits with the margin: "
              + (str(r.largest) if r.largest else "none, not even 1") + f" ({r.largest_source})"]
    for o in r.confirmations:
        lines.append(f"  {o.label}: needs {human_bytes(o.device_total)} (up to {human_bytes(o.device_total_upper)}): "
                     f"{_verdict(o)}")
    if r.changes:
        from tabulate import tabulate

        rows = []
        for o in r.changes:
            if not o.device_total:
                rows.append([o.label, "-", "-", "-", "-", o.cost])
                continue
            saves = y.device_total - o.device_total
            rows.append([o.label, human_bytes(o.device_total), human_bytes(o.device_total_upper),
                         "yes" if o.fits_with_margin else ("expected only" if o.fits else "no"),
                         human_bytes(saves) if saves > 0 else ("+" + human_bytes(-saves) if saves < 0 else "0 B"),
                         o.cost])
        lines += ["", "== each change applied to your settings (a real prediction each) ==",
                  tabulate(rows, ["change", "device total", "upper end", "fits", "saves", "costs"],
                           disable_numparse=True)]
    if r.best is not None:
        lines += ["", "== best combination found ==",
                  f"{r.best.label}: needs {human_bytes(r.best.device_total)} (up to "
                  f"{human_bytes(r.best.device_total_upper)}): {_verdict(r.best)}",
                  f"  memgraph analyze {r.model} ... {changed_flags(y.options, r.best.options)}"]
    lines += ["", f"({r.seconds:.1f} s)"]
    return "\n".join(lines) + "\n"
