"""Optimizers by name, with the kernel implementation PyTorch would pick on the target.

PyTorch's default (torch/optim/optimizer.py ``_default_to_fused_or_foreach``) is the foreach
implementation when every parameter is a CUDA tensor and the per-parameter for-loop
otherwise. On ``meta`` it would pick the for-loop, so the target decides explicitly.

Besides PyTorch's SGD, Adam and AdamW:

``sgd-nesterov``
    ``torch.optim.SGD(momentum=0.9, nesterov=True)``: one momentum buffer per parameter, and the
    for-loop's ``grad.add(buf, alpha=momentum)`` temporary (torch/optim/sgd.py ``_single_tensor_sgd``).
``adafactor``
    ``torch.optim.Adafactor`` (torch>=2.5, torch/optim/_adafactor.py), not transformers' own Adafactor
    (transformers/optimization.py, which keeps 1-D row/column vectors and, with ``beta1``, an exp_avg):
    a parameter of >= 2 dims keeps the factored second moment ``row_var`` [..., R, 1] and ``col_var``
    [..., 1, C]; a vector keeps a full ``variance``. Its step reads three scalars with ``.item()``
    (the step count, on the CPU; ``param.norm(2)`` and ``update.norm(2)``, on the parameter's device),
    which meta cannot answer: :class:`_MetaScalars` answers them with 1.0, which sets step sizes only.
``lion``
    no PyTorch built-in: lucidrains/lion-pytorch's ``Lion`` (lion_pytorch/lion_pytorch.py ``update_fn``),
    written out in :class:`Lion`: state is one ``exp_avg`` per parameter.
``adam8bit``, ``adamw8bit``, ``paged-adamw8bit``
    bitsandbytes' 8-bit blockwise Adam. Its CUDA kernels have no meta implementation, so on meta
    :class:`memgraph.model_spec.bnb_optimizers.EmulatedAdam8bit` allocates what bitsandbytes allocates;
    on a real CUDA device bitsandbytes itself runs (``pip install bitsandbytes``).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from memgraph.errors import MemgraphError
from memgraph.model_spec.bnb_optimizers import BNB_CLASSES, EmulatedAdam8bit

LEARNING_RATE = 1e-4  # irrelevant to memory; any positive value
SGD_MOMENTUM = 0.9
DEFAULT_IMPL = {"cuda": "foreach", "cpu": "for-loop"}
# lion-pytorch's defaults (lion_pytorch/lion_pytorch.py Lion.__init__): betas (0.9, 0.99), weight_decay 0.0
LION_BETAS = (0.9, 0.99)


def resolve_impl(impl: str, target: str) -> str:
    return DEFAULT_IMPL[target] if impl == "auto" else impl


# A lower bound of the per-parameter state tensors of the size (and dtype) of the parameter that each
# optimizer keeps, for memgraph/measure/memory_guard.py (torch 2.13, torch/optim/adam.py _init_group:
# exp_avg and exp_avg_sq; sgd.py: momentum_buffer when momentum != 0; lion: exp_avg). Adafactor's factored
# state and bitsandbytes' uint8 state are smaller than one such tensor: 0.
STATE_TENSORS_PER_PARAMETER = {"sgd": 0, "sgd-momentum": 1, "sgd-nesterov": 1, "adam": 2, "adamw": 2,
                               "adafactor": 0, "lion": 1, "adam8bit": 0, "adamw8bit": 0, "paged-adamw8bit": 0,
                               "none": 0}

# Optimizers with no fused=True implementation in torch 2.13 (or none at all: Lion, bitsandbytes')
_NO_FUSED = ("adafactor", "lion", "adam8bit", "adamw8bit", "paged-adamw8bit")


def make_optimizer(name: str, params: list[torch.nn.Parameter], impl: str) -> torch.optim.Optimizer | None:
    """Build optimizer ``name`` (see :data:`memgraph.model_spec.options.OPTIMIZERS`) with implementation ``impl``;
    ``None`` for 'none' (forward and backward only)."""
    if not params:
        raise MemgraphError("no parameter trains: loosen --freeze / --train so that at least one matches")
    if name == "none":
        return None
    if impl == "fused" and name in _NO_FUSED:
        raise MemgraphError(f"--optimizer {name} has no fused implementation: use --optimizer-impl foreach or for-loop")
    flags = {"foreach": {"foreach": True}, "for-loop": {"foreach": False}, "fused": {"fused": True}}[impl]
    if name == "sgd":
        return torch.optim.SGD(params, lr=LEARNING_RATE, **flags)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=SGD_MOMENTUM, **flags)
    if name == "sgd-nesterov":
        return torch.optim.SGD(params, lr=LEARNING_RATE, momentum=SGD_MOMENTUM, nesterov=True, **flags)
    if name == "adam":
        return torch.optim.Adam(params, lr=LEARNING_RATE, **flags)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=LEARNING_RATE, **flags)
    if name == "adafactor":
        return Adafactor(params, lr=LEARNING_RATE, **flags)
    if name == "lion":
        return Lion(params, lr=LEARNING_RATE, foreach=flags["foreach"])
    if name in BNB_CLASSES:
        if params[0].device.type == "meta":
            return EmulatedAdam8bit(params, name, lr=LEARNING_RATE)
        try:
            import bitsandbytes
        except ImportError:
            raise MemgraphError(f"--optimizer {name} on a real device needs bitsandbytes: pip install bitsandbytes") from None
        return getattr(bitsandbytes.optim, BNB_CLASSES[name])(params, lr=LEARNING_RATE)
    raise MemgraphError(f"unknown optimizer {name!r}: use one of the --optimizer choices")


class _MetaScalars(TorchFunctionMode):
    """``Tensor.item()`` of a meta tensor answers 1.0 (meta holds no values; the value only scales a step)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.Tensor.item and args and args[0].device.type == "meta":
            return 1.0
        return func(*args, **(kwargs or {}))


