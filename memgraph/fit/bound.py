"""A lower bound on the device total of a set of changes, read off your own trace: what ``fit`` need not analyse.

At the optimizer step of a training step every parameter and every gradient of that iteration is allocated at
once (the step reads them all). Their bytes, ``P + G``, are therefore at most the step's allocated peak, which is
at most its reserved memory and its device total. :func:`params_and_grads` reads ``P + G`` from your trace and
returns it only where the trace shows it: the parameters alive from setup to the end and every gradient of the
last iteration alive when its optimizer phase begins (not so with ``--optimizer-in-backward``, whose gradients
die one by one in backward, nor without an optimizer phase: then no bound).

A set of changes leaves ``P + G`` and that moment as they are when each field it changes is one of
:data:`NEUTRAL` (how attention, the loss, checkpointing, offloading, the allocator or the optimizer's kernels run,
and the optimizer's kind, whose state comes on top), or is the precision moved between ones with float32 weights
(:data:`FLOAT32_WEIGHTS`: autocast casts copies; the weights and their gradients stay float32). Then the set
cannot fit where ``P + G`` exceeds the card, and fit/plans.py does not analyse it (llama-3-8b in float32: 32.1 GB
of weights and as much gradient are more than a 40 GB card whatever else changes).
tests/test_fit_bound.py traces each such change on a small model and checks that its ``P + G`` is yours, and
at most its allocated peak.

**With the optimizer state.** The state a previous step made (Adam's ``exp_avg`` and ``exp_avg_sq``) is alive
when the last iteration's step begins, beside ``P + G``: :func:`params_grads_state` reads ``P + G + S``, which
holds for a set that also keeps the optimizer's kind and kernels (:data:`NEUTRAL_WITH_STATE`). fit/plans.py reads
both bounds off your trace and off the trace of each single change of a set, for the set's other changes: with
pure bf16 training (bf16 weights, gradients and state) llama-3-8b's 16 + 16 + 32 GB are more than a 40 GB card,
so pure bf16 + checkpointing or activation offloading is not analysed. Nor is a single change that keeps ``S`` where
``P + G + S`` exceeds the card (fit/candidates.py, :func:`kept_bound`).

**Sharded changes** (FSDP, DeepSpeed ZeRO-2/3 over ``N`` GPUs) keep neither, but each rank still runs your model's
forward on your batch and holds at least a ``1/N`` share of the parameters and of the optimizer state.
:func:`sharded_bound` reads ``A + (P + S) // N`` off your trace, at the moment the last iteration's backward
begins: ``A`` the activations your model's modules saved for backward in that iteration's forward (op-made
storages, not parameters, gradients, optimizer state or autocast copies), ``P`` every parameter, ``S`` the
optimizer state alive then (made by the previous step). In the sharded step at its own backward start the same
``A`` is alive (the same module ops on the same per-rank batch save the same tensors; FSDP2 and DeepSpeed wrap
the modules, not their ops), and so are its parameter shards (FSDP2's padded dim-0 chunks, each at least
``1/N``; ZeRO-2's whole flat group; ZeRO-3's partition) and state shards (each rank's partition of
``exp_avg``/``exp_avg_sq``, ZeRO's fp32 master partition on top). It is used only where the change is the
sharding alone (with an allocator change at most: :data:`SHARDING_ALONE`), and only when your precision is
fp32: with bf16 or fp16 DeepSpeed's engine holds 16-bit weights and runs no autocast, so its activations are not
yours, and under autocast FSDP2 saved fewer bytes than your step (measured on tiny-llama in bf16-mixed: 175,792 B
against 222,896). ``fit`` then reports the change as "cannot fit" with the bound instead of tracing it (llama-3-8b
at 4096 tokens in fp32: 120 GB of saved activations per rank, whatever the sharding). tests/test_fit_sharded.py
traces FSDP over 2, 4, 8 and ZeRO-2/3 over 2, 8 on a small model: each allocated peak is at least its bound.
"""

from __future__ import annotations

from memgraph.model_spec.options import TrainingOptions
from memgraph.trace.record.event_log import Origin, Role

# the fields a sharded change sets, and those that may change beside it with the bound still holding (the allocator's
# configuration and the device total's extras: fit/analyses.py REPLAY_ONLY, read after the trace)
SHARDING = ("nproc", "strategy", "deepspeed")
SHARDING_ALONE = frozenset(SHARDING + ("allocator_conf", "context_bytes", "cuda_version", "module_loading"))

NEUTRAL = frozenset({"attn_implementation", "loop", "loss", "gradient_checkpointing", "checkpoint_every",
                     "checkpoint_impl", "optimizer_impl", "optimizer", "activation_offload", "allocator_conf",
                     "context_bytes", "cuda_version", "module_loading"})
# with the optimizer state S: its kind and its kernels stay too (a fused or for-loop step keeps its own step tensors)
NEUTRAL_WITH_STATE = NEUTRAL - {"optimizer", "optimizer_impl"}
FLOAT32_WEIGHTS = ("fp32", "fp16-mixed", "bf16-mixed")  # model_spec/options.py --precision: float32 weights


def params_and_grads(trace) -> int | None:
    """``P + G`` of ``trace`` (trace/tracer.py ``Trace``) where the trace shows them alive at once (module
    docstring), else None."""
    found = _at_step(trace)
    return found[0] if found is not None else None


