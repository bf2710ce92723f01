"""The setting changes ``memgraph fit`` tries, each a real analysis of your settings with that one change, or the
lower bound of fit/bound.py where it already exceeds the card (not analysed).

Each change names the TrainingOptions fields it sets, what it costs in plain words, and a **tier**, the kind
of price it asks: 0 nothing (the same computation), 1 compute or time, 2 numerical precision, 3 another
fine-tuning method, 4 more GPUs. Within a tier, :data:`CANDIDATES` lists the changes cheapest first (a
judgement of speed and quality, stated in each ``cost``): fit/plans.py ranks sets of changes by that order.
A change is tried only where it changes your settings (:meth:`Candidate.applies_to`), so what you already
run is never offered.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from memgraph.errors import MemgraphError
from memgraph.fit.analyses import Analyses, trace_key
from memgraph.fit.bound import kept_bound, params_grads_state, sharded_bound, sharded_parts
from memgraph.fit.outcome import BOUND_HOW, Outcome, failed, ruled_out
from memgraph.fit.progress import FitProgress
from memgraph.fit.zero import zero_changes
from memgraph.model_spec.options import TrainingOptions
from memgraph.units import human_bytes

FREE, COMPUTE, PRECISION, METHOD, HARDWARE = range(5)
# Options that name a fine-tuning method: a change is not offered to a user who already runs that method
METHOD_OPTIONS = ("lora_rank", "quantize")
FSDP_WORLD_SIZES = (2, 4, 8)  # one node's GPUs; the smallest that fits is chosen (memgraph/trace/parallel/distributed.py)


@dataclass(frozen=True)
class Candidate:
    """One setting change ``fit`` tries: the TrainingOptions fields it sets and what it costs."""

    name: str
    changes: tuple[tuple[str, object], ...]
    cost: str
    tier: int = FREE

    def applies_to(self, opts: TrainingOptions) -> bool:
        """Whether this memgraph has the option and the change is a change for ``opts``."""
        names = {f.name for f in fields(TrainingOptions)}
        if not all(k in names for k, _ in self.changes) or all(getattr(opts, k) == v for k, v in self.changes):
            return False
        if any(getattr(opts, k) is not None for k, _ in self.changes if k in METHOD_OPTIONS):
            return False  # you already run LoRA / a quantised base: another rank or targets is not a memory fix
        try:  # the option exists but this memgraph may not take the value (e.g. an optimizer it lacks)
            self.apply(opts)
        except MemgraphError:
            return False
        return True

    def apply(self, opts: TrainingOptions) -> TrainingOptions:
        return replace(opts, **dict(self.changes))


# The changes users make to fit a step. Each is applied only where this memgraph has the option
# (Candidate.applies_to) and only when it changes the user's settings.
CANDIDATES = (
    Candidate("SDPA attention", (("attn_implementation", "sdpa"),), "none: same math, fused kernel"),
    Candidate("Trainer loop (outputs dropped after the loss)", (("loop", "trainer"),),
              "none: how Hugging Face's Trainer already runs"),
    Candidate("expandable segments", (("allocator_conf", "expandable_segments:True"),),
              "none: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, less fragmentation"),
    Candidate("FSDP mixed precision", (("fsdp_mixed_precision", True),),
              "none: FSDP2 gathers and computes in bf16 instead of autocast casting every weight "
              "(accelerate's FSDP plugin with mixed_precision bf16)"),
    Candidate("chunked cross-entropy", (("loss", "chunked-ce"),), "none for the result; a little slower"),
    Candidate("selective checkpointing (every 2nd layer)", (("gradient_checkpointing", True), ("checkpoint_every", 2)),
              "recomputes every 2nd layer's forward: about a sixth more compute", COMPUTE),
    Candidate("gradient checkpointing", (("gradient_checkpointing", True),),
              "recomputes each layer's forward in backward: about a third more compute", COMPUTE),
    Candidate("for-loop optimizer step", (("optimizer_impl", "for-loop"),),
              "no multi-tensor temporaries; a slower optimizer step (one kernel per tensor)", COMPUTE),
    Candidate("optimizer step in backward", (("optimizer_in_backward", True),),
              "per-parameter steps as gradients arrive; no gradient accumulation or clipping over all", COMPUTE),
    Candidate("activation offloading", (("activation_offload", True),),
              "saved activations in host memory: PCIe traffic every step, slower than checkpointing where "
              "the link is the bottleneck", COMPUTE),
    Candidate("bf16 autocast", (("precision", "bf16-mixed"),), "low-precision matmuls (needs bf16 hardware)",
              PRECISION),
    Candidate("8-bit AdamW (bitsandbytes)", (("optimizer", "adamw8bit"), ("optimizer_impl", "auto")),
              "block-wise quantised optimizer state; usually the same accuracy", PRECISION),
    Candidate("pure bf16 training", (("precision", "bf16"),),
              "bf16 weights and optimizer state: less exact updates; needs bf16 hardware", PRECISION),
    Candidate("LoRA rank 16 on all linear layers", (("lora_rank", 16), ("lora_targets", "all-linear")),
              "trains adapters only: a different fine-tuning method", METHOD),
    # QLoRA as its recipes run it (the QLoRA paper's and PEFT's examples): bf16 compute dtype, which is also
    # the only precision memgraph models with --quantize 4bit (model_spec/options.py)
    Candidate("QLoRA (4-bit base, LoRA rank 16, bf16)", (("lora_rank", 16), ("lora_targets", "all-linear"),
                                                        ("quantize", "4bit"), ("precision", "bf16")),
              "4-bit frozen base weights: a different fine-tuning method, some quality loss", METHOD),
)


def fsdp(n: int) -> Candidate:
    """FSDP2 over ``n`` GPUs (``--nproc n --strategy fsdp``), the step per rank."""
    return Candidate(f"FSDP over {n} GPUs", (("nproc", n), ("strategy", "fsdp")),
                     f"needs {n} GPUs; communication: an all-gather and a reduce-scatter per layer each step",
                     HARDWARE)


def zero_candidates(opts: TrainingOptions, sizes: list[int], yours: Outcome) -> list[Candidate]:
    """DeepSpeed ZeRO-2/3 over the most of ``sizes`` GPUs (fit/zero.py) when your settings do not fit."""
    if yours.fits_with_margin:
        return []
    offered = [Candidate(name, changes, cost, HARDWARE) for name, changes, cost in zero_changes(opts, sizes)]
    return [c for c in offered if c.applies_to(opts)]


def try_changes(analyses: Analyses, opts: TrainingOptions, yours: Outcome, progress: FitProgress,
                max_gpus: int = max(FSDP_WORLD_SIZES)) -> list[Outcome]:
    """Each applicable change analysed on your settings, ranked by device total (those a bound ruled out
    next, refused ones last); FSDP and
    DeepSpeed ZeRO-2/3 (fit/zero.py) over at most ``max_gpus`` GPUs (``fit --max-gpus``)."""
    sizes = [n for n in FSDP_WORLD_SIZES if n <= max_gpus]
    todo = [c for c in CANDIDATES if c.applies_to(opts)] + zero_candidates(opts, sizes, yours)
    with_fsdp = bool(sizes) and not yours.fits_with_margin and opts.strategy is None and fsdp(2).applies_to(opts)
    total = len(todo) + with_fsdp
    # changes that cannot fit by a bound read off your trace (fit/bound.py: sharded_bound, kept_bound) are not analysed
    bound = _SharedBound(analyses, opts, yours.capacity)
    jobs = [(c.apply(opts), c.name, c.cost, c.changes) for c in todo  # applies_to: apply() succeeds
            if bound.of(c.apply(opts)) is None]
    if with_fsdp and bound.of(fsdp(max(sizes)).apply(opts)) is None:  # the first FSDP size tried traces alongside
        big = fsdp(max(sizes))
        jobs.append((big.apply(opts), big.name, big.cost, big.changes))
    progress.stage(f"{len(jobs)} changes, analysed in parallel")
    analyses.prefetch(jobs)
    tried = []
    for i, c in enumerate(todo, 1):
        progress.stage(f"[{i}/{total}] {c.name}")
        tried.append(_try(analyses, c, opts, yours.capacity, bound))
        progress.done(f"[{i}/{total}] {tried[-1].label}: {summary(tried[-1])}")
    if with_fsdp:
        tried.append(_smallest_fsdp(analyses, opts, yours.capacity, progress, sizes, bound))
        progress.done(f"[{total}/{total}] {tried[-1].label}: {summary(tried[-1])}")
    return _ranked(tried)


def _ranked(tried: list[Outcome]) -> list[Outcome]:
    return sorted(tried, key=lambda o: (o.how == "failed", o.how == BOUND_HOW, o.device_total))  # bounds after


def analysed_where_known(analyses: Analyses, tried: list[Outcome]) -> list[Outcome]:
    """``tried`` with each change a bound ruled out replaced by its analysis where fit/plans.py made one (for a set of
    changes it chose that holds the change), ranked again."""
    return _ranked([analyses.outcome(o.options, o.label, o.cost, o.changes)
                    if o.how == BOUND_HOW and analyses.analysed(o.options) else o for o in tried])


class _SharedBound:
    """The lower bounds of fit/bound.py read off your trace, where one rules a single change out: the sharded bound
    (FSDP, ZeRO over N), and ``P + G + S`` for a change that keeps the parameters, gradients and optimizer state
    (``kept_bound``). ``P + G`` alone is not used for a single change: the bound stands for its device total in the
    plans' estimates (fit/plans.py), and without the state it is too far below (llama-2-7b in bf16-mixed on 24 GB:
    53.9 GB for 8-bit AdamW, 85.9 GB analysed; for the for-loop step, 134.6 GB, more than your step), so the plans
    analysed other sets than with the figures. A change the trace does not read (fit/analyses.py REPLAY_ONLY) is
    replayed on your trace: a real figure, no trace saved."""

    def __init__(self, analyses: Analyses, opts: TrainingOptions, capacity: int):
        trace = getattr(analyses, "traces", {}).get(trace_key(opts))
        self.parts = sharded_parts(trace) if trace is not None else None
        self.with_state = params_grads_state(trace) if trace is not None else None
        self.opts, self.capacity = opts, capacity

    def of(self, changed: TrainingOptions) -> int | None:
        """The bound of ``changed`` where it exceeds the card, else None (analyse it)."""
        b = sharded_bound(self.parts, self.opts, changed)
        if b is None and trace_key(changed) != trace_key(self.opts):
            b = kept_bound(None, self.opts, changed, self.with_state)
        return b if b is not None and b > self.capacity else None


def _try(analyses: Analyses, c: Candidate, opts: TrainingOptions, capacity: int,
         bound: _SharedBound | None = None) -> Outcome:
    changed = c.apply(opts)
    ruled = bound.of(changed) if bound is not None else None
    if ruled is not None:
        return ruled_out(c.name, changed, ruled, capacity, c.cost, c.changes)
    try:
        return analyses.outcome(changed, c.name, c.cost, c.changes)
    except MemgraphError as e:  # a change this model cannot take (e.g. SDPA unsupported): say so, go on
        return failed(c.name, changed, capacity, str(e), c.changes)


def _smallest_fsdp(analyses: Analyses, opts: TrainingOptions, capacity: int, progress: FitProgress,
                   sizes: list[int], bound: _SharedBound | None = None) -> Outcome:
    """FSDP over the fewest GPUs of ``sizes`` that fits: the largest first (one analysis when even it does not
    fit, none when the bound rules it out), then halving while it still fits (a size the bound rules out ends it
    unanalysed: fewer GPUs hold larger shards)."""
    best = None
    for n in sorted(sizes, reverse=True):
        progress.stage(f"FSDP over {n} GPUs")
        o = _try(analyses, fsdp(n), opts, capacity, bound)
        if best is None or o.fits_with_margin:
            best = o
        if not o.fits_with_margin:
            break
    return best


def summary(o: Outcome) -> str:
    """``38.20 GiB, fits (4.1 s, traced)``: one analysis in a line."""
    if o.how == "failed":
        return o.cost
    if o.how == BOUND_HOW:
        return f"at least {human_bytes(o.device_total)}, does not fit (not analysed: fit/bound.py)"
    verdict = "fits" if o.fits_with_margin else "does not fit"
    return f"{human_bytes(o.device_total)}, {verdict} ({o.seconds:.1f} s, {o.how})"
