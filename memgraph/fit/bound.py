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
cannot fit where ``P + G`` exceeds the card, and fit/plans.py does not analyse it (llama-3-8b in float32:
32.1 GB of weights and as much gradient are more than a 40 GB card whatever else changes).
tests/test_fit_bound.py traces each such change on a small model and checks that its ``P + G`` is yours, and
at most its allocated peak.
"""

from __future__ import annotations

from memgraph.model_spec.options import TrainingOptions
from memgraph.trace.record.event_log import Origin, Role

NEUTRAL = frozenset({"attn_implementation", "loop", "loss", "gradient_checkpointing", "checkpoint_every",
                     "checkpoint_impl", "optimizer_impl", "optimizer", "activation_offload", "allocator_conf",
                     "context_bytes", "cuda_version", "module_loading"})
FLOAT32_WEIGHTS = ("fp32", "fp16-mixed", "bf16-mixed")  # model_spec/options.py --precision: float32 weights


def params_and_grads(trace) -> int | None:
    """``P + G`` of ``trace`` (trace/tracer.py ``Trace``) where the trace shows them alive at once (module
    docstring), else None."""
    log = trace.log
    last = max((it for _, it, _ in log.phase_marks), default=None)
    step = next((e for e, it, phase in log.phase_marks if it == last and phase == "optimizer"), None)
    if step is None:
        return None
    params = [s for s in log.storages if s.origin == Origin.PARAMETER]
    grads = [s for s in log.storages if s.role == Role.GRADIENT and s.iteration == last]
    if not grads or any(s.free_event is not None for s in params):
        return None
    if any(s.alloc_event >= step or (s.free_event is not None and s.free_event < step) for s in grads):
        return None
    return sum(s.nbytes for s in params) + sum(s.nbytes for s in grads)


def keeps_params_and_grads(yours: TrainingOptions, changed: TrainingOptions) -> bool:
    """Whether ``changed`` differs from ``yours`` only where ``P + G`` and their moment stay (module docstring)."""
    for name in TrainingOptions.__dataclass_fields__:
        a, b = getattr(yours, name), getattr(changed, name)
        if a == b or name in NEUTRAL:
            continue
        if name == "precision" and a in FLOAT32_WEIGHTS and b in FLOAT32_WEIGHTS:
            continue
        return False
    return True


def cannot_fit(bound: int | None, yours: TrainingOptions, changed: TrainingOptions, capacity: int) -> bool:
    """Whether ``changed`` cannot fit ``capacity`` bytes by the bound (None: no bound, so it may)."""
    return bound is not None and bound > capacity and keeps_params_and_grads(yours, changed)


__all__ = ["FLOAT32_WEIGHTS", "NEUTRAL", "cannot_fit", "keeps_params_and_grads", "params_and_grads"]
