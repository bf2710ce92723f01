"""Let fused optimizers run on meta, as they run on CUDA.

PyTorch refuses ``fused=True`` for parameters on devices outside
``torch.utils._foreach_utils._get_fused_kernels_supported_devices()`` (torch/optim/optimizer.py
``_device_dtype_check_for_fused``), which does not list meta; and ``aten::_fused_sgd_`` has no meta
kernel. Both kernels update parameters and state in place and allocate nothing, so on meta they are
no-ops once admitted. Active only while tracing: both patches are undone when the context exits
(:mod:`memgraph.private_api`: ``fused_kernels_also_on``, ``noop_meta_kernels``).
"""

from __future__ import annotations

import contextlib

from memgraph.private_api import fused_kernels_also_on, noop_meta_kernels


@contextlib.contextmanager
def fused_on_meta():
    """While open, fused optimizers accept meta parameters and ``_fused_sgd_`` runs on meta."""
    with noop_meta_kernels(), fused_kernels_also_on("meta"):
        yield