class Adafactor(torch.optim.Adafactor):
    """``torch.optim.Adafactor``, whose ``.item()`` reads are answered on meta (:class:`_MetaScalars`)."""

    @torch.no_grad()
    def step(self, closure=None):
        if any(p.device.type == "meta" for g in self.param_groups for p in g["params"]):
            with _MetaScalars():
                return super().step(closure)
        return super().step(closure)

    def describe(self) -> str:
        return ("adafactor: torch.optim.Adafactor (factored row/column second moments for >= 2-D parameters); "
                "on meta its .item() reads (parameter and update norms) are answered with 1.0, which sets step "
                "sizes only")


class Lion(torch.optim.Optimizer):
    """lucidrains/lion-pytorch's ``Lion`` (lion_pytorch/lion_pytorch.py ``update_fn``, read on GitHub), written as there::

        p.data.mul_(1 - lr * wd)
        update = exp_avg.clone().mul_(beta1).add(grad, alpha=1 - beta1).sign_()
        p.add_(update, alpha=-lr)
        exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)

    so a step holds two parameter-sized temporaries at once (the clone and the ``add`` result). State:
    ``exp_avg`` (``torch.zeros_like(p)``). ``foreach`` is accepted and ignored: lion-pytorch has one
    per-parameter loop (its Triton kernel is opt-in, ``use_triton=True``).
    """

    def __init__(self, params, lr: float = LEARNING_RATE, betas=LION_BETAS, weight_decay: float = 0.0,
                 foreach: bool | None = None):
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            lr, wd, (beta1, beta2) = group["lr"], group["weight_decay"], group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["exp_avg"] = torch.zeros_like(p)
                exp_avg, grad = state["exp_avg"], p.grad
                p.data.mul_(1 - lr * wd)
                update = exp_avg.clone().mul_(beta1).add(grad, alpha=1 - beta1).sign_()
                p.add_(update, alpha=-lr)
                exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)
        return None
