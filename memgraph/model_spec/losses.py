"""The loss the step trains on (``--loss``), and the inputs the model is called with.

Transformers models compute their loss from their labels (``outputs.loss``). ``module:function``
models return what they return, so ``--loss`` says what the step does with it:

- ``auto`` (default): a scalar output, or an output's ``.loss``, is the loss as it is; otherwise
  ``out.sum()`` (:func:`memgraph.model_spec.tasks.loss_from_outputs`).
- ``sum``: ``out.sum()``, what ``logits.sum().backward()`` benchmark scripts do; for a transformers
  model the labels are not passed (so its head computes no loss) and ``out`` is its first output, the logits.
- ``cross-entropy``: ``F.cross_entropy(out, target)``. ``target`` is the ``--input`` named
  ``target`` (int64 class indices, e.g. ``--input target=int64[32]<10``); it is made with the batch
  but not passed to the model. ``out`` has the shape ``F.cross_entropy`` takes: ``[N, C]`` or
  ``[N, C, d1, ...]`` with the target ``[N]`` or ``[N, d1, ...]``.

``out`` is the model's output tensor, or the first element of a tuple or list it returns.
"""

from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F

from memgraph.errors import MemgraphError
from memgraph.model_spec.inputs import Batch
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.model_spec.tasks import loss_from_outputs

TARGET_INPUT = "target"  # the --input that --loss cross-entropy takes as the class indices


def loss_and_model_batch(spec: ModelSpec, opts: TrainingOptions, batch_spec: Batch,
                         batch: tuple[tuple, dict]) -> tuple[Callable[[object], torch.Tensor], tuple[tuple, dict]]:
    """(compute_loss for ``train_iteration``, the (args, kwargs) the model is called with)."""
    if opts.loss == "auto":
        return loss_from_outputs, batch
    if spec.source != "callable":
        if opts.loss == "sum":  # logits.sum().backward(), as benchmark scripts do: the head computes no loss
            args, kwargs = batch
            return sum_loss, (args, {k: v for k, v in kwargs.items() if k != "labels"})
        raise MemgraphError(f"--loss {opts.loss} applies to module:function models; {spec.name} computes its own "
                            "cross-entropy from its labels: drop --loss (or use --loss sum for logits.sum())")
    if opts.loss == "sum":
        return sum_loss, batch
    names = [s.name for s in batch_spec.inputs]
    if TARGET_INPUT not in names:
        raise MemgraphError(f"--loss cross-entropy takes its class indices from an input named {TARGET_INPUT!r}, "
                            f"and none of {', '.join(names)} is: add e.g. --input {TARGET_INPUT}=int64[N]<CLASSES")
    index = names.index(TARGET_INPUT)
    if batch_spec.inputs[index].dtype != torch.int64:
        raise MemgraphError(f"--input {batch_spec.inputs[index].describe()}: the cross-entropy target holds class "
                            f"indices and must be int64: write {TARGET_INPUT}=int64[...]")
    args, kwargs = batch
    target = args[index]
    return (lambda outputs: cross_entropy_loss(outputs, target)), (args[:index] + args[index + 1:], kwargs)


def output_tensor(outputs) -> torch.Tensor:
    """The model's output tensor: the output itself, or the first element of a tuple/list."""
    if hasattr(outputs, "to_tuple"):  # a transformers ModelOutput: its first field that is set (the logits)
        outputs = outputs.to_tuple()
    if isinstance(outputs, (tuple, list)) and outputs:
        outputs = outputs[0]
    if not isinstance(outputs, torch.Tensor):
        raise MemgraphError(f"--loss needs a tensor output, the model returned {type(outputs).__name__}: "
                            "return a tensor (or a tuple whose first element is one), or use --loss auto")
    return outputs


def sum_loss(outputs) -> torch.Tensor:
    return output_tensor(outputs).sum()


def cross_entropy_loss(outputs, target: torch.Tensor) -> torch.Tensor:
    out = output_tensor(outputs)
    if out.dim() < 2 or out.shape[:1] + out.shape[2:] != target.shape:
        raise MemgraphError(f"--loss cross-entropy: output {list(out.shape)} and target {list(target.shape)} do not "
                            "match: F.cross_entropy takes an output [N, C, d1, ...] and a target [N, d1, ...]")
    return F.cross_entropy(out, target)