def params_grads_state(trace) -> int | None:
    """``P + G + S`` of ``trace``: with the optimizer state alive when the last iteration's step begins (made by
    the previous step; "With the optimizer state" in the module docstring), else None."""
    found = _at_step(trace)
    return found[0] + found[1] if found is not None else None


def _at_step(trace) -> tuple[int, int] | None:
    """``(P + G, S)`` at the start of the last iteration's optimizer phase, or None (module docstring)."""
    log = trace.log
    last, step = _last_iteration_phase(log, "optimizer")
    if step is None:
        return None
    params = [s for s in log.storages if s.origin == Origin.PARAMETER]
    grads = [s for s in log.storages if s.role == Role.GRADIENT and s.iteration == last]
    if not grads or any(s.free_event is not None for s in params):
        return None
    if any(s.alloc_event >= step or (s.free_event is not None and s.free_event < step) for s in grads):
        return None
    state = sum(s.nbytes for s in log.storages if s.role == Role.OPTIMIZER_STATE and s.alloc_event < step
                and (s.free_event is None or s.free_event >= step))
    return sum(s.nbytes for s in params) + sum(s.nbytes for s in grads), state


def _last_iteration_phase(log, phase: str) -> tuple[int | None, int | None]:
    """The last iteration of ``log`` and the event index where its ``phase`` begins (None where it has none)."""
    last = max((it for _, it, _ in log.phase_marks), default=None)
    return last, next((e for e, it, p in log.phase_marks if it == last and p == phase), None)


def _alive(s, event: int) -> bool:
    return s.alloc_event < event and (s.free_event is None or s.free_event >= event)


def sharded_parts(trace) -> tuple[int, int, int] | None:
    """``(A, P, S)`` of ``trace`` (module docstring, "Sharded changes"), or None where the trace has no backward
    or a parameter that does not live from setup to the end."""
    log = trace.log
    last, start = _last_iteration_phase(log, "backward")
    if start is None:
        return None
    params = [s for s in log.storages if s.origin == Origin.PARAMETER]
    if not params or any(s.free_event is not None for s in params):
        return None
    saved = sum(s.nbytes for s in log.storages
                if s.origin == Origin.OP and s.role is None and s.saved_for_backward and s.module
                and s.iteration == last and s.phase == "forward" and _alive(s, start))
    state = sum(s.nbytes for s in log.storages if s.role == Role.OPTIMIZER_STATE and _alive(s, start))
    return saved, sum(s.nbytes for s in params), state


def sharded_bound(parts: tuple[int, int, int] | None, yours: TrainingOptions, changed: TrainingOptions) -> int | None:
    """A lower bound on the allocated peak per rank of ``changed``, a sharded change of ``yours`` (None: none)."""
    if parts is None or yours.nproc != 1 or yours.strategy is not None or yours.deepspeed is not None:
        return None
    n = changed.nproc
    if n < 2 or not (changed.strategy == "fsdp" or changed.deepspeed is not None):
        return None
    if yours.precision != "fp32" or (changed.deepspeed is not None and changed.strategy is not None):
        return None
    if any(getattr(yours, k) != getattr(changed, k) for k in TrainingOptions.__dataclass_fields__
           if k not in SHARDING_ALONE):
        return None
    saved, params, state = parts
    return saved + (params + state) // n


def keeps_params_and_grads(yours: TrainingOptions, changed: TrainingOptions, neutral=NEUTRAL) -> bool:
    """Whether ``changed`` differs from ``yours`` only where ``P + G`` and their moment stay (module docstring)."""
    for name in TrainingOptions.__dataclass_fields__:
        a, b = getattr(yours, name), getattr(changed, name)
        if a == b or name in neutral:
            continue
        if name == "precision" and a in FLOAT32_WEIGHTS and b in FLOAT32_WEIGHTS:
            continue
        return False
    return True


def keeps_state(yours: TrainingOptions, changed: TrainingOptions) -> bool:
    """Whether ``changed`` keeps ``P + G`` and the optimizer state ``S`` too: the optimizer and its kernels as yours."""
    return keeps_params_and_grads(yours, changed, NEUTRAL_WITH_STATE)


def kept_bound(bound: int | None, yours: TrainingOptions, changed: TrainingOptions,
               with_state: int | None = None) -> int | None:
    """The larger of the bounds read off ``yours``' trace that hold for ``changed``: ``with_state`` (``P + G + S``)
    where it keeps the optimizer state too, else ``bound`` (``P + G``) where it keeps them; None: neither holds."""
    if with_state is not None and keeps_state(yours, changed):
        return with_state
    return bound if bound is not None and keeps_params_and_grads(yours, changed) else None


def cannot_fit(bound: int | None, yours: TrainingOptions, changed: TrainingOptions, capacity: int,
               with_state: int | None = None) -> bool:
    """Whether ``changed`` cannot fit ``capacity`` bytes by the bound ``P + G`` (or ``with_state``, ``P + G + S``, where
    it keeps the state too); None: no bound, so it may."""
    return (kept_bound(bound, yours, changed, with_state) or 0) > capacity


__all__ = ["FLOAT32_WEIGHTS", "NEUTRAL", "NEUTRAL_WITH_STATE", "SHARDING_ALONE", "cannot_fit", "keeps_params_and_grads",
           "keeps_state", "kept_bound", "params_and_grads", "params_grads_state", "sharded_bound", "sharded_parts"]
