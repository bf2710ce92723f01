"""A ``TorchFunctionMode`` that sees through torch's Python-level functions.

The emulation modes (autocast, attention kernels) must see the C++ bindings that torch's Python
functions (``F.softmax``, ``F.multi_head_attention_forward``, ``Tensor.backward``, ...) call, not
just the Python function: a plain ``TorchFunctionMode`` sees the outer call only, and the body
then runs with the mode disabled. :class:`TransparentFunctionMode` runs such a body again with
the mode active. It rebuilds the body with its ``has_torch_function*`` checks answering False
(a private detail of torch/overrides.py; see :mod:`memgraph.private_api`).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.overrides import TorchFunctionMode

from memgraph.private_api import body_without_torch_function_checks

PASS = object()  # returned by TransparentFunctionMode.handle: "not mine, run it normally"
# Run as a whole, passed to the modes below: Tensor.__format__ calls no torch function an emulation mode handles,
# and the shadow values' mode below answers it for a 0-d meta tensor with a value (trace/shadow_values.py).
_WHOLE = {torch.Tensor.__format__}
_BODIES: dict = {}  # torch Python function -> its body without torch-function checks (None: not one)


def _python_body(func) -> Callable | None:
    """A copy of a torch Python function whose ``has_torch_function*`` checks answer False (cached).

    Calling it runs the function's body directly (no re-dispatch to the mode), while the torch
    functions the body calls still check for modes and are seen by the active mode.
    """
    try:
        body = _BODIES.get(func, PASS)
    except TypeError:  # unhashable callable
        return None
    if body is PASS:
        body = _BODIES[func] = body_without_torch_function_checks(func)
    return body


class TransparentFunctionMode(TorchFunctionMode):
    """Base of the emulation modes: :meth:`handle` what the mode emulates; run torch's Python-level
    functions (``F.softmax``, ``F.multi_head_attention_forward``, ``Tensor.backward``, ...) with the
    mode still active so the C++ bindings inside them are handled too; pass C++ bindings through.

    A Python function that re-dispatches to the mode while its body runs (a decorated function
    whose check lives in the wrapped function) runs as a whole, without the mode.
    """

    def __init__(self):
        super().__init__()
        self._running: set = set()

    def handle(self, func, args: tuple, kwargs: dict):  # pragma: no cover - overridden
        return PASS

    def __torch_function__(self, func, types_, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = self.handle(func, args, kwargs)
        if out is not PASS:
            return out
        body = None if func in _WHOLE else _python_body(func)
        if body is None or func in self._running:
            return func(*args, **kwargs)
        self._running.add(func)
        try:
            with self:  # re-push: the body's torch calls come back to this mode
                return body(*args, **kwargs)
        finally:
            self._running.discard(func)
