"""CUDA autocast, emulated on the ``meta`` device.

Why: ``torch.autocast("cuda")`` is disabled on a CPU-only build, and autocast never casts ``meta``
tensors (``torch.autocast("meta")`` is refused). A meta trace of a mixed-precision step would run
in float32. :class:`AutocastMode` re-creates what the ``AutocastCUDA`` dispatch key does, one level
higher: it is a ``TorchFunctionMode``, i.e. it runs *above autograd*, so every cast it makes is an
ordinary ``Tensor.to`` that autograd records (``ToCopyBackward0``) and whose result autograd may
save, exactly as the casts of real autocast (``cached_cast`` in aten/src/ATen/autocast_mode.cpp,
which runs before the Autograd key).

What is applied (PyTorch 2.13's CUDA policy, :mod:`memgraph.facts.autocast_policy`)
-----------------------------------------------------------------------------------------
* ``lower_precision_fp`` ops: every floating tensor argument (also inside a tensor list) that is not
  float64 and not already the autocast dtype is cast to it.
* ``fp32`` ops: the same, to float32.
* ``fp32_set_opt_dtype`` ops (softmax, log_softmax, sum, prod, cumsum, cumprod, linalg norms) and
  ``fp32_append_dtype`` (``norm``): when the *first* argument is an eligible floating tensor and the
  call passes no ``dtype``, the op is called with ``dtype=torch.float32`` (no separate cast, as in
  ATen). Special case mirrored from ``at::softmax``/``at::log_softmax`` (SoftMax.cpp): a float16 CUDA
  input with ``dtype=float`` runs ``_softmax(x, dim, half_to_float=True)`` without a float32 copy of
  the input (bfloat16 inputs are copied to float32 first, on a GPU as here).
* ``promote`` ops: eligible arguments are cast to the widest eligible floating type (float32 if any
  is float32, else the autocast dtype), float64 ignored (``promote_type``/``prioritize``).
* ``binary_cross_entropy`` is banned under autocast: a clear error, as on a GPU.
* Ops called with ``out=`` run unchanged (autocast registers only the functional overloads).

The weight-cast cache (``cached_cast``): a cast *to the autocast dtype* of a float32 tensor that
``requires_grad``, is a leaf and is not a view (in practice: a trainable parameter) is cached for
as long as autocast regions are open; the cache is thread-local and dropped when the outermost
region exits (``torch.autocast.__exit__`` -> ``autocast_decrement_nesting() == 0`` ->
``clear_autocast_cache()``). So each parameter has one low-precision copy per region, made at its
first use; copies that autograd saved survive the region until backward frees them.

Mapping torch-level functions to the policy's ATen names
--------------------------------------------------------
A ``TorchFunctionMode`` is called with the *Python-level* function, the policy names ATen ops.
The mapping follows one rule: the C++ bindings generated from ``native_functions.yaml`` (``torch.X``,
``Tensor.X``, ``torch._C._nn.X`` = ``F.X`` for e.g. linear/silu, ``torch._C._linalg.linalg_X`` =
``torch.linalg.X``, ``torch._C._special``) each call exactly the ATen op of their name, which is
the op the Autocast key sees first. So a policy op ``X`` is looked up as each of those bindings
named ``X`` (``linalg_X`` for linalg ops; the ``torch._C._nn.upsample_*`` bindings that
``F.interpolate`` calls reach the ``.vec`` overloads, which decompose into the registered default
overloads, so they count as ``upsample_*``). Additionally: ``Tensor.__matmul__`` -> matmul,
``Tensor.__pow__`` -> pow, composite-implicit ATen ops *without* an autocast kernel whose C++
decomposition is a single policy op, which therefore behave as that op (:data:`ALIASES`:
``nll_loss_nd`` -> nll_loss, ``special_expm1`` -> expm1, ``arccos`` -> acos, ...), and
``cross_entropy_loss``, emulated by its decomposition
(LossNLL.cpp: ``nll_loss_nd(log_softmax(x, class_dim, x.scalar_type()), ...)``: the explicit dtype
keeps log_softmax in the input's dtype, then ``nll_loss`` (fp32 policy) casts the log-probabilities
to float32).

Python-level functions (``F.softmax``, ``F.layer_norm``, ``F.interpolate``, ``F.normalize``,
``F.multi_head_attention_forward``, ``torch.norm``, ``torch.einsum``, ``Tensor.__rmatmul__``...)
are not mapped: :class:`TransparentFunctionMode` runs their bodies with the mode still active, so
the C++ bindings they call are seen and autocast individually, which is what the Autocast key sees
on a GPU too (it never sees Python functions).

Not modelled (documented deviations)
------------------------------------
* C++ bindings of composite ops that have no autocast kernel run unchanged, even where their C++
  decomposition reaches a policy op (e.g. ``torch.pairwise_distance`` -> ``norm``); the exceptions
  are the aliases above.
* Autocast-*disabled* regions inside the model: transformers' ``maybe_autocast`` returns a
  ``nullcontext`` for meta tensors (e.g. the float32 rotary-embedding tables of Llama are computed
  under the emulation; they are [batch, seq, head_dim] tensors, a few MiB at most), and
  ``torch.autocast("cuda", enabled=False)`` is a no-op on a CPU-only build.
* ``cross_entropy`` with probability targets or label smoothing runs unchanged (no casts).
* CUDA-only autocast registrations of RNN kernels (``_cudnn_rnn``) are not applied.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import torch

from memgraph.errors import MemgraphError
from memgraph.facts.autocast_policy import (
    BANNED_OPS,
    FP32_OPS,
    LOWER_PRECISION_OPS,
    PROMOTE_OPS,
    autocast_policy,
)
from memgraph.notes import Note
from memgraph.private_api import (
    BINDING_NAMESPACES,
    TENSOR_BINDINGS,
    is_view,
    nll_loss_nd,
)
from memgraph.trace.record.transparent_mode import PASS, TransparentFunctionMode

AUTOCAST_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}

# ---------------------------------------------------------------------------------------------
# The policy, keyed by torch-level binding

# composite-implicit ATen ops with no autocast kernel that decompose into exactly one policy op
ALIASES = {
    "nll_loss_nd": "nll_loss",  # F.nll_loss -> nll_loss_nd -> nll_loss / nll_loss2d (both fp32)
    "special_expm1": "expm1",
    "special_log1p": "log1p",
    "special_erfinv": "erfinv",
    "special_logsumexp": "logsumexp",
    "special_softmax": "softmax",
    "special_log_softmax": "log_softmax",
    "arccos": "acos",
    "arcsin": "asin",
    "arctan2": "atan2",
}
_BINDING_OWNERS = BINDING_NAMESPACES  # torch._C._VariableFunctions, TensorBase, _nn, _linalg, _special


def _bindings(name: str) -> list:
    found = []
    for owner in _BINDING_OWNERS:
        obj = getattr(owner, name, None)
        if obj is not None and callable(obj) and not isinstance(obj, type):
            found.append(obj)
    return found


def _build_rules() -> dict:
    """torch-level binding -> (ATen op name, policy)."""
    rules = {}
    ops = {op: op for op in LOWER_PRECISION_OPS | FP32_OPS | PROMOTE_OPS | BANNED_OPS}
    ops.update(ALIASES)
    for binding_name, op in ops.items():
        policy = autocast_policy(op)
        for f in _bindings(binding_name):
            rules.setdefault(f, (op, policy))
    for dunder, op in (("__matmul__", "matmul"), ("__pow__", "pow")):  # `a @ b`, `a ** 2`
        f = getattr(TENSOR_BINDINGS, dunder, None)
        if f is not None:
            rules.setdefault(f, (op, autocast_policy(op)))
    for f in _bindings("cross_entropy_loss"):
        rules[f] = ("cross_entropy_loss", "cross_entropy")
    return rules


RULES: dict = _build_rules()

# ---------------------------------------------------------------------------------------------
# Thread-local autocast state: nesting and the weight-cast cache (as in ATen)

_TLS = threading.local()


def _tls():
    if not hasattr(_TLS, "nesting"):
        _TLS.nesting = 0
        _TLS.cache = {}  # id(source) -> (weakref to source, cast tensor)
        _TLS.cached_ids = set()  # ids of cast tensors held by the cache (is_cached_tensor)
        _TLS.replay = []  # factories of the emulation regions open now (for checkpoint recompute)
    return _TLS


@dataclass
class AutocastStats:
    """What the emulation did, for the trace notes."""

    dtype: torch.dtype
    casts: Counter = field(default_factory=Counter)  # "lower" / "fp32" / "promote" -> casts made
    ops: Counter = field(default_factory=Counter)  # policy -> ops seen with an eligible argument
    cache_hits: int = 0
    cached: int = 0  # weight casts put in the cache
    regions: int = 0
    on_cache: Callable[[torch.Tensor], None] | None = None  # told of every weight copy put in the cache

    def describe(self) -> Note:
        policies = [p for p in ("lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype", "promote")
                    if self.ops[p]]
        counts = {**{f"ops_{p}": self.ops[p] for p in policies}, "lower": self.casts["lower"],
                  "fp32": self.casts["fp32"], "promote": self.casts["promote"], "cached": self.cached,
                  "cache_hits": self.cache_hits}
        ops = ", ".join(f"{{ops_{p}}} {p}" for p in policies) or "none"
        return Note(
            "autocast: emulated torch.autocast('cuda', dtype={name}) with PyTorch's CUDA op policy "
            "over {regions} region(s): ops " + ops + "; {lower} casts to {name}, {fp32} to float32, "
            "{promote} by promotion; weight-cast cache: {cached} parameter copies made, {cache_hits} reuses",
            # regions too: a checkpointed layer's recompute re-enters the regions open at its forward (one more
            # region per layer and iteration under --gradient-checkpointing), so depth synthesis moves it too
            per_layer=("regions", *counts), name=str(self.dtype).removeprefix("torch."), regions=self.regions,
            **counts)


def _eligible(t, device_type: str) -> bool:
    # is_autocast_eligible (tensor on the autocast device, floating) and not float64 (is_eligible)
    return (isinstance(t, torch.Tensor) and t.device.type == device_type and t.is_floating_point()
            and t.dtype != torch.float64)


class AutocastMode(TransparentFunctionMode):
    """The torch-function half of one emulated autocast region (see :func:`autocast_region`)."""

    def __init__(self, stats: AutocastStats, device_type: str = "meta", cache_enabled: bool = True):
        super().__init__()
        self.stats = stats
        self.dtype = stats.dtype
        self.device_type = device_type
        self.cache_enabled = cache_enabled

    # -- casts ------------------------------------------------------------------------------
    def _cast(self, t: torch.Tensor, to: torch.dtype, kind: str) -> torch.Tensor:
        if not _eligible(t, self.device_type) or t.dtype == to:
            return t
        state = _tls()
        cacheable = (to == self.dtype and t.dtype == torch.float32 and t.requires_grad and t.is_leaf
                     and not is_view(t) and self.cache_enabled and id(t) not in state.cached_ids)
        if cacheable:
            hit = state.cache.get(id(t))
            if hit is not None and hit[0]() is t:
                self.stats.cache_hits += 1
                return hit[1]
        out = t.to(to)
        self.stats.casts[kind] += 1
        if cacheable:
            state.cache[id(t)] = (weakref.ref(t), out)
            state.cached_ids.add(id(out))
            self.stats.cached += 1
            if self.stats.on_cache is not None:
                self.stats.on_cache(out)
        return out

    def _cast_all(self, args, kwargs, to, kind):
        def one(a):
            if isinstance(a, torch.Tensor):
                return self._cast(a, to, kind)
            if isinstance(a, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in a):
                return type(a)(self._cast(x, to, kind) if isinstance(x, torch.Tensor) else x for x in a)
            return a

        return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}

    def _any_eligible(self, args, kwargs) -> bool:
        for a in list(args) + list(kwargs.values()):
            if _eligible(a, self.device_type):
                return True
            if isinstance(a, (list, tuple)) and any(_eligible(x, self.device_type) for x in a):
                return True
        return False

    # -- policy -----------------------------------------------------------------------------
    def handle(self, func, args, kwargs):
        try:
            rule = RULES.get(func)
        except TypeError:
            return PASS
        if rule is None or "out" in kwargs:
            return PASS
        op, policy = rule
        if policy == "cross_entropy":
            return self._cross_entropy(func, args, kwargs)
        if policy == "banned":
            if self._any_eligible(args, kwargs):
                raise MemgraphError(
                    "torch.nn.functional.binary_cross_entropy is unsafe to autocast (PyTorch refuses it under "
                    "torch.autocast('cuda')): use binary_cross_entropy_with_logits / BCEWithLogitsLoss"
                )
            return PASS
        if policy in ("fp32_set_opt_dtype", "fp32_append_dtype"):
            first = args[0] if args else next(iter(kwargs.values()), None)
            if not _eligible(first, self.device_type) or _has_dtype(args, kwargs):
                return PASS
            self.stats.ops[policy] += 1
            if op in ("softmax", "log_softmax") and len(args) > 2 and args[2] is None:
                args = args[:2]  # softmax(self, dim, dtype=None): the only positional dtype in the policy
            if op in ("softmax", "log_softmax") and first.dtype == torch.float16:
                dim = args[1] if len(args) > 1 else kwargs.get("dim")
                if isinstance(dim, int):  # SoftMax.cpp: CUDA half + dtype=float -> half_to_float kernel
                    kernel = torch.ops.aten._softmax if op == "softmax" else torch.ops.aten._log_softmax
                    return kernel(first, dim, True)
            return func(*args, **{**kwargs, "dtype": torch.float32})
        if not self._any_eligible(args, kwargs):
            return PASS
        self.stats.ops[policy] += 1
        if policy == "lower_precision_fp":
            args, kwargs = self._cast_all(args, kwargs, self.dtype, "lower")
        elif policy == "fp32":
            args, kwargs = self._cast_all(args, kwargs, torch.float32, "fp32")
        elif policy == "promote":
            args, kwargs = self._cast_all(args, kwargs, self._widest(args, kwargs), "promote")
        return func(*args, **kwargs)

    def _widest(self, args, kwargs) -> torch.dtype:
        # promote_type/prioritize: start at the autocast dtype; float32 wins; float64 is ignored
        flat = []
        for a in list(args) + list(kwargs.values()):
            flat.extend(a if isinstance(a, (list, tuple)) else [a])
        if any(_eligible(a, self.device_type) and a.dtype == torch.float32 for a in flat):
            return torch.float32
        return self.dtype

    def _cross_entropy(self, func, args, kwargs):
        # LossNLL.cpp cross_entropy_loss_symint, class-index targets without label smoothing:
        #   nll_loss_nd(log_softmax(self, class_dim, self.scalar_type()), target, weight, reduction, ignore_index)
        names = ("input", "target", "weight", "reduction", "ignore_index", "label_smoothing")
        bound = dict(zip(names, args))
        bound.update(kwargs)
        x, target = bound.get("input"), bound.get("target")
        smoothing = bound.get("label_smoothing", 0.0) or 0.0
        if (not _eligible(x, self.device_type) or not isinstance(target, torch.Tensor)
                or target.is_floating_point() or smoothing > 0.0):
            return PASS  # probability targets / label smoothing: run unchanged (see module docstring)
        self.stats.ops["cross_entropy"] += 1
        class_dim = 0 if x.dim() == 1 else 1
        with self:
            logp = torch.log_softmax(x, class_dim, dtype=x.dtype)  # explicit dtype: not autocast
            return nll_loss_nd(logp, target, bound.get("weight"), bound.get("reduction", 1),
                                           bound.get("ignore_index", -100))


def _has_dtype(args, kwargs) -> bool:
    if kwargs.get("dtype") is not None:
        return True
    return any(isinstance(a, torch.dtype) for a in args)


@contextlib.contextmanager
def autocast_region(stats: AutocastStats, device_type: str = "meta", cache_enabled: bool = True):
    """An emulated ``torch.autocast("cuda", dtype=stats.dtype)`` region on ``device_type`` tensors."""
    state = _tls()
    state.nesting += 1  # torch.autocast.__enter__: autocast_increment_nesting()
    stats.regions += 1
    try:
        with AutocastMode(stats, device_type, cache_enabled):
            yield
    finally:
        state.nesting -= 1
        if state.nesting == 0:  # torch.autocast.__exit__: clear_autocast_cache() at the outermost exit
            state.cache.clear()
            state.cached_ids.clear()


@contextlib.contextmanager
def emulation_region(*factories: Callable[[], contextlib.AbstractContextManager]):
    """Enter emulation contexts in order (the first lies lowest in the mode stack) and remember
    them, so that a checkpoint recompute during backward can re-enter the same ones."""
    state = _tls()
    with contextlib.ExitStack() as stack:
        for factory in factories:
            state.replay.append(factory)
            stack.callback(state.replay.pop)
            stack.enter_context(factory())
        yield


def checkpoint_context_fn():
    """``context_fn`` for ``torch.utils.checkpoint`` (non-reentrant): the recompute during backward
    re-enters the emulation regions that were open when the checkpointed forward ran, as
    ``torch.utils.checkpoint`` re-enters the recorded ``torch.autocast`` state on a GPU."""
    factories = tuple(_tls().replay)
    return contextlib.nullcontext(), emulation_region(*factories)


def autocast_factory(stats: AutocastStats, device_type: str = "meta"):
    """A zero-argument factory of emulated autocast regions."""
    return lambda: autocast_region(stats, device_type)


__all__ = ["AUTOCAST_DTYPES", "ALIASES", "AutocastMode", "AutocastStats", "RULES", "TransparentFunctionMode",
           "autocast_factory", "autocast_region", "checkpoint_context_fn", "emulation_region"]
