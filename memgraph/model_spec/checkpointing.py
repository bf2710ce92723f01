"""Gradient checkpointing as transformers enables it (``--gradient-checkpointing``, ``--checkpoint-impl``,
``--checkpoint-every``).

transformers 5.23 (transformers/modeling_utils.py ``PreTrainedModel._activation_checkpointing_enable``):
``activation_checkpointing_enable(activation_checkpointing_kwargs, every_n_layers)`` stores
``functools.partial(torch.utils.checkpoint.checkpoint, **kwargs)`` on every module with a
``gradient_checkpointing`` attribute, and ``_set_gradient_checkpointing`` turns the flag on for the repeated
``GradientCheckpointingLayer`` blocks whose index ``i`` has ``i % every_n_layers == 0`` (layers 0, K, 2K, ...;
the others run as usual and keep their activations). For models whose ``main_input_name`` is ``input_ids`` it
also calls ``enable_input_require_grads()`` (a forward hook making the embedding output require grad), which
reentrant checkpointing needs: ``CheckpointFunction`` only builds a graph when an input requires grad.

- ``non-reentrant`` (``use_reentrant=False``, transformers' default): torch/utils/checkpoint.py
  ``_checkpoint_without_reentrant_generator``: saved-tensor hooks keep placeholders instead of the block's
  saved tensors, and backward recomputes the block the first time one is unpacked, keeping only what the
  backward reads. A meta trace passes ``context_fn`` so the recompute re-enters memgraph's emulations.
- ``reentrant`` (``use_reentrant=True``): ``CheckpointFunction.forward`` runs the block under ``no_grad`` and
  saves its inputs; ``backward`` detaches them, recomputes the whole block with grad enabled and runs
  ``torch.autograd.backward`` on its outputs inside the node. ``context_fn`` is refused there, so on meta the
  function transformers stores is wrapped: the recompute re-enters the emulation regions that were open at the
  checkpointed forward (:func:`memgraph.private_api.wrap_checkpoint_functions`).
"""

from __future__ import annotations

import inspect

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.private_api import wrap_checkpoint_functions


def enable_checkpointing(model, opts: TrainingOptions, name: str, checkpoint_context_fn=None) -> None:
    """Turn on ``opts``' gradient checkpointing on a transformers ``model`` (module docstring).

    ``checkpoint_context_fn``: a meta trace's ``context_fn`` (autocast_emulation.checkpoint_context_fn): a
    zero-argument function returning (forward context, recompute context)."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        raise MemgraphError(f"{name} does not support gradient checkpointing: drop --gradient-checkpointing")
    reentrant = opts.checkpoint_impl == "reentrant"
    kwargs = {"use_reentrant": reentrant}
    if checkpoint_context_fn is not None and not reentrant:
        kwargs["context_fn"] = checkpoint_context_fn
    enable = getattr(model, "activation_checkpointing_enable", None)  # newer transformers; the old name warns
    if enable is None:
        enable, kwargs_name = model.gradient_checkpointing_enable, "gradient_checkpointing_kwargs"
    else:
        kwargs_name = "activation_checkpointing_kwargs"
    every = {}
    if "every_n_layers" in inspect.signature(enable).parameters:
        every["every_n_layers"] = opts.checkpoint_every
    elif opts.checkpoint_every != 1:  # transformers 5.6: every checkpointable layer, no selection
        raise MemgraphError(f"--checkpoint-every {opts.checkpoint_every}: the installed transformers "
                            f"({_transformers_version()}) checkpoints every layer (no every_n_layers): upgrade "
                            "transformers or drop --checkpoint-every")
    enable(**{kwargs_name: kwargs}, **every)
    if reentrant and checkpoint_context_fn is not None:
        wrap_checkpoint_functions(model, lambda func: _recompute_in_forward_regions(func, checkpoint_context_fn))


def _transformers_version() -> str:
    import transformers

    return transformers.__version__


def _recompute_in_forward_regions(checkpoint_func, context_fn):
    """``checkpoint_func`` (reentrant) whose recompute in backward runs inside the recompute context
    ``context_fn`` gives at the checkpointed forward; the forward itself runs as it is."""

    def checkpointed(function, *args, **kwargs):
        _, recompute_context = context_fn()
        forward_done = []

        def run(*inputs):
            if not forward_done:
                return function(*inputs)
            with recompute_context:
                return function(*inputs)

        out = checkpoint_func(run, *args, **kwargs)
        forward_done.append(True)
        return out

    return checkpointed
