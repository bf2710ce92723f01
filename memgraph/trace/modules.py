"""Which module is running, in forward and in backward.

Forward attribution uses global module hooks; backward attribution uses PyTorch's
``ModTracker`` (gradient hooks on module inputs and outputs). The innermost active module
is the one entered most recently that is still active.
"""

from __future__ import annotations

import torch
from torch.distributed._tools.mod_tracker import ModTracker

ROOT = ""  # module path of the model itself (state_dict-style paths are relative to it)


class ModuleStack:
    """Tracks the innermost running module as a state_dict-style path ("model.layers.0.mlp")."""

    def __init__(self, model: torch.nn.Module):
        self._paths = {id(m): name for name, m in model.named_modules()}
        self._tracker = ModTracker()
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

    def __exit__(self, *exc) -> None:
        self._tracker.__exit__(*exc)
        self._tracker.clear_user_hooks()
