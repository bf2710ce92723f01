"""Optimizer in backward (``--optimizer-in-backward``), as torchtune runs it.

torchtune (torchtune/training/memory.py ``register_optim_in_bwd_hooks``, recipes/full_finetune_single_device.py
with ``optimizer_in_bwd=True``) builds one optimizer per trainable parameter and registers, with
``Tensor.register_post_accumulate_grad_hook`` (torch>=2.1), a hook that runs ``optim_dict[param].step()`` and
``optim_dict[param].zero_grad()`` as soon as that parameter's gradient is accumulated. Each gradient is thus
freed during backward, right after its update: at most a few gradients live at once instead of all of them,
and the optimizer state is touched parameter by parameter. The loop then calls neither ``step`` nor
``zero_grad`` itself.

:class:`OptimizerInBackward` keeps that set of optimizers behind the optimizer interface the training step
uses: its own ``step()`` and ``zero_grad()`` do nothing (the hooks did the work), and ``state`` is the union of
the per-parameter optimizers' states. ``on_grad`` (set by the tracer) is told of each gradient before its step,
so the trace can name it a gradient while it lives.
"""

from __future__ import annotations

from typing import Callable

import torch

from memgraph.model_spec.optimizers import make_optimizer
from memgraph.model_spec.options import TrainingOptions
from memgraph.notes import Note


class OptimizerInBackward:
    """One optimizer per parameter, stepped from the parameter's post-accumulate-grad hook."""

    def __init__(self, name: str, params: list[torch.nn.Parameter], impl: str):
        self.name = name
        self.per_param = {p: make_optimizer(name, [p], impl) for p in params}
        self.on_grad: Callable[[torch.nn.Parameter], None] = lambda p: None
        self.handles = [p.register_post_accumulate_grad_hook(self._step_one) for p in params]

    def _step_one(self, p: torch.nn.Parameter) -> None:
        self.on_grad(p)
        self.per_param[p].step()
        self.per_param[p].zero_grad(set_to_none=True)

    @property
    def state(self) -> dict:
        return {p: opt.state[p] for p, opt in self.per_param.items() if p in opt.state}

    def step(self, closure=None) -> None:  # done in backward, parameter by parameter
        return None

    def zero_grad(self, set_to_none: bool = True) -> None:  # each gradient was dropped after its step
        return None

    def describe(self) -> str:
        # a typed note: the count follows the depth (depth synthesis moves it without a third, notes-only trace)
        return Note("optimizer in backward: {count} {name} optimizers, one per trainable parameter, "
                    "each stepped from the parameter's post-accumulate-grad hook, which then frees the gradient "
                    "(torchtune's register_optim_in_bwd_hooks)", per_layer=("count",), count=len(self.per_param),
                    name=self.name)


def make_step_optimizer(opts: TrainingOptions, params: list[torch.nn.Parameter], impl: str):
    """The optimizer the training step uses: ``opts.optimizer`` over ``params``, or, with
    ``--optimizer-in-backward``, one per parameter stepped in backward."""
    if opts.optimizer_in_backward:
        return OptimizerInBackward(opts.optimizer, params, impl)
    return make_optimizer(opts.optimizer, params, impl)
