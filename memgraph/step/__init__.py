"""The training step: what runs between "model built" and "peaks read", written once.

Layered below ``trace/`` and ``measure/`` (tests/test_layers.py): ``trace/`` records the step on meta,
``measure/`` runs it on a real device, ``trace/parallel/ranks.py`` builds it per rank; all three call
:func:`build_step` and run :meth:`Step.iteration`, so prediction and measurement run one program.

Interface::

    step = build_step(spec, opts, device, distributed=None, seed=None,          # real runs: a seed
                      constructor_values=None, checkpoint_context_fn=None)      # meta: the trace's emulations
    step.model, step.runner, step.batch, step.optimizer, step.options, ...     # see Step
    step.iteration(set_phase, autocast=..., scaler=..., saved_tensors=...)    # one iteration

Its parts, one module each: ``build.py`` (:class:`Step`, the ``model`` kind's builder), ``kinds.py`` (which
kind of step the options ask for), ``training_step.py`` (the loop: plain / trainer, zero_grad, micro-steps),
``grad_accumulation.py``, ``optimizer_in_backward.py``, ``grad_scaler.py`` (fp16-mixed; its meta form),
``activation_offload.py`` (``save_on_cpu``; its meta form), ``layerdrop.py`` (every layer runs),
``fused_optimizers.py`` (fused optimizers admitted on meta). Gradient checkpointing is set up with the
model (model_spec/checkpointing.py), with the trace's ``checkpoint_context_fn`` when on meta.

A new kind of step (a user's script under ``memgraph run``, a ``torch.compile``'d step, a DeepSpeed engine)
is one more builder with :func:`~memgraph.step.build.build_model_step`'s signature, in a module of its own in
this package, returning a :class:`Step` (a subclass whose ``iteration`` runs its loop where the loop differs),
registered in :data:`~memgraph.step.kinds.STEP_BUILDERS` and chosen by
:func:`~memgraph.step.kinds.step_kind` from the spec and options. Trace and measure then need no change.
"""

from memgraph.step.build import Step
from memgraph.step.kinds import STEP_BUILDERS, build_step, step_kind

__all__ = ["STEP_BUILDERS", "Step", "build_step", "step_kind"]
