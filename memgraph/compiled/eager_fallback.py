"""A compiled block that Dynamo runs eagerly keeps the trace's torch function modes.

The trace's torch function modes (memgraph's autocast and SDPA-kernel emulations) are popped around every compiled
call (``private_api.torch_function_modes_popped``: Dynamo would trace them into its graph; the backend applies them
to the graphs instead). A frame Dynamo does not compile then runs eagerly with them popped. Past Dynamo's recompile
limit (memgraph/compiled/recompile_limit.py) that is a whole decoder layer: its attention went through SDPA's math
path on meta (the score and probability matrices saved) and without autocast. Measured before this module: Llama
3.2 3B, batch 2, 4096 tokens, bf16, each decoder layer compiled with transformers' KV cache on (``--compile
--compile-blocks``; 8 layers compiled, 20 eager): 119.47 GiB predicted, 93.67 GiB of it the activations of the 20
eager layers; with this module 55.42 GiB (57.92 GiB all eager, 49.17 GiB all compiled with ``--no-kv-cache``).

So in a per-block compile each block's ``forward`` is, for the trace, :func:`block_forward`'s function bound to the
block: while Dynamo traces it, ``torch.compiler.is_compiling()`` (public) is True and it calls the class's
``forward`` alone, so the graph and the guards are those of the real frame (``self`` an argument, as there); when
Dynamo runs the frame eagerly it is False, and the function pushes the popped modes back around the eager call.
All blocks share one code object, as the real blocks share their class's ``forward``: Dynamo keeps its cache and
counts recompilations per code object, so the limit is hit at the same block.
"""

from __future__ import annotations

import contextlib
import types

import torch

from memgraph.private_api import torch_function_modes_pushed

_POPPED: list = []  # the modes the innermost compiled call popped (set by :func:`modes_popped_for_blocks`)


def _forward(self, *args, **kwargs):
    if torch.compiler.is_compiling():
        return type(self).forward(self, *args, **kwargs)
    with torch_function_modes_pushed(list(_POPPED)):  # Dynamo runs this frame eagerly: the emulations back on
        return type(self).forward(self, *args, **kwargs)


def block_forward() -> types.FunctionType:
    """A new function with :func:`_forward`'s body and a code object of its own (one per trace: Dynamo's cache of
    one trace never serves another)."""
    return types.FunctionType(_forward.__code__.replace(), _forward.__globals__, "forward")


@contextlib.contextmanager
def modes_popped_for_blocks(popped: list):
    """Within a compiled call: ``popped`` (the modes it took off the stack) is what an eager block puts back."""
    saved = list(_POPPED)
    _POPPED[:] = popped
    try:
        yield
    finally:
        _POPPED[:] = saved
