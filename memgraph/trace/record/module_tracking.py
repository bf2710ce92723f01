"""Which module is running, in forward and in backward.

Forward attribution uses global module hooks; backward attribution uses PyTorch's
``ModTracker`` (gradient hooks on module inputs and outputs). The innermost active module
is the one entered most recently that is still active.

ModTracker learns that a module's backward is done from ``register_multi_grad_hook(inputs,
mode="all")``, whose hook closure holds the inputs' ``grad_fn`` nodes while the hook itself is
stored on those nodes: a reference cycle through C++ that Python's collector cannot break.
For a branch that backward never runs (LLaVA computes the vision tower's last layer and uses
layer -2) the cycle keeps the branch's saved activations alive for the rest of the run, which
a plain training loop frees right after forward (measured: +4.8% peak on a tiny LLaVA, growing
every iteration). The tracker here ends a module's backward at the first gradient that reaches
one of its inputs, from a hook that references no autograd node (ModTracker's forward pre-hook is
copied, with that one call made overridable, in :class:`memgraph.private_api.ModTrackerCopy`).
"""

from __future__ import annotations

import torch

from memgraph.private_api import ModTrackerCopy, current_graph_task_id

ROOT = ""  # module path of the model itself (state_dict-style paths are relative to it)


def _after_first_grad(tensors: list[torch.Tensor], fn) -> None:
    """Call ``fn()`` when the first gradient w.r.t. one of ``tensors`` is computed (once per backward).

    The hook references no autograd node, so it cannot keep a graph that never runs alive.
    """
    done: set[int] = set()  # graph tasks in which fn already ran

    def hook(_grad):
        task = current_graph_task_id()
        if task not in done:
            done.clear()  # one backward at a time: forget earlier graph tasks
            done.add(task)
            fn()

    for t in tensors:
        t.register_hook(hook)


class _Tracker(ModTrackerCopy):
    """ModTracker whose end-of-module-backward hook references no autograd node (no cycle, no leak)."""

    def on_backward_end(self, tensors: list[torch.Tensor], fn) -> None:
        _after_first_grad(tensors, fn)


class ModuleStack:
    """Tracks the innermost running module as a state_dict-style path ("model.layers.0.mlp")."""

    def __init__(self, model: torch.nn.Module):
        # nn.Identity runs no op, and returns its input itself: its backward hooks (end on the input's gradient,
        # begin on the output's, the same tensor) fire in the wrong order and would leave it on the stack, taking
        # the attribution of later ops (PEFT's lora_dropout is an nn.Identity when the dropout is 0)
        self._paths = {id(m): name for name, m in model.named_modules() if type(m) is not torch.nn.Identity}
        self._tracker = _Tracker()
        self._active: list[str] = []

    def _push(self, module, *_):
        path = self._paths.get(id(module))
        if path is not None:
            self._active.append(path)

    def _pop(self, module, *_):
        path = self._paths.get(id(module))
        if path is None:
            return
        for i in range(len(self._active) - 1, -1, -1):
            if self._active[i] == path:
                del self._active[i]
                return

    @property
    def current(self) -> str:
        """Innermost module path; ROOT when no module of the model is running."""
        return self._active[-1] if self._active else ROOT

    def reset(self) -> None:
        """Forget stale entries (backward hooks on inputs that need no grad never fire)."""
        self._active.clear()

    def __enter__(self) -> "ModuleStack":
        self._tracker.register_user_hooks(
            pre_fw_hook=self._push,
            post_fw_hook=self._pop,
            pre_bw_hook=self._push,
            post_bw_hook=self._pop,
        )
        self._tracker.__enter__()
        return self

    def enter_from_forward_pre_hook(self, module, args) -> "ModuleStack":
        """Enter while ``module``'s own forward pre-hooks run (``memgraph run`` meets the model there): the tracker
        is also told of ``module``'s forward, whose global pre-hook it was registered too late to get."""
        self.__enter__()
        self._tracker._fw_pre_hook(module, args)
        return self

    def __exit__(self, *exc) -> None:
        self._tracker.__exit__(*exc)
        self._tracker.clear_user_hooks()
