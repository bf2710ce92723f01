"""Gradient accumulation (``--grad-accum N``): N micro-steps of forward and backward, one optimizer step
(the loop itself is ``train_iteration``'s, with ``micro_steps``).

The loop is the one Hugging Face's Trainer and the PyTorch recipes write
(transformers/trainer.py ``training_step``: ``loss = loss / self.args.gradient_accumulation_steps`` before
``backward``; the optimizer steps once every N micro-batches)::

    for micro in range(N):
        outputs = model(**batch)
        loss = compute_loss(outputs) / N
        loss.backward()            # micro-steps 2..N: AccumulateGrad adds into the existing .grad
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)

Each micro-batch is the same ``--batch-size`` batch. With ``--loop plain`` the Python variables ``outputs``
and ``loss`` keep the previous micro-step's outputs alive until the next forward returns and rebinds them,
as in any such loop; ``--loop trainer`` drops them once the loss is taken (see training_step.py).
Mixed precision and the GradScaler are used as in ``train_iteration``: ``scaler.scale(loss).backward()``
per micro-step, one ``scaler.step``/``update``.
"""

from __future__ import annotations

from functools import partial

from memgraph.model_spec.options import TrainingOptions
from memgraph.step.training_step import train_iteration


def iteration_function(opts: TrainingOptions):
    """``train_iteration`` (training_step.py), with ``micro_steps=N`` for ``--grad-accum N > 1``."""
    if opts.grad_accum == 1:
        return train_iteration
    return partial(train_iteration, micro_steps=opts.grad_accum)
