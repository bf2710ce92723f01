"""The model failing while memgraph runs its training step: the user's error, said in one line.

A model's forward (the user's code, transformers' or torch's modules) can refuse the inputs memgraph built from
the options (ViT's "Input image size (300*300) doesn't match model (224*224)", BatchNorm's "Expected more than 1
value per channel when training" for a 1-pixel image, cross-entropy's batch-size mismatch for labels), or do what
a meta trace cannot (``.cuda()`` on a CPU build, ``.numpy()`` of a meta tensor). Any exception raised in the
forward phase, not in memgraph's own code, becomes a :class:`~memgraph.errors.MemgraphError` naming the model, the
phase and module it reached, the exception, and the line of the user's file where it happened. An exception
raised in memgraph's own code stays an internal error (memgraph's bug), as does one in a later phase (backward,
optimizer), which runs memgraph's and torch's code, not the model's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from memgraph.errors import MemgraphError
from memgraph.model_spec.user_code import call_failure, innermost_is_memgraph

# Phases whose code is the model's own (memgraph/trace/training_step.py: forward runs the model and the loss).
MODEL_PHASES = ("forward",)


@contextlib.contextmanager
def model_failures(model: str, where: Callable[[], tuple[str, str, int]]):
    """Re-raise the model's own failure as one line; ``where()``: (phase, module, iteration) at the failure."""
    try:
        yield
    except MemgraphError:
        raise
    except Exception as e:
        refused = _memgraph_refusal(e)
        if refused is not None:  # memgraph's own refusal, wrapped by the code it ran in (Dynamo's BackendCompilerFailed)
            raise MemgraphError(str(refused).split("\n")[0]) from None  # without the notes torch.fx appended
        phase, module, iteration = where()
        if phase not in MODEL_PHASES or innermost_is_memgraph(e):
            raise
        place = f"in module {module!r}" if module else "at the model's top level"
        if isinstance(e, ValueError):  # the model checking its inputs
            raise call_failure(f"{model} refused the inputs memgraph built from your options ({phase} {place}, "
                               f"iteration {iteration})", e,
                               "change the option that sets them (--image-size, --seq-len, --input, ...)") from e
        raise call_failure(f"{model}'s code failed on the meta device ({phase} {place}, iteration {iteration})", e,
                           "the model cannot run on these inputs, or does what a trace on the meta device cannot "
                           "(.cuda(), .numpy(), .item() of a computed value): fix the inputs or the model") from e


def _memgraph_refusal(e: BaseException) -> MemgraphError | None:
    """The MemgraphError that ``e`` was raised from, if any: its ``__cause__`` chain, and the ``inner_exception`` a
    torch.compile backend's failure carries (torch 2.13 torch/_dynamo/exc.py BackendCompilerFailed, public
    attribute of torch's exception; raised ``from None``)."""
    seen = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, MemgraphError):
            return e
        seen.add(id(e))
        e = e.__cause__ or getattr(e, "inner_exception", None)
    return None
