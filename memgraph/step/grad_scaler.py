"""``torch.amp.GradScaler`` for a meta-device trace.

A real ``torch.amp.GradScaler("cuda")`` on a CPU-only build disables itself ("CUDA is not
available"), and on meta its ``step`` would fail on ``.item()`` (the data-dependent "were there
inf/NaN gradients?" check in ``_maybe_opt_step``). :class:`MetaGradScaler` is PyTorch's own
GradScaler running on the ``meta`` device, so it makes exactly the allocations the CUDA one makes:

* ``scale(loss)``: lazily the float32 ``_scale`` and int32 ``_growth_tracker`` 0-dim tensors (kept
  for the whole run), then ``loss * _scale`` (the scaled loss backward starts from);
* ``step`` -> ``unscale_``: ``_scale.double().reciprocal().float()`` (inv_scale), a ``found_inf``
  0-dim tensor, one per-device copy of each (``_MultiDeviceReplicator``), and the in-place
  ``torch._amp_foreach_non_finite_check_and_unscale_`` over the gradients (it has a meta kernel);
  fused optimizers (``_step_supports_amp_scaling``) get ``grad_scale``/``found_inf`` instead;
* ``update``: ``torch._amp_update_scale_`` in place, then the per-device found_inf tensors are
  released.

Only the check is replaced: the emulation assumes finite gradients, so every iteration steps (the
usual case, and the one that allocates more: a skipped step creates no optimizer temporaries).
"""

from __future__ import annotations

import warnings

import torch

from memgraph.private_api import GradScalerAssumingFiniteGrads


class MetaGradScaler(GradScalerAssumingFiniteGrads):
    """``torch.amp.GradScaler`` on ``device`` (default ``meta``) that assumes no inf/NaN gradients.

    GradScaler's ``_maybe_opt_step`` checks ``sum(v.item() for v in found_inf_per_device.values())``;
    a meta tensor has no value, so the parent class (:mod:`memgraph.private_api`) takes the branch
    of finite gradients."""

    def __init__(self, device: str = "meta", **kwargs):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            super().__init__(device=device, **kwargs)


def make_scaler(precision: str, device: str):
    """The GradScaler a ``precision`` trains with on ``device``: fp16-mixed needs one, the others none.

    ``cuda``: PyTorch's ``torch.amp.GradScaler("cuda")``; ``meta``: :class:`MetaGradScaler`.
    """
    if precision != "fp16-mixed":
        return None
    if torch.device(device).type == "meta":
        return MetaGradScaler("meta")
    return torch.amp.GradScaler(torch.device(device).type)


__all__ = ["MetaGradScaler", "make_scaler"]
