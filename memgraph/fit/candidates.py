"""The setting changes ``memgraph fit`` tries, each a real analysis of your settings with that change, and the
best combination of them.

Each change names the TrainingOptions fields it sets, what it costs in plain words, and a **tier**, the kind
of price it asks: 0 nothing (the same computation), 1 compute or time, 2 numerical precision, 3 another
fine-tuning method, 4 more GPUs. The best combination takes the changes cheapest tier first and, within a
tier, the one that saves most on its own first, keeps each only if the re-analysed step needs less than
without it (so a change that saves nothing alone can still be taken once others have moved the peak), and
stops as soon as the step fits with the margin: a plan that asks for no more than it needs to.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from memgraph.errors import MemgraphError
from memgraph.fit.analyses import Analyses
from memgraph.fit.outcome import Outcome, failed
from memgraph.fit.progress import FitProgress
from memgraph.model_spec.options import TrainingOptions
from memgraph.units import human_bytes

FREE, COMPUTE, PRECISION, METHOD, HARDWARE = range(5)
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
    Candidate("chunked cross-entropy", (("loss", "chunked-ce"),), "none for the result; a little slower"),
    Candidate("gradient checkpointing", (("gradient_checkpointing", True),),
              "recomputes each layer's forward in backward: about a third more compute", COMPUTE),
    Candidate("selective checkpointing (every 2nd layer)", (("gradient_checkpointing", True), ("checkpoint_every", 2)),
              "recomputes every 2nd layer's forward: about a sixth more compute", COMPUTE),
    Candidate("activation offloading", (("activation_offload", True),),
              "saved activations in host memory: PCIe traffic every step", COMPUTE),
    Candidate("for-loop optimizer step", (("optimizer_impl", "for-loop"),),
              "no multi-tensor temporaries; a slower optimizer step (one kernel per tensor)", COMPUTE),
    Candidate("optimizer step in backward", (("optimizer_in_backward", True),),
              "per-parameter steps as gradients arrive; no gradient accumulation or clipping over all", COMPUTE),
    Candidate("bf16 autocast", (("precision", "bf16-mixed"),), "low-precision matmuls (needs bf16 hardware)",
              PRECISION),
    Candidate("pure bf16 training", (("precision", "bf16"),),
              "bf16 weights and optimizer state: less exact updates; needs bf16 hardware", PRECISION),
    Candidate("8-bit AdamW (bitsandbytes)", (("optimizer", "adamw8bit"), ("optimizer_impl", "auto")),
              "block-wise quantised optimizer state; usually the same accuracy", PRECISION),
    Candidate("LoRA rank 16 on all linear layers", (("lora_rank", 16), ("lora_targets", "all-linear")),
              "trains adapters only: a different fine-tuning method", METHOD),
    Candidate("QLoRA (4-bit base, LoRA rank 16)", (("lora_rank", 16), ("lora_targets", "all-linear"),
                                                  ("quantize", "4bit")),
              "4-bit frozen base weights: a different fine-tuning method, some quality loss", METHOD),
)


def fsdp(n: int) -> Candidate:
    """FSDP2 over ``n`` GPUs (``--nproc n --strategy fsdp``), the step per rank."""
    return Candidate(f"FSDP over {n} GPUs", (("nproc", n), ("strategy", "fsdp")),
                     f"needs {n} GPUs; communication: an all-gather and a reduce-scatter per layer each step",
                     HARDWARE)


def try_changes(analyses: Analyses, opts: TrainingOptions, yours: Outcome, progress: FitProgress) -> list[Outcome]:
    """Each applicable change analysed on your settings, ranked by device total (refused ones last)."""
    todo = [c for c in CANDIDATES if c.applies_to(opts)]
    with_fsdp = not yours.fits_with_margin and opts.strategy is None and fsdp(2).applies_to(opts)
    total = len(todo) + with_fsdp
    jobs = [(c.apply(opts), c.name, c.cost, c.changes) for c in todo]  # applies_to: apply() succeeds
    if with_fsdp:  # the first FSDP size tried (_smallest_fsdp) traces alongside
        big = fsdp(max(FSDP_WORLD_SIZES))
        jobs.append((big.apply(opts), big.name, big.cost, big.changes))
    progress.stage(f"{len(jobs)} changes, analysed in parallel")
    analyses.prefetch(jobs)
    tried = []
    for i, c in enumerate(todo, 1):
        progress.stage(f"[{i}/{total}] {c.name}")
        tried.append(_try(analyses, c, opts, yours.capacity))
        progress.done(f"[{i}/{total}] {tried[-1].label}: {summary(tried[-1])}")
    if with_fsdp:
        tried.append(_smallest_fsdp(analyses, opts, yours.capacity, progress))
        progress.done(f"[{total}/{total}] {tried[-1].label}: {summary(tried[-1])}")
    return sorted(tried, key=lambda o: (o.how == "failed", o.device_total))


def _try(analyses: Analyses, c: Candidate, opts: TrainingOptions, capacity: int) -> Outcome:
    changed = c.apply(opts)
    try:
        return analyses.outcome(changed, c.name, c.cost, c.changes)
    except MemgraphError as e:  # a change this model cannot take (e.g. SDPA unsupported): say so, go on
        return failed(c.name, changed, capacity, str(e), c.changes)


def _smallest_fsdp(analyses: Analyses, opts: TrainingOptions, capacity: int, progress: FitProgress) -> Outcome:
    """FSDP over the fewest GPUs of :data:`FSDP_WORLD_SIZES` that fits: the largest first (one analysis when
    even it does not fit), then halving while it still fits."""
    sizes = sorted(FSDP_WORLD_SIZES, reverse=True)
    best = None
    for n in sizes:
        progress.stage(f"FSDP over {n} GPUs")
        o = _try(analyses, fsdp(n), opts, capacity)
        if best is None or o.fits_with_margin:
            best = o
        if not o.fits_with_margin:
            break
    return best


def summary(o: Outcome) -> str:
    """``38.20 GiB, fits (4.1 s, traced)``: one analysis in a line."""
    if o.how == "failed":
        return o.cost
    verdict = "fits" if o.fits_with_margin else "does not fit"
    return f"{human_bytes(o.device_total)}, {verdict} ({o.seconds:.1f} s, {o.how})"


def best_combination(analyses: Analyses, yours: Outcome, changes: list[Outcome],
                     progress: FitProgress) -> tuple[Outcome | None, list[str]]:
    """The changes combined (see the module docstring): the combined outcome (None if no change helps) and
    one line per change considered."""
    tier = {c.name: c.tier for c in CANDIDATES}
    # every change analysed, not only those that save on their own: optimizer-in-backward saves nothing while
    # activations make the peak, and the gradients it frees once checkpointing has removed them
    savers = [o for o in changes if o.how != "failed"]
    savers.sort(key=lambda o: (tier.get(o.label, HARDWARE), o.device_total))
    current, applied, steps = yours, [], []
    for o in savers:
        if current.fits_with_margin:
            break
        taken = {k for k, _ in current.changes}
        if any(k in taken for k, _ in o.changes):
            continue  # another value of an option already chosen (pure bf16 after bf16 autocast, QLoRA after LoRA)
        label = " + ".join([*applied, o.label])
        progress.stage(f"combining: {label}")
        try:
            step = analyses.outcome(replace(current.options, **dict(o.changes)), label,
                                    changes=(*current.changes, *o.changes))
        except MemgraphError as e:
            steps.append(f"{o.label}: not with the changes before it ({e})")
            continue
        if step.device_total >= current.device_total:
            steps.append(f"{o.label}: saves nothing on top, left out")
            continue
        steps.append(f"+ {o.label}: {summary(step)}")
        progress.done(f"combination {steps[-1]}")
        current, applied = step, [*applied, o.label]
    return (current if current is not yours else None), steps
