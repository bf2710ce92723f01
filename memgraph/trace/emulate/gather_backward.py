"""gather's backward in place, as the real step runs it, where a dispatch mode or meta makes it out of place.

``gather``'s derivative (aten/src/ATen/native/TensorAdvancedIndexing.cpp ``gather_backward``, torch 2.12 and
2.13) is::

    auto result = grad.new_zeros_symint(self.sym_sizes());
    if (areAnyTensorSubclassLike({index, grad})) {
      return result.scatter_add(dim, index, grad);   // out of place
    }
    result.scatter_add_(dim, index, grad);           // in place
    return result;

``areAnyTensorSubclassLike`` (aten/src/ATen/TensorSubclassLikeUtils.h) is true whenever a Python dispatch mode
is active (``c10::impl::dispatch_mode_enabled()``) and for any meta tensor (``BackendComponent::MetaBit``), so
the traced step always takes the first branch: ``scatter_add`` allocates a second tensor of ``self``'s size while
the zeros are still alive, and the trace holds two where the real CPU or CUDA step (plain dense tensors, no
mode) holds one. It shows where the gathered tensor is large: the Inkling models gather from a [1, 64, 16, 512]
float32 tensor (2 MiB), the tiny step's peak was +6.66% / +9.29% over the real CPU allocator's.

:class:`GatherBackwardInPlace` restores the second branch: inside a backward pass (a graph task running, grad
mode off), an ``aten.scatter_add`` whose ``self`` is the tensor the op just before it returned from
``aten.new_zeros`` (the ``result`` above, held by nothing else) runs as ``scatter_add_`` on it, and the op
returns that tensor: what ``gather_backward`` returns in the real step. Any other ``scatter_add`` runs as is.
"""

from __future__ import annotations

import weakref

import torch

from memgraph.private_api import current_graph_task_id

aten = torch.ops.aten


def _in_backward() -> bool:
    return not torch.is_grad_enabled() and current_graph_task_id() != -1


class GatherBackwardInPlace:
    """Watches the ops below the recorder for ``new_zeros`` then ``scatter_add`` on it in a backward pass."""

    def __init__(self):
        self._zeros = None  # weakref to the last op's output when that op was new_zeros in backward
        self.in_place = 0  # scatter_adds run in place (tests)

    def run(self, func, args, kwargs):
        """``scatter_add_`` on the fresh zeros (its result), or None to run ``func`` as is."""
        zeros, self._zeros = self._zeros, None
        if func is not aten.scatter_add.default or zeros is None or kwargs or len(args) != 4:
            return None
        result, _dim, _index, src = args
        if zeros() is not result or not isinstance(src, torch.Tensor) or src.dtype != result.dtype \
                or not _in_backward():
            return None
        self.in_place += 1
        return aten.scatter_add_.default(*args)

    def saw(self, func, out) -> None:
        """Note ``func``'s output: the zeros ``gather_backward`` makes, when it is ``new_zeros`` in backward."""
        if func is aten.new_zeros.default and isinstance(out, torch.Tensor) and _in_backward():
            self._zeros = weakref.ref(out)


__all__ = ["GatherBackwardInPlace"]
