"""Which kind of training step the options ask for, and the one function that builds it.

Every kind of step is built by a function of the same signature as
:func:`~memgraph.step.build.build_model_step` that returns a :class:`~memgraph.step.build.Step` (or a
subclass of it whose ``iteration`` runs that kind's loop). Today there is one kind:

``model``: memgraph builds the model of a spec (zoo, config.json, module:function) and runs its own loop
    (step/training_step.py) with the options' accumulation, optimizer-in-backward, offload and LayerDrop.
"""

from __future__ import annotations

from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.step.build import Step, build_model_step

STEP_BUILDERS = {"model": build_model_step}


def step_kind(spec: ModelSpec, opts: TrainingOptions) -> str:
    """The key in :data:`STEP_BUILDERS` of the step ``spec`` with ``opts`` trains with."""
    return "model"


def build_step(spec: ModelSpec, opts: TrainingOptions, device: str, distributed=None, **setup) -> Step:
    """The training step of ``spec`` with ``opts`` on ``device`` (``distributed``: one rank's
    :class:`~memgraph.trace.parallel.distributed.DistributedRun`), built by its kind's builder; ``setup``: the
    builder's keyword arguments (``seed``, ``constructor_values``, ``checkpoint_context_fn``)."""
    return STEP_BUILDERS[step_kind(spec, opts)](spec, opts, device, distributed, **setup)


__all__ = ["STEP_BUILDERS", "build_step", "step_kind"]
