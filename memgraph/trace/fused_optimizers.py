"""Let fused optimizers run on meta, as they run on CUDA.

PyTorch refuses ``fused=True`` for parameters on devices outside
``torch.utils._foreach_utils._get_fused_kernels_supported_devices()`` (torch/optim/optimizer.py
``_check_fused_device``), which does not list meta; and ``aten::_fused_sgd_`` has no meta kernel.
Both kernels update parameters and state in place and allocate nothing, so on meta they are
no-ops once admitted. Active only while tracing.
"""

from __future__ import annotations

import contextlib
from unittest import mock

import torch
import torch.optim.optimizer as optimizer_module

_META_LIB = None


def _register_meta_kernels() -> None:
    """In-place fused kernels without a meta implementation: nothing to compute, nothing to allocate."""
    global _META_LIB
    if _META_LIB is not None:
        return
    _META_LIB = torch.library.Library("aten", "IMPL")
    for overload in ("_fused_sgd_", "_fused_sgd_.tensor_lr"):
        try:
            _META_LIB.impl(overload, lambda *args, **kwargs: None, "Meta")
        except RuntimeError:  # a later torch may ship its own meta kernel
            pass


@contextlib.contextmanager
def fused_on_meta():
    _register_meta_kernels()
    devices = optimizer_module._get_fused_kernels_supported_devices
    with mock.patch.object(optimizer_module, "_get_fused_kernels_supported_devices",
                           lambda: [*devices(), "meta"]):
        yield
