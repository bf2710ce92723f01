"""Every private PyTorch and transformers name memgraph uses, in one place, each with a guard.

memgraph traces a training step by reaching into parts of PyTorch (and one of transformers) that
have no stability promise: private modules (``torch.utils._python_dispatch``), private bindings
(``torch._C._select_conv_backend``), private methods it overrides (``GradScaler._maybe_opt_step``)
and a copied private method (``ModTracker._fw_pre_hook``). Other memgraph modules import these
from here and never reach into torch privates themselves.

Each section below is one touch point: what memgraph uses it for, the version and source file it
was read from, and a guard (:func:`_guard`) that checks that the thing still exists and has the
shape memgraph assumes (attributes, argument names, for copied or overridden code a hash of the
original's source). A guard that fails raises :class:`PrivateApiError`, one line naming the
installed version, what changed and the supported range, instead of letting a changed internal
produce silently wrong numbers. Cheap guards run when this module is imported; the others on
first use (:func:`require`), so that e.g. transformers is not imported just to import memgraph.

On a new torch / transformers release: run ``python -m pytest tests/test_private_api.py``; for
a failing guard read the new source, adapt the section (a copied function: re-copy it and record
the new hash in its known-hashes table) and widen :data:`TORCH_RANGE` / :data:`TRANSFORMERS_RANGE`
together with pyproject.toml.

Calls of ATen ops by name (``torch.ops.aten.X``) are PyTorch's public op API; where memgraph
passes their arguments positionally, the argument names it assumes are guarded in
:data:`ASSUMED_SCHEMAS`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import textwrap
import types
import weakref
from typing import Callable
from unittest import mock

import torch

from memgraph.errors import MemgraphError

# The supported ranges (the same as pyproject.toml's [project] dependencies; tests/test_private_api.py
# checks they agree). How they were established: see the comment in pyproject.toml.
TORCH_RANGE = ">=2.12,<2.14"
TRANSFORMERS_RANGE = ">=5.6,<5.24"
# DeepSpeed (optional, ``pip install memgraph[deepspeed]``; memgraph/ds_engine): the version its touch points were
# read from, the same as pyproject.toml's deepspeed extra
DEEPSPEED_RANGE = ">=0.19.8,<0.20"


class PrivateApiError(MemgraphError):
    """A private PyTorch / transformers name memgraph relies on is missing or no longer has the assumed shape."""


# --------------------------------------------------------------------------------------------
# guards
# --------------------------------------------------------------------------------------------
GUARDS: dict[str, Callable[[], None]] = {}  # touch point -> its guard (raises PrivateApiError)
_PASSED: set[str] = set()  # guards that passed in this process (require() runs each once)


def _installed(library: str) -> str:
    if library == "torch":
        return torch.__version__
    if library == "deepspeed":
        import deepspeed

        return deepspeed.__version__
    import transformers

    return transformers.__version__


def _supported(library: str) -> str:
    """The supported version range of ``library``."""
    return {"torch": TORCH_RANGE, "deepspeed": DEEPSPEED_RANGE}.get(library, TRANSFORMERS_RANGE)


SINCE: dict[str, tuple[str, str, str]] = {}  # touch point -> (library, first version having it, what needs it)


def unavailable(name: str) -> str | None:
    """None when the installed library is recent enough for touch point ``name`` (see :func:`_guard`'s ``since``),
    else one line naming the installed version, the version needed and what needs it."""
    if name not in SINCE:
        return None
    from packaging.version import Version

    library, since, needed_by = SINCE[name]
    installed = _installed(library)
    if Version(installed.split("+")[0]) >= Version(since):
        return None
    upper = ",".join(p for p in _supported(library).split(",") if p.startswith("<"))
    return (f"{library} {installed}: {needed_by} needs {library}>={since}: install "
            f"'{library}>={since}{',' + upper if upper else ''}'")


def _guard(name: str, library: str, read_from: str, since: tuple[str, str] | None = None):
    """Register ``check`` as the guard of touch point ``name``.

    ``check()`` returns None when the touch point still holds, else a short text saying what
    changed; an exception it raises (AttributeError, ImportError, ...) counts as the change.
    ``since`` = (version, what needs it): a touch point that first appeared in that version of the library, above
    the lower end of the supported range; below it the feature is refused (:func:`unavailable`), not the library.
    """
    supported = _supported(library)
    if since is not None:
        SINCE[name] = (library, *since)

    def register(check: Callable[[], str | None]) -> Callable[[], None]:
        def run() -> None:
            too_old = unavailable(name)
            if too_old:
                raise PrivateApiError(too_old)
            try:
                problem = check()
            except Exception as e:  # noqa: BLE001 - a missing module/attribute is what the guard detects
                problem = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
            if problem:
                raise PrivateApiError(
                    f"{library} {_installed(library)}: {problem} (memgraph read it from {read_from}); memgraph "
                    f"supports {library}{supported}: install {library} in that range, or adapt "
                    f"memgraph/private_api.py ({name})"
                )

        run.__doc__ = check.__doc__
        GUARDS[name] = run
        return run

    return register


def require(name: str) -> None:
    """Run the guard of touch point ``name`` once per process (first use)."""
    if name not in _PASSED:
        GUARDS[name]()
        _PASSED.add(name)


def _missing(owner, *names: str) -> str | None:
    """"X.y is missing" for the first of ``names`` that ``owner`` lacks (or that is None)."""
    for n in names:
        if getattr(owner, n, None) is None:
            return f"{getattr(owner, '__name__', type(owner).__name__)}.{n} is missing"
    return None


def source_hash(func) -> str:
    """First 16 hex digits of the SHA-256 of ``func``'s dedented source text."""
    text = textwrap.dedent(inspect.getsource(func))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _unknown_source(func, known: dict[str, str], qualname: str) -> str | None:
    h = source_hash(func)
    if h in known:
        return None
    return (f"the source of {qualname} changed (hash {h}; memgraph's copy matches "
            f"{', '.join(f'{v} ({k})' for k, v in known.items())})")


def _parameters(func) -> list[str]:
    return list(inspect.signature(func).parameters)


# --------------------------------------------------------------------------------------------
# torch.utils._python_dispatch: TorchDispatchMode, _disable_current_modes
#   for: the recorder and ShadowValues are dispatch modes; ShadowValues and the SDPA kernel choice
#   run CPU work outside every mode. Read from torch 2.13.0, torch/utils/_python_dispatch.py.
# --------------------------------------------------------------------------------------------
@_guard("python_dispatch", "torch", "torch 2.13.0, torch/utils/_python_dispatch.py")
def _check_python_dispatch():
    from torch.utils import _python_dispatch

    return _missing(_python_dispatch, "TorchDispatchMode", "_disable_current_modes")


_check_python_dispatch()
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._python_dispatch import _disable_current_modes as disable_current_modes  # noqa: E402


# --------------------------------------------------------------------------------------------
# torch.utils._pytree: tree_flatten, tree_map
#   for: walking op arguments (ShadowValues, CPU workspaces, module inputs in the tracker).
#   Read from torch 2.13.0, torch/utils/_pytree.py.
# --------------------------------------------------------------------------------------------
@_guard("pytree", "torch", "torch 2.13.0, torch/utils/_pytree.py")
def _check_pytree():
    from torch.utils import _pytree

    problem = _missing(_pytree, "tree_flatten", "tree_map")
    if problem:
        return problem
    if _pytree.tree_flatten((1, [2], {"a": 3}))[0] != [1, 2, 3]:
        return "torch.utils._pytree.tree_flatten no longer returns (leaves, spec) with the leaves in order"
    if _pytree.tree_map(lambda x: x + 1, (1, [2])) != (2, [3]):
        return "torch.utils._pytree.tree_map no longer maps the leaves of nested tuples/lists"
    return None


_check_pytree()
from torch.utils._pytree import tree_flatten, tree_map  # noqa: E402


# --------------------------------------------------------------------------------------------
# torch.utils.weak.WeakIdKeyDictionary (undocumented module)
#   for: ShadowValues keys its CPU values by meta tensor identity, without keeping tensors alive.
#   Read from torch 2.13.0, torch/utils/weak.py.
# --------------------------------------------------------------------------------------------
@_guard("weak_id_dict", "torch", "torch 2.13.0, torch/utils/weak.py")
def _check_weak_id_dict():
    from torch.utils import weak

    return _missing(weak, "WeakIdKeyDictionary")


_check_weak_id_dict()
from torch.utils.weak import WeakIdKeyDictionary  # noqa: E402


# --------------------------------------------------------------------------------------------
# torch._C binding namespaces and torch._C.DisableTorchFunction
#   for: the emulation modes recognise the C++ bindings generated from native_functions.yaml
#   (autocast policy per binding; F.scaled_dot_product_attention and torch.dropout are the
#   bindings themselves), and ask the CPU SDPA choice with torch functions disabled.
#   Read from torch 2.13.0, torch/_C/__init__.pyi, torch/nn/functional.py.
# --------------------------------------------------------------------------------------------
@_guard("bindings", "torch", "torch 2.13.0, torch/_C/__init__.pyi")
def _check_bindings():
    problem = (_missing(torch._C, "_VariableFunctions", "TensorBase", "_nn", "_linalg", "_special",
                        "DisableTorchFunction")
               or _missing(torch._C._nn, "scaled_dot_product_attention", "nll_loss_nd")
               or _missing(torch._C._VariableFunctions, "dropout")
               or _missing(torch._C.TensorBase, "__matmul__"))
    if problem:
        return problem
    if torch.nn.functional.scaled_dot_product_attention is not torch._C._nn.scaled_dot_product_attention:
        return "F.scaled_dot_product_attention is no longer the binding torch._C._nn.scaled_dot_product_attention"
    if torch.dropout is not torch._C._VariableFunctions.dropout:
        return "torch.dropout is no longer the binding torch._C._VariableFunctions.dropout"
    return None


_check_bindings()
BINDING_NAMESPACES = (torch._C._VariableFunctions, torch._C.TensorBase, torch._C._nn, torch._C._linalg,
                      torch._C._special)
TENSOR_BINDINGS = torch._C.TensorBase  # Tensor methods as bindings (``__matmul__``, ``pow``, ...)
DisableTorchFunction = torch._C.DisableTorchFunction
SDPA_BINDING = torch._C._nn.scaled_dot_product_attention  # = F.scaled_dot_product_attention
DROPOUT_BINDING = torch._C._VariableFunctions.dropout  # = torch.dropout (F.dropout calls it)
nll_loss_nd = torch._C._nn.nll_loss_nd  # what F.nll_loss / cross_entropy_loss call (LossNLL.cpp)


# --------------------------------------------------------------------------------------------
# torch.overrides has_torch_function*: torch Python functions rebuilt without their checks
#   for: TransparentFunctionMode runs the body of a torch Python function (F.softmax, ...) with the
#   mode still active. It rebuilds the function with its globals ``has_torch_function``,
#   ``has_torch_function_unary`` and ``has_torch_function_variadic`` answering False. That works
#   only while torch's Python functions call those names as module globals; if they reached them
#   another way the rebuilt body would re-dispatch and the emulation would miss the bindings inside
#   (no error, wrong casts). Read from torch 2.13.0, torch/overrides.py, torch/nn/functional.py,
#   torch/_tensor.py.
# --------------------------------------------------------------------------------------------
HAS_TORCH_FUNCTION = ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic")


def _samples_of_checked_functions():
    F = torch.nn.functional
    return (F.softmax, F.layer_norm, F.multi_head_attention_forward, torch.Tensor.backward)


@_guard("has_torch_function", "torch", "torch 2.13.0, torch/overrides.py and torch/nn/functional.py")
def _check_has_torch_function():
    problem = _missing(torch.overrides, *HAS_TORCH_FUNCTION)
    if problem:
        return problem
    for f in _samples_of_checked_functions():
        names = [n for n in f.__code__.co_names if n in HAS_TORCH_FUNCTION]
        if not names or any(f.__globals__.get(n) is not getattr(torch.overrides, n) for n in names):
            return (f"{f.__module__}.{f.__qualname__} no longer checks for torch function modes through the "
                    f"module globals {'/'.join(HAS_TORCH_FUNCTION)}")
    return None


_check_has_torch_function()


def _answer_false(*_args, **_kwargs) -> bool:
    return False


def body_without_torch_function_checks(func) -> Callable | None:
    """A copy of torch Python function ``func`` whose ``has_torch_function*`` checks answer False.

    Calling it runs the body directly (no re-dispatch to the active mode), while the torch
    functions the body calls still check for modes. None for anything else (C++ bindings,
    functions outside torch, functions without the checks)."""
    if not isinstance(func, types.FunctionType) or not (func.__module__ or "").startswith("torch"):
        return None
    g = func.__globals__
    if not any(name in g for name in HAS_TORCH_FUNCTION):
        return None
    patched = dict(g)
    for name in HAS_TORCH_FUNCTION:
        if name in patched:
            patched[name] = _answer_false
    body = types.FunctionType(func.__code__, patched, func.__name__, func.__defaults__, func.__closure__)
    body.__kwdefaults__ = func.__kwdefaults__
    return body


# --------------------------------------------------------------------------------------------
# Tensor._is_view, untyped_storage()._cdata, OpOverload._schema
#   for: the autocast weight-cast cache skips views (autocast_mode.cpp ``cached_cast``: "not a
#   view"); ShadowValues finds the tensors sharing a storage (the storage's C++ address) and the
#   arguments an op writes (schema alias info). Read from torch 2.13.0, torch/_C/__init__.pyi
#   (TensorBase._is_view, UntypedStorage._cdata) and torch/_ops.py (OpOverload._schema).
# --------------------------------------------------------------------------------------------
@_guard("tensor_internals", "torch", "torch 2.13.0, torch/_C/__init__.pyi and torch/_ops.py")
def _check_tensor_internals():
    base = torch.empty(4, device="meta")
    if not callable(getattr(base, "_is_view", None)) or base._is_view() or not base[1:]._is_view():
        return "Tensor._is_view() is missing or no longer tells views from bases"
    a, b = base.untyped_storage()._cdata, base[1:].untyped_storage()._cdata
    if not isinstance(a, int) or a != b or a == torch.empty(4, device="meta").untyped_storage()._cdata:
        return "UntypedStorage._cdata is missing or no longer identifies a storage"
    schema = getattr(torch.ops.aten.add_.Tensor, "_schema", None)
    if schema is None or not schema.is_mutable or not schema.arguments[0].alias_info.is_write:
        return "OpOverload._schema is missing or no longer has is_mutable / arguments[i].alias_info.is_write"
    return None


_check_tensor_internals()


def is_view(t: torch.Tensor) -> bool:
    return t._is_view()


@_guard("fake_mode_key", "torch", "torch 2.13.0, torch/_C/__init__.pyi (_get_dispatch_mode, _TorchDispatchModeKey)")
def _check_fake_mode_key():
    if _missing(torch._C, "_get_dispatch_mode", "_TorchDispatchModeKey") or not hasattr(torch._C._TorchDispatchModeKey,
                                                                                     "FAKE"):
        return "torch._C._get_dispatch_mode / _TorchDispatchModeKey.FAKE is missing"
    return None


_check_fake_mode_key()


def fake_mode_active() -> bool:
    """Whether a ``FakeTensorMode`` is active: an infra mode (its own slot, _TorchDispatchModeKey.FAKE) runs below
    the user modes such as the recorder, so while DTensor's sharding propagation runs an op on fake global-shape
    copies (torch 2.13 torch/distributed/tensor/_sharding_prop.py ``_propagate_tensor_meta_non_cached``, once per
    op schema a process has not seen: a cache, also in C++, ``torch._C._clear_DTensor_sharding_propagator_cache``)
    the recorder is called with the fake mode set."""
    return torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None


def fake_tensor_type() -> type:
    """FakeTensorMode's tensor class (torch/_subclasses/fake_tensor.py ``FakeTensor``, torch 2.12-2.13). A fake tensor
    reports a device (often ``cpu``) but holds no memory: DTensor's sharding propagation
    (torch/distributed/tensor/_sharding_prop.py ``_propagate_tensor_meta_non_cached``) runs each op once on fake
    global-shape copies under a ``FakeTensorMode`` below which the recorder sees them."""
    from torch._subclasses.fake_tensor import FakeTensor

    return FakeTensor


def storage_key(t: torch.Tensor) -> int:
    """An int that identifies ``t``'s storage (equal for all views of it) while it is alive."""
    return t.untyped_storage()._cdata


def op_schema(func):
    """The ``torch._C.FunctionSchema`` of an ``OpOverload`` (arguments, alias_info, is_mutable)."""
    return func._schema


# --------------------------------------------------------------------------------------------
# OpOverload.namespace / is_view / tags, FunctionSchema returns' and arguments' alias_info (is_write,
# before_set), torch.Tag's data_dependent_output / dynamic_output_shape / inplace_view
#   for: the op cache (trace/record/op_cache.py) decides once per op whether its outputs are fresh
#   tensors or its first argument, as FakeTensorMode's dispatch cache does. Read from torch 2.13.0,
#   torch/_ops.py, torch/_C/__init__.pyi (FunctionSchema, Argument, AliasInfo), torch/_subclasses/fake_tensor.py.
# --------------------------------------------------------------------------------------------
@_guard("op_schema_aliasing", "torch", "torch 2.13.0, torch/_ops.py and torch/_C/__init__.pyi")
def _check_op_schema_aliasing():
    add_ = torch.ops.aten.add_.Tensor
    if (add_.namespace, add_.is_view, torch.ops.aten.view.default.is_view) != ("aten", False, True):
        return "OpOverload.namespace / is_view no longer name the ATen namespace and view ops"
    for tag in ("data_dependent_output", "dynamic_output_shape", "inplace_view", "pointwise"):
        if not hasattr(torch.Tag, tag):
            return f"torch.Tag.{tag} is missing"
    schema = add_._schema
    first, ret = schema.arguments[0], schema.returns[0]
    if not (schema.is_mutable and first.alias_info.is_write and not first.kwarg_only and ret.alias_info.is_write
            and ret.alias_info.before_set == first.alias_info.before_set):
        return "aten::add_.Tensor's schema no longer says that it writes and returns self"
    return None


_check_op_schema_aliasing()


# --------------------------------------------------------------------------------------------
# ATen ops memgraph calls with positional arguments: their argument names, in order
#   for: the SDPA kernel emulation calls the attention kernels and asks the CPU choice; the
#   autocast emulation calls the half-to-float softmax kernels. Read from torch 2.13.0,
#   aten/src/ATen/native/native_functions.yaml (via torch.ops.aten.X.default._schema).
# --------------------------------------------------------------------------------------------
ASSUMED_SCHEMAS = {
    "_scaled_dot_product_flash_attention": (
        "query", "key", "value", "dropout_p", "is_causal", "return_debug_mask", "scale"),
    "_scaled_dot_product_efficient_attention": (
        "query", "key", "value", "attn_bias", "compute_log_sumexp", "dropout_p", "is_causal", "scale"),
    "_scaled_dot_product_cudnn_attention": (
        "query", "key", "value", "attn_bias", "compute_log_sumexp", "dropout_p", "is_causal",
        "return_debug_mask", "scale"),
    "_scaled_dot_product_flash_attention_for_cpu": (
        "query", "key", "value", "dropout_p", "is_causal", "attn_mask", "scale"),
    "_fused_sdp_choice": ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"),
    "native_dropout": ("input", "p", "train"),
    "_softmax": ("self", "dim", "half_to_float"),
    "_log_softmax": ("self", "dim", "half_to_float"),
}


@_guard("aten_schemas", "torch", "torch 2.13.0, aten/src/ATen/native/native_functions.yaml")
def _check_aten_schemas():
    for op, names in ASSUMED_SCHEMAS.items():
        schema = getattr(torch.ops.aten, op).default._schema
        found = tuple(a.name for a in schema.arguments)
        if found != names:
            return f"aten::{op} now takes ({', '.join(found)}), memgraph passes ({', '.join(names)})"
        if schema.returns[0].name not in ("", "output"):  # memgraph takes result [0] as the output
            return f"aten::{op} now returns {schema.returns[0].name!r} first, not the output"
    return None


_check_aten_schemas()


# --------------------------------------------------------------------------------------------
# aten::_fused_sdp_choice and torch._C._get_sdp_priority_order
#   for: the cpu target asks this build which SDPA kernel CPU tensors get; the cuda target honours
#   the priority order set with torch.nn.attention.sdpa_kernel. Both answer SDPBackend values
#   (torch.nn.attention.SDPBackend, public). Read from torch 2.13.0,
#   aten/src/ATen/native/transformers/sdp_utils_cpp.h and torch/nn/attention/__init__.py.
# --------------------------------------------------------------------------------------------
def _sdp_backend_names() -> dict[int, str]:
    from torch.nn.attention import SDPBackend

    return {int(SDPBackend.MATH.value): "math", int(SDPBackend.FLASH_ATTENTION.value): "flash",
            int(SDPBackend.EFFICIENT_ATTENTION.value): "efficient", int(SDPBackend.CUDNN_ATTENTION.value): "cudnn"}


@_guard("sdp_choice", "torch", "torch 2.13.0, aten/src/ATen/native/transformers/sdp_utils_cpp.h")
def _check_sdp_choice():
    problem = _missing(torch._C, "_get_sdp_priority_order")
    if problem:
        return problem
    names = _sdp_backend_names()
    order = torch._C._get_sdp_priority_order()
    if not set(names) <= set(order):
        return f"torch._C._get_sdp_priority_order() returned {order}, not a permutation of the SDPBackend values"
    returns = torch.ops.aten._fused_sdp_choice.default._schema.returns
    if len(returns) != 1 or str(returns[0].type) != "int":
        return "aten::_fused_sdp_choice no longer returns one int (an SDPBackend value)"
    return None


_check_sdp_choice()


def sdp_priority_order() -> tuple[str, ...]:
    """The SDPA backends in the order PyTorch tries them now ("flash", "efficient", "math", "cudnn")."""
    names = _sdp_backend_names()
    return tuple(names[i] for i in torch._C._get_sdp_priority_order() if i in names)


def fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa) -> str:
    """The backend name ``aten::_fused_sdp_choice`` picks for these (CPU) tensors."""
    choice = torch.ops.aten._fused_sdp_choice(q, k, v, attn_mask, dropout_p, is_causal, scale=scale,
                                              enable_gqa=enable_gqa)
    return _sdp_backend_names().get(int(choice), "math")


# --------------------------------------------------------------------------------------------
# torch._C._current_graph_task_id
#   for: the module tracker ends a module's backward once per backward pass (graph task); -1
#   outside backward (ModTracker.is_bw reads it the same way). Read from torch 2.13.0,
#   torch/csrc/autograd/init.cpp.
# --------------------------------------------------------------------------------------------
@_guard("graph_task_id", "torch", "torch 2.13.0, torch/csrc/autograd/init.cpp")
def _check_graph_task_id():
    problem = _missing(torch._C, "_current_graph_task_id")
    if problem:
        return problem
    if torch._C._current_graph_task_id() != -1:
        return "torch._C._current_graph_task_id() outside backward is no longer -1"
    return None


_check_graph_task_id()
current_graph_task_id = torch._C._current_graph_task_id


# --------------------------------------------------------------------------------------------
# Tensor._use_count, torch._C._storage_Use_Count
#   for: autograd's in-place gradient accumulation (trace/emulate/inplace_grad_sum.py) decides as the engine's
#   ``can_accumulate_inplace`` does (torch/csrc/autograd/input_buffer.cpp), from the reference counts of a
#   tensor and of its storage. Read from torch 2.13.0, torch/csrc/autograd/python_variable.cpp and
#   torch/csrc/StorageMethods.cpp.
# --------------------------------------------------------------------------------------------
@_guard("use_counts", "torch", "torch 2.13.0, python_variable.cpp / StorageMethods.cpp")
def _check_use_counts():
    problem = _missing(torch.Tensor, "_use_count") or _missing(torch._C, "_storage_Use_Count")
    if problem:
        return problem
    t = torch.empty(2, device="meta")
    u = t.view(2)
    if t._use_count() < 1 or torch._C._storage_Use_Count(t.untyped_storage()._cdata) < 1:
        return "reference counts no longer positive"
    if u is t:
        return "view returned the same object"
    return None


def use_counts(t: torch.Tensor) -> tuple[int, int]:
    """(references to ``t``'s TensorImpl, references to its storage)."""
    require("use_counts")
    return t._use_count(), torch._C._storage_Use_Count(t.untyped_storage()._cdata)


# --------------------------------------------------------------------------------------------
# torch.distributed._tools.mod_tracker.ModTracker, and a copy of its _fw_pre_hook
#   for: backward attribution (which module's backward is running). memgraph's tracker changes
#   one line of ModTracker._fw_pre_hook (how the end of a module's backward is detected, see
#   memgraph/trace/record/module_tracking.py); :class:`ModTrackerCopy` is that method copied verbatim
#   with the line made overridable (:meth:`ModTrackerCopy.on_backward_end`), so the copy must be
#   re-read whenever the original changes: the guard compares the original's source hash.
#   Read from torch 2.13.0 (same source in 2.12.1), torch/distributed/_tools/mod_tracker.py.
# --------------------------------------------------------------------------------------------


def _import_mod_tracker():
    """``torch.distributed._tools.mod_tracker`` without running its package's ``__init__``.

    ``torch/distributed/_tools/__init__.py`` (torch 2.13.0) imports every memory and runtime estimator
    there (FSDPMemTracker, MemTracker, RuntimeEstimator, SACEstimator, hence torch.distributed.tensor):
    1.7 CPU s of a 4 s import, none of it used here. mod_tracker.py itself imports only torch, torch.nn
    and torch.utils (no relative imports), so the file is loaded alone and registered under its own
    name: a later import of the package reuses it. Any surprise: the ordinary import."""
    import importlib.util
    import os
    import sys

    name = "torch.distributed._tools.mod_tracker"
    if name not in sys.modules:
        path = os.path.join(os.path.dirname(torch.distributed.__file__), "_tools", "mod_tracker.py")
        spec = importlib.util.spec_from_file_location(name, path) if os.path.isfile(path) else None
        if spec is None or spec.loader is None:
            importlib.import_module(name)
        else:
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[name]
                raise
    return sys.modules[name].ModTracker


ModTracker = _import_mod_tracker()

MOD_TRACKER_FW_PRE_HOOK_HASHES = {"70e122fa78b3679b": "torch 2.12.1 and 2.13.0"}


@_guard("mod_tracker", "torch", "torch 2.13.0, torch/distributed/_tools/mod_tracker.py")
def _check_mod_tracker():
    problem = _unknown_source(ModTracker._fw_pre_hook, MOD_TRACKER_FW_PRE_HOOK_HASHES, "ModTracker._fw_pre_hook")
    if problem:
        return problem
    for method, params in (("_get_mod_name", ["self", "mod"]), ("_get_append_fn", ["self", "w_mod", "name", "is_bw"]),
                           ("_get_pop_fn", ["self", "w_mod", "name", "is_bw"])):
        if _parameters(getattr(ModTracker, method)) != params:
            return f"ModTracker.{method} no longer takes ({', '.join(params)})"
    tracker = ModTracker()
    problem = _missing(tracker, "_post_bw_callbacks_to_enqueue", "is_bw", "register_user_hooks", "clear_user_hooks")
    if problem or not hasattr(tracker, "_user_pre_fw_hook"):
        return problem or "ModTracker._user_pre_fw_hook is missing"
    return _missing(torch._dynamo.eval_frame, "_is_in_optimized_module")


class ModTrackerCopy(ModTracker):
    """``ModTracker`` with ``_fw_pre_hook`` copied from torch 2.13.0; the end of a module's backward
    is registered by :meth:`on_backward_end` (torch: ``register_multi_grad_hook(tensors, fn)``)."""

    def __init__(self):
        require("mod_tracker")
        super().__init__()

    def on_backward_end(self, tensors: list[torch.Tensor], fn: Callable) -> None:
        torch.autograd.graph.register_multi_grad_hook(tensors, fn)

    def _fw_pre_hook(self, mod, input):  # copied; only the marked line differs
        if torch._dynamo.eval_frame._is_in_optimized_module():
            return

        name = self._get_mod_name(mod)
        w_mod = weakref.ref(mod)
        self._get_append_fn(w_mod, name, False)()
        if self._user_pre_fw_hook is not None:
            self._user_pre_fw_hook(mod, input)
        args, _ = tree_flatten(input)
        tensors = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
        if not self.is_bw:
            if tensors:
                self.on_backward_end(tensors, self._get_pop_fn(w_mod, name, True))  # memgraph: overridable
            else:
                self._post_bw_callbacks_to_enqueue.append(
                    self._get_pop_fn(w_mod, name, True)
                )


# --------------------------------------------------------------------------------------------
# torch.optim.optimizer._get_fused_kernels_supported_devices
#   for: fused optimizers refuse parameters on devices outside this list (meta is not in it);
#   memgraph adds "meta" while it traces, by patching the name in torch.optim.optimizer, where
#   _default_to_fused_or_foreach and _device_dtype_check_for_fused look it up. Read from
#   torch 2.13.0, torch/optim/optimizer.py and torch/utils/_foreach_utils.py.
# --------------------------------------------------------------------------------------------
@_guard("fused_devices", "torch", "torch 2.13.0, torch/optim/optimizer.py")
def _check_fused_devices():
    import torch.optim.optimizer as optimizer_module

    problem = _missing(optimizer_module, "_get_fused_kernels_supported_devices", "_device_dtype_check_for_fused",
                       "_default_to_fused_or_foreach")
    if problem:
        return problem
    devices = optimizer_module._get_fused_kernels_supported_devices()
    if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices):
        return "torch.optim.optimizer._get_fused_kernels_supported_devices() no longer returns a list of device types"
    for user in (optimizer_module._device_dtype_check_for_fused, optimizer_module._default_to_fused_or_foreach):
        if "_get_fused_kernels_supported_devices" not in user.__code__.co_names:
            return f"torch.optim.optimizer.{user.__name__} no longer asks _get_fused_kernels_supported_devices"
    return None


@contextlib.contextmanager
def _optimizer_devices_also(guard: str, lookup: str, device_type: str):
    """While open, ``torch.optim.optimizer.<lookup>()`` also lists ``device_type``; undone on exit."""
    require(guard)
    import torch.optim.optimizer as optimizer_module

    devices = getattr(optimizer_module, lookup)
    with mock.patch.object(optimizer_module, lookup, lambda: [*devices(), device_type]):
        yield


def fused_kernels_also_on(device_type: str):
    """While open, fused optimizers accept parameters on ``device_type``; the patch is undone on exit."""
    return _optimizer_devices_also("fused_devices", "_get_fused_kernels_supported_devices", device_type)


# --------------------------------------------------------------------------------------------
# torch.optim.optimizer._get_foreach_kernels_supported_devices
#   for: ``memgraph run`` on the cuda target: an optimizer built without foreach= picks the foreach
#   implementation for CUDA parameters (``_default_to_fused_or_foreach``), not for meta ones; memgraph
#   adds "meta" while the script runs, by patching the name where optimizer.py looks it up. Read from
#   torch 2.13.0, torch/optim/optimizer.py and torch/utils/_foreach_utils.py.
# --------------------------------------------------------------------------------------------
@_guard("foreach_devices", "torch", "torch 2.13.0, torch/optim/optimizer.py")
def _check_foreach_devices():
    import torch.optim.optimizer as optimizer_module

    problem = _missing(optimizer_module, "_get_foreach_kernels_supported_devices", "_default_to_fused_or_foreach")
    if problem:
        return problem
    if "_get_foreach_kernels_supported_devices" not in optimizer_module._default_to_fused_or_foreach.__code__.co_names:
        return "torch.optim.optimizer._default_to_fused_or_foreach no longer asks _get_foreach_kernels_supported_devices"
    return None


def foreach_kernels_also_on(device_type: str):
    """While open, optimizers default to foreach for parameters on ``device_type``; undone on exit."""
    return _optimizer_devices_also("foreach_devices", "_get_foreach_kernels_supported_devices", device_type)


# --------------------------------------------------------------------------------------------
# torch.library.Library(...).impl / ._destroy, torch._C._dispatch_has_kernel_for_dispatch_key
#   for: aten::_fused_sgd_ has no Meta kernel; memgraph registers a no-op one while it traces
#   (the op updates its Tensor[] arguments in place and returns nothing, so on meta there is
#   nothing to compute or allocate) and destroys the registration afterwards. Read from
#   torch 2.13.0, torch/library.py and aten/src/ATen/native/native_functions.yaml.
# --------------------------------------------------------------------------------------------
NO_META_KERNEL_OPS = ("_fused_sgd_", "_fused_sgd_.tensor_lr")  # overloads of aten ops given a no-op Meta kernel


@_guard("meta_kernel_registration", "torch", "torch 2.13.0, torch/library.py")
def _check_meta_kernel_registration():
    problem = (_missing(torch.library.Library, "impl", "_destroy")
               or _missing(torch._C, "_dispatch_has_kernel_for_dispatch_key"))
    if problem:
        return problem
    for name in NO_META_KERNEL_OPS:
        op, _, overload = name.partition(".")
        schema = getattr(getattr(torch.ops.aten, op), overload or "default")._schema
        lists = [a for a in schema.arguments if str(a.type) == "List[Tensor]"]
        if schema.returns or not lists or not all(a.alias_info is not None and a.alias_info.is_write for a in lists):
            return f"aten::{name} is no longer an in-place op on its Tensor[] arguments that returns nothing"
    return None


def _has_meta_kernel(name: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "Meta")


@contextlib.contextmanager
def noop_meta_kernels(names: tuple[str, ...] = NO_META_KERNEL_OPS):
    """While open, the aten overloads ``names`` that have no Meta kernel get one that does nothing."""
    require("meta_kernel_registration")
    lib = torch.library.Library("aten", "IMPL")
    try:
        for name in names:
            if not _has_meta_kernel(name):  # a later torch may ship its own
                lib.impl(name, _noop_kernel, "Meta")
        yield
    finally:
        lib._destroy()


def _noop_kernel(*_args, **_kwargs) -> None:
    return None


# --------------------------------------------------------------------------------------------
# torch.amp.GradScaler: _maybe_opt_step (overridden), _scale and _growth_tracker (read)
#   for: on meta, GradScaler's "were there inf/NaN gradients?" check (``.item()`` of found_inf)
#   has no value; the override takes the finite branch. The scale and growth tracker are the
#   scaler's state kept across steps. Read from torch 2.13.0 (same source in 2.12.1),
#   torch/amp/grad_scaler.py.
# --------------------------------------------------------------------------------------------
from torch.amp.grad_scaler import GradScaler  # noqa: E402

# torch 2.11.0's source differs from 2.13.0's in annotations only (Optional[float] for float | None)
GRAD_SCALER_MAYBE_OPT_STEP_HASHES = {"791985cd2398f5ae": "torch 2.12.1 and 2.13.0", "4dcdcf394772a040": "torch 2.11.0"}


@_guard("grad_scaler", "torch", "torch 2.13.0, torch/amp/grad_scaler.py")
def _check_grad_scaler():
    problem = _unknown_source(GradScaler._maybe_opt_step, GRAD_SCALER_MAYBE_OPT_STEP_HASHES,
                              "GradScaler._maybe_opt_step")
    if problem:
        return problem
    stored = GradScaler._lazy_init_scale_growth_tracker.__code__.co_names
    if "_scale" not in stored or "_growth_tracker" not in stored:
        return "GradScaler._lazy_init_scale_growth_tracker no longer sets _scale and _growth_tracker"
    return None


class GradScalerAssumingFiniteGrads(GradScaler):
    """``torch.amp.GradScaler`` whose step always runs (its inf/NaN check assumed to find none)."""

    def __init__(self, *args, **kwargs):
        require("grad_scaler")
        super().__init__(*args, **kwargs)

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        # torch: `if not sum(v.item() for v in optimizer_state["found_inf_per_device"].values())`
        return optimizer.step(*args, **kwargs)


@contextlib.contextmanager
def grad_scalers_assume_finite_grads():
    """While open, every ``torch.amp.GradScaler`` (and ``torch.cuda.amp.GradScaler``, a subclass) steps as
    :class:`GradScalerAssumingFiniteGrads` does (``memgraph run``: the script's own scaler on meta); undone on exit."""
    require("grad_scaler")
    with mock.patch.object(GradScaler, "_maybe_opt_step", GradScalerAssumingFiniteGrads._maybe_opt_step):
        yield


def grad_scaler_state(scaler: GradScaler) -> tuple[torch.Tensor, torch.Tensor]:
    """The scale and growth-tracker tensors a GradScaler keeps across steps (made at its first ``scale``)."""
    require("grad_scaler")
    return scaler._scale, scaler._growth_tracker


# --------------------------------------------------------------------------------------------
# torch._C._select_conv_backend, torch._C._get_nnpack_enabled, torch._prims_common.suggest_memory_format
#   for: the cpu target's convolution workspaces depend on the backend ATen picks
#   (Convolution.cpp ``_select_conv_backend``, asked through its binding, overload with
#   bias_sizes) and on memory formats; the transcription of the selection reads the NNPACK flag.
#   Read from torch 2.13.0, torch/csrc/Module.cpp, torch/backends/nnpack/__init__.py,
#   torch/_prims_common/__init__.py.
# --------------------------------------------------------------------------------------------
@_guard("conv_backend", "torch", "torch 2.13.0, torch/csrc/Module.cpp (_select_conv_backend)")
def _check_conv_backend():
    problem = _missing(torch._C, "_select_conv_backend", "_get_nnpack_enabled")
    if problem:
        return problem
    doc = torch._C._select_conv_backend.__doc__ or ""
    if "bias_sizes" not in doc or "_ConvBackend" not in doc:
        return "torch._C._select_conv_backend has no overload (..., groups, bias_sizes) -> _ConvBackend any more"
    if not isinstance(torch._C._get_nnpack_enabled(), bool):
        return "torch._C._get_nnpack_enabled() no longer returns a bool"
    return None


def select_conv_backend(x, w, stride, padding, dilation, transposed: bool, output_padding, groups: int) -> str:
    """The name of the ``ConvBackend`` ATen picks for ``x``/``w`` (e.g. "Mkldnn", "Slow2d")."""
    require("conv_backend")
    return torch._C._select_conv_backend(x, w, None, stride, padding, dilation, transposed, output_padding,
                                         groups, None).name


def nnpack_enabled() -> bool:
    require("conv_backend")
    return torch._C._get_nnpack_enabled()


@_guard("suggest_memory_format", "torch", "torch 2.13.0, torch/_prims_common/__init__.py")
def _check_suggest_memory_format():
    from torch import _prims_common

    problem = _missing(_prims_common, "suggest_memory_format")
    if problem:
        return problem
    x = torch.empty(1, 3, 2, 2, device="meta").to(memory_format=torch.channels_last)
    if _prims_common.suggest_memory_format(x) != torch.channels_last:
        return "torch._prims_common.suggest_memory_format no longer answers channels_last for channels-last strides"
    return None


_check_suggest_memory_format()
from torch._prims_common import suggest_memory_format  # noqa: E402


# --------------------------------------------------------------------------------------------
# Kineto results of torch.profiler: prof.profiler.kineto_results.events(), _KinetoEvent methods
#   for: the cpu ground truth and the CPU kernel probes read the allocator events ("[memory]")
#   with their time and size. Read from torch 2.13.0, torch/autograd/profiler.py and
#   torch/csrc/autograd/init.cpp (_KinetoEvent).
# --------------------------------------------------------------------------------------------
@_guard("kineto", "torch", "torch 2.13.0, torch/autograd/profiler.py")
def _check_kineto():
    event = torch._C._autograd._KinetoEvent
    problem = _missing(event, "name", "start_ns", "nbytes", "device_type")
    if problem:
        return problem
    if "kineto_results" not in inspect.getsource(torch.autograd.profiler.profile):
        return "torch.autograd.profiler.profile no longer keeps kineto_results"
    return None


def kineto_events(prof) -> list:
    """The Kineto events (``_KinetoEvent``) of a finished ``torch.profiler.profile``."""
    require("kineto")
    return prof.profiler.kineto_results.events()


# allocation_events
#   for: the distributed cpu ground truth (memgraph/measure/distributed.py) follows each allocation by its address
#   (frees the profiler never reported; gloo's staging buffers by the collective that allocated them). Read from
#   torch 2.13.0, torch/csrc/autograd/init.cpp (``_ProfilerResult.experimental_event_tree``) and
#   torch/csrc/profiler/python/init.cpp (``_ProfilerEvent``: ``name``, ``start_time_ns``, ``end_time_ns``,
#   ``start_tid``, ``children``, ``extra_fields``; ``_ExtraFields_Allocation``: ``ptr``, ``alloc_size``).
@_guard("allocation_events", "torch", "torch 2.13.0, torch/csrc/profiler/python/init.cpp")
def _check_allocation_events():
    from torch._C._profiler import _ExtraFields_Allocation, _ProfilerEvent

    return (_missing(_ExtraFields_Allocation, "ptr", "alloc_size")
            or _missing(_ProfilerEvent, "name", "start_time_ns", "end_time_ns", "start_tid", "children",
                        "extra_fields")
            or _missing(torch._C._autograd._ProfilerResult, "experimental_event_tree"))


def allocation_events(prof) -> tuple[list[tuple[int, int, int, int, tuple[str, ...]]], dict[str, tuple[int, int, int]]]:
    """Of a finished ``torch.profiler.profile`` with memory events: every allocator event as (time in ns, address,
    +bytes allocated / -bytes freed, thread, names of the ops around it, outermost first), in time order (stable);
    and every op's (start, end, thread) by name (the last of a name wins)."""
    require("allocation_events")
    from torch._C._profiler import _ExtraFields_Allocation

    events, ops = [], {}
    stack = [(root, ()) for root in reversed(prof.profiler.kineto_results.experimental_event_tree())]
    while stack:
        event, outer = stack.pop()
        if isinstance(event.extra_fields, _ExtraFields_Allocation):
            events.append((event.start_time_ns, event.extra_fields.ptr, event.extra_fields.alloc_size,
                           event.start_tid, outer))
            continue
        ops[event.name] = (event.start_time_ns, event.end_time_ns, event.start_tid)
        stack.extend((child, (*outer, event.name)) for child in reversed(event.children))  # popped in order
    events.sort(key=lambda e: e[0])
    return events, ops


# --------------------------------------------------------------------------------------------
# torch.cuda.memory._record_memory_history / _dump_snapshot / _set_allocator_settings
#   for: ``measure --snapshot`` (the allocator's history for pytorch.org/memory_viz) and
#   ``measure --allocator-conf`` (settings before the first allocation). Read from torch 2.13.0,
#   torch/cuda/memory.py.
# --------------------------------------------------------------------------------------------
@_guard("cuda_memory", "torch", "torch 2.13.0, torch/cuda/memory.py")
def _check_cuda_memory():
    import torch.cuda.memory as cuda_memory

    problem = _missing(cuda_memory, "_record_memory_history", "_dump_snapshot", "_set_allocator_settings")
    if problem:
        return problem
    for name, params in (("_record_memory_history", ("enabled", "max_entries")), ("_dump_snapshot", ("filename",)),
                         ("_set_allocator_settings", ("env",))):
        if not set(params) <= set(_parameters(getattr(cuda_memory, name))):
            return f"torch.cuda.memory.{name} no longer takes {', '.join(params)}"
    return None


def set_allocator_settings(conf: str) -> None:
    require("cuda_memory")
    torch.cuda.memory._set_allocator_settings(conf)


def start_memory_history(max_entries: int) -> None:
    require("cuda_memory")
    torch.cuda.memory._record_memory_history(max_entries=max_entries)


def dump_memory_history(path: str) -> None:
    """Write the recorded history to ``path`` and stop recording."""
    require("cuda_memory")
    torch.cuda.memory._dump_snapshot(path)
    torch.cuda.memory._record_memory_history(enabled=None)


# --------------------------------------------------------------------------------------------
# transformers: PreTrainedModel._from_config, and maybe_autocast on meta
#   for: building a model from a config without weights, with the attention implementation and
#   dtype given (``_from_config`` is what the Auto classes' from_config call); and a forward on
#   meta: transformers' ``maybe_autocast`` must give a no-op context for device "meta" (from
#   transformers 5.4; before, models' rotary embeddings raised "unknown device type for autocast").
#   Read from transformers 5.23.0, transformers/modeling_utils.py and transformers/utils/generic.py.
# --------------------------------------------------------------------------------------------
@_guard("transformers_from_config", "transformers", "transformers 5.23.0, transformers/modeling_utils.py")
def _check_transformers_from_config():
    from transformers import PreTrainedModel

    params = inspect.signature(PreTrainedModel._from_config).parameters
    if "config" not in params or not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return "PreTrainedModel._from_config no longer takes (config, **kwargs)"
    source = inspect.getsource(PreTrainedModel._from_config)
    for kwarg in ("dtype", "attn_implementation"):
        if f'"{kwarg}"' not in source:
            return f"PreTrainedModel._from_config no longer reads the keyword {kwarg!r}"
    return None


@_guard("transformers_meta_autocast", "transformers", "transformers 5.23.0, transformers/utils/generic.py")
def _check_transformers_meta_autocast():
    from transformers.utils import generic

    try:
        with generic.maybe_autocast("meta", enabled=False):
            return None
    except Exception as e:  # noqa: BLE001 - transformers < 5.4 asks torch.autocast("meta"), which refuses
        return (f"transformers.utils.generic.maybe_autocast('meta') raises {type(e).__name__} "
                f"({(str(e).splitlines() or [''])[0]}): models' forward cannot run on meta")


# --------------------------------------------------------------------------------------------
# transformers_default_attention
#   for: the attention implementation transformers gives a model class when none is requested
#   (memgraph's --attn auto): PreTrainedModel.get_correct_attn_implementation turns None into "sdpa"
#   and falls back to "eager" when _sdpa_can_dispatch raises, i.e. when the class's _supports_sdpa is
#   False. Read from transformers 5.23.0, transformers/modeling_utils.py.
# --------------------------------------------------------------------------------------------
@_guard("transformers_default_attention", "transformers", "transformers 5.23.0, transformers/modeling_utils.py")
def _check_transformers_default_attention():
    from transformers import PreTrainedModel

    if not isinstance(getattr(PreTrainedModel, "_supports_sdpa", None), bool):
        return "PreTrainedModel._supports_sdpa is missing"
    source = inspect.getsource(PreTrainedModel.get_correct_attn_implementation)
    if '"sdpa" if requested_attention is None' not in source:
        return "PreTrainedModel.get_correct_attn_implementation no longer turns None into 'sdpa'"
    return None


def default_attention(cls) -> str:
    """What transformers builds ``cls`` with when no ``attn_implementation`` is given: ``"sdpa"`` where
    the class supports it (``cls._supports_sdpa``), else ``"eager"``."""
    require("transformers_default_attention")
    return "sdpa" if cls._supports_sdpa else "eager"


def model_from_config(cls, config, attn_implementation: str, dtype: torch.dtype) -> torch.nn.Module:
    """``cls`` (a transformers model class) built from ``config``, no weights loaded."""
    require("transformers_from_config")
    require("transformers_meta_autocast")
    return cls._from_config(config, attn_implementation=attn_implementation, dtype=dtype)


# --------------------------------------------------------------------------------------------
# torch.distributed on meta with the fake process group: FakeStore, DDP's parameter check, FSDP2's
# device, device handle, meta check and storage resizes
#   for: --strategy ddp|fsdp run PyTorch's own DistributedDataParallel and fully_shard on meta
#   (memgraph/trace/parallel/distributed.py). Read from torch 2.13.0:
#   - torch/testing/_internal/distributed/fake_pg.py: FakeStore (the "fake" backend's store);
#   - torch/nn/parallel/distributed.py: DDP.__init__ calls _verify_param_shape_across_processes,
#     which reads a shape tensor with .item() (refused on meta); it checks ranks agree, no memory;
#   - torch/distributed/fsdp/_fully_shard/_fully_shard.py: fully_shard takes its device from
#     _fsdp_init._get_device_from_mesh (the mesh's, cpu here): on meta the gathered parameters
#     must be meta too;
#   - _fsdp_param_group.py, _fsdp_collectives.py, _fsdp_state.py: streams and events come from
#     device_mesh._get_device_handle(device.type) (getattr(torch, type)): torch.cpu's no-op
#     streams and events serve meta, as they serve a CPU run, except that a stream's record_event
#     must return an event (HSDP's all-reduce checks it on any device but cpu);
#   - _fsdp_param_group.FSDPParamGroup._validate_no_meta_params refuses meta parameters in lazy_init;
#   - _fsdp_param.alloc_storage / free_storage: FSDP2 frees and re-allocates the unsharded parameters
#     with untyped_storage().resize_(0 | size), which no dispatch mode sees: they are reported to
#     the recorder.
#   - _fsdp_param_group.FSDPParamGroup.finalize_backward waits on an all-gather that was started and never
#     waited for (a "mistargeted unshard": backward prefetch all-gathers the group that ran forward just
#     before, e.g. LLaVA's last vision layer, whose output vision_feature_layer=-2 leaves out of the loss,
#     so its pre-backward never comes) with torch.accelerator.current_stream(), not the group's device
#     handle; a CPU build has no accelerator and raises. On a GPU the wait is the current stream waiting
#     on the all-gather event, then the result (and its output buffer) is dropped; on meta the event is
#     waited through the device handle (a no-op, as a CPU run's) and the original then drops the result.
# --------------------------------------------------------------------------------------------
_FSDP_MODULES = ("_fully_shard", "_fsdp_init", "_fsdp_param", "_fsdp_param_group", "_fsdp_collectives",
                 "_fsdp_state")


def _fsdp_module(name: str):
    import importlib

    return importlib.import_module(f"torch.distributed.fsdp._fully_shard.{name}")


@_guard("fake_distributed", "torch", "torch 2.13.0, torch/nn/parallel/distributed.py and "
        "torch/distributed/fsdp/_fully_shard/")
def _check_fake_distributed():
    from torch.testing._internal.distributed import fake_pg
    import torch.nn.parallel.distributed as ddp

    problem = _missing(fake_pg, "FakeStore") or _missing(ddp, "_verify_param_shape_across_processes")
    if problem:
        return problem
    fsdp = {name: _fsdp_module(name) for name in _FSDP_MODULES}
    problem = (_missing(fsdp["_fully_shard"], "_get_device_from_mesh")
               or _missing(fsdp["_fsdp_param"], "alloc_storage", "free_storage")
               or _missing(fsdp["_fsdp_param_group"], "alloc_storage")
               or _missing(fsdp["_fsdp_param_group"].FSDPParamGroup, "_validate_no_meta_params"))
    if problem:
        return problem
    for name in ("alloc_storage", "free_storage"):
        if "resize_" not in getattr(fsdp["_fsdp_param"], name).__code__.co_names:
            return f"torch.distributed.fsdp._fully_shard._fsdp_param.{name} no longer resizes the storage"
    for name in ("_fsdp_init", "_fsdp_param_group", "_fsdp_collectives", "_fsdp_state"):
        if not hasattr(fsdp[name], "_get_device_handle"):
            return f"torch.distributed.fsdp._fully_shard.{name} no longer imports _get_device_handle"
    finalize = inspect.getsource(fsdp["_fsdp_param_group"].FSDPParamGroup.finalize_backward)
    if "self._all_gather_result.all_gather_event" not in finalize:
        return "FSDPParamGroup.finalize_backward no longer waits on a pending all-gather's event"
    return None


class _MetaStream(torch.cpu.Stream):
    """torch.cpu's no-op stream, except that ``record_event`` returns an event: torch.cpu.Stream's returns
    None, which FSDP2's HSDP all-reduce refuses on a device other than ``cpu`` (torch 2.13
    _fsdp_param_group.FSDPParamGroup.post_backward: "Expected all_reduce_event to be set for non-CPU device")."""

    def record_event(self, event=None):
        return event if event is not None else torch.cpu.Event()


class _MetaDeviceHandle:
    """FSDP2's device handle for meta: torch.cpu with :class:`_MetaStream` streams."""

    Stream = _MetaStream
    Event = torch.cpu.Event
    stream = staticmethod(torch.cpu.stream)
    _current = None

    @classmethod
    def current_stream(cls, device=None):
        if cls._current is None:
            cls._current = _MetaStream()
        return cls._current

    def __getattr__(self, name):  # anything else FSDP2 reads: torch.cpu's
        return getattr(torch.cpu, name)


_META_DEVICE_HANDLE = _MetaDeviceHandle()


# --------------------------------------------------------------------------------------------
# dtensor_sharding_cache
#   for: tracing another rank of a --strategy tp run in the same process (memgraph/trace/parallel/ranks.py): DTensor's
#   sharding propagator caches each op's output sharding, including the local shapes of view ops, keyed by the
#   op's schema and not by the rank, twice: in Python (torch 2.13 torch/distributed/tensor/_sharding_prop.py:
#   ShardingPropagator.propagate_op_sharding is a LocalLRUCache of propagate_op_sharding_non_cached) and in the
#   C++ dispatch fast path. torch/distributed/tensor/debug/__init__.py clears both
#   (_clear_python_sharding_prop_cache, _clear_fast_path_sharding_prop_cache). With a dimension that does
#   not divide by the ranks, rank 1 would otherwise reuse rank 0's local shapes.
# --------------------------------------------------------------------------------------------
@_guard("dtensor_sharding_cache", "torch", "torch 2.13.0, torch/distributed/tensor/debug/__init__.py")
def _check_dtensor_sharding_cache():
    from torch.distributed.tensor import debug

    return _missing(debug, "_clear_python_sharding_prop_cache", "_clear_fast_path_sharding_prop_cache")


def clear_dtensor_sharding_cache() -> None:
    """Forget DTensor's cached shardings (they hold the local shapes of the rank that computed them)."""
    require("dtensor_sharding_cache")
    from torch.distributed.tensor import debug

    debug._clear_python_sharding_prop_cache()
    debug._clear_fast_path_sharding_prop_cache()


def fake_store():
    """The store of PyTorch's fake process group (``dist.init_process_group("fake", store=...)``)."""
    require("fake_distributed")
    from torch.testing._internal.distributed.fake_pg import FakeStore

    return FakeStore()


@contextlib.contextmanager
def distributed_on_meta(on_alloc_storage: Callable[[torch.Tensor], None],
                        on_free_storage: Callable[[torch.Tensor], None]):
    """While open, DDP and FSDP2 run on meta tensors (see the section comment); FSDP2's storage resizes
    call ``on_free_storage(t)`` before a free and ``on_alloc_storage(t)`` after an allocation."""
    require("fake_distributed")
    import torch.nn.parallel.distributed as ddp

    fsdp = {name: _fsdp_module(name) for name in _FSDP_MODULES}
    original_alloc, original_free = fsdp["_fsdp_param"].alloc_storage, fsdp["_fsdp_param"].free_storage

    def alloc_storage(tensor):
        grows = tensor.untyped_storage().size() != tensor.numel() * tensor.itemsize
        original_alloc(tensor)
        if grows:
            on_alloc_storage(tensor)

    def free_storage(tensor):
        if tensor.untyped_storage().size() != 0:
            on_free_storage(tensor)
        original_free(tensor)

    def device_handle(original):
        return lambda device_type="cuda": _META_DEVICE_HANDLE if device_type == "meta" else original(device_type)

    group_class = fsdp["_fsdp_param_group"].FSDPParamGroup
    original_finalize = group_class.finalize_backward

    def finalize_backward(self):
        pending = self._all_gather_result
        if pending is not None and pending.all_gather_event is not None and self.device.type == "meta":
            self.device_handle.current_stream().wait_event(pending.all_gather_event)
            self._all_gather_result = pending._replace(all_gather_event=None)
        return original_finalize(self)

    with contextlib.ExitStack() as stack:
        patch = stack.enter_context
        patch(mock.patch.object(ddp, "_verify_param_shape_across_processes", lambda *a, **k: None))
        patch(mock.patch.object(fsdp["_fully_shard"], "_get_device_from_mesh", lambda mesh: torch.device("meta")))
        patch(mock.patch.object(fsdp["_fsdp_param_group"].FSDPParamGroup, "_validate_no_meta_params",
                                lambda self: None))
        patch(mock.patch.object(group_class, "finalize_backward", finalize_backward))
        patch(mock.patch.object(fsdp["_fsdp_param"], "alloc_storage", alloc_storage))
        patch(mock.patch.object(fsdp["_fsdp_param"], "free_storage", free_storage))
        patch(mock.patch.object(fsdp["_fsdp_param_group"], "alloc_storage", alloc_storage))
        for module in fsdp.values():
            if hasattr(module, "_get_device_handle"):
                patch(mock.patch.object(module, "_get_device_handle", device_handle(module._get_device_handle)))
        yield


# --------------------------------------------------------------------------------------------
# fsdp1_on_meta
#   for: --strategy fsdp1 (memgraph/trace/parallel/fsdp1.py): torch's FSDP1 FullyShardedDataParallel wrapping a model
#   whose parameters stay on meta, on the fake process group. Read from torch 2.13.0
#   torch/distributed/fsdp/_init_utils.py and _flat_param.py, torch/distributed/utils.py:
#   * _init_param_handle_from_module materialises a module with meta parameters (_need_to_materialize_module ->
#     _materialize_meta_module: to_empty on the compute device and reset_parameters()); the trace keeps them on
#     meta, so the module is reported as not needing it;
#   * _FSDPDeviceHandle.from_device(meta) looks up ``torch.meta`` (there is none): FSDP1 gets memgraph's meta handle
#     (torch.cpu's no-op streams and events, current_device "meta", so _get_compute_device agrees with device_id);
#   * FlatParamHandle frees and re-allocates the unsharded (and mixed-precision) flat parameters by resizing their
#     storages (_flat_param._free_storage / _alloc_storage, imported from torch.distributed.utils), which no op
#     shows: the recorder is told, as for FSDP2 (distributed_on_meta).
# --------------------------------------------------------------------------------------------
@_guard("fsdp1_on_meta", "torch", "torch 2.13.0, torch/distributed/fsdp/_init_utils.py and _flat_param.py")
def _check_fsdp1_on_meta():
    from torch.distributed.fsdp import _common_utils, _flat_param, _init_utils

    problem = (_missing(_init_utils, "_need_to_materialize_module", "_materialize_meta_module")
               or _missing(_common_utils._FSDPDeviceHandle, "from_device")
               or _missing(_flat_param, "_alloc_storage", "_free_storage"))
    if problem:
        return problem
    if "_need_to_materialize_module" not in _init_utils._init_param_handle_from_module.__code__.co_names:
        return "_init_param_handle_from_module no longer calls _need_to_materialize_module"
    return None


class _Fsdp1MetaDeviceHandle(_MetaDeviceHandle):
    """FSDP1's device handle for meta: :class:`_MetaDeviceHandle` whose current device is meta."""

    @staticmethod
    def current_device():
        return "meta"


@contextlib.contextmanager
def fsdp1_on_meta(on_alloc_storage: Callable[[torch.Tensor], None],
                  on_free_storage: Callable[[torch.Tensor], None]):
    """While open, FSDP1 wraps meta modules in place (see the section comment); its flat parameters' storage resizes
    call ``on_free_storage(t)`` before a free and ``on_alloc_storage(t)`` after an allocation."""
    require("fsdp1_on_meta")
    from torch.distributed.fsdp import _common_utils, _flat_param, _init_utils

    original_alloc, original_free = _flat_param._alloc_storage, _flat_param._free_storage
    original_from_device = _common_utils._FSDPDeviceHandle.from_device.__func__
    original_materialize = _init_utils._need_to_materialize_module
    handle = _Fsdp1MetaDeviceHandle()

    def alloc_storage(tensor, size):
        grows = tensor.untyped_storage().size() != size.numel() * tensor.itemsize
        original_alloc(tensor, size)
        if grows:
            on_alloc_storage(tensor)

    def free_storage(tensor):
        if tensor.untyped_storage().size() != 0:
            on_free_storage(tensor)
        original_free(tensor)

    def from_device(cls, device):
        return handle if device.type == "meta" else original_from_device(cls, device)

    def need_to_materialize(module, ignored_params, ignored_modules):
        if any(p.is_meta for p in module.parameters()):
            return False, False
        return original_materialize(module, ignored_params, ignored_modules)

    with contextlib.ExitStack() as stack:
        patch = stack.enter_context
        patch(mock.patch.object(_init_utils, "_need_to_materialize_module", need_to_materialize))
        patch(mock.patch.object(_common_utils._FSDPDeviceHandle, "from_device", classmethod(from_device)))
        patch(mock.patch.object(_flat_param, "_alloc_storage", alloc_storage))
        patch(mock.patch.object(_flat_param, "_free_storage", free_storage))
        yield


# --------------------------------------------------------------------------------------------
# transformers_checkpoint_function
#   for: --checkpoint-impl reentrant on meta: the recompute in backward must re-enter memgraph's
#   emulations (autocast, SDPA kernel choice) as non-reentrant checkpointing does through context_fn,
#   which use_reentrant=True refuses; so the function transformers stores on each checkpointed module
#   (``_gradient_checkpointing_func``, set by PreTrainedModel._set_gradient_checkpointing and called by
#   GradientCheckpointingLayer's wrapped forward) is wrapped. Read from transformers 5.23.0,
#   transformers/modeling_layers.py and transformers/modeling_utils.py.
# --------------------------------------------------------------------------------------------
@_guard("transformers_checkpoint_function", "transformers", "transformers 5.23.0, transformers/modeling_layers.py")
def _check_transformers_checkpoint_function():
    from transformers.modeling_layers import GradientCheckpointingLayer

    # 5.23: the wrapped forward made in __init_subclass__ calls it; 5.6: __call__ does
    source = "".join(inspect.getsource(getattr(GradientCheckpointingLayer, name))
                     for name in ("__init_subclass__", "__call__") if name in vars(GradientCheckpointingLayer))
    if "self._gradient_checkpointing_func(" not in source:
        return "GradientCheckpointingLayer no longer calls self._gradient_checkpointing_func"
    return None


def wrap_checkpoint_functions(model: torch.nn.Module, wrap: Callable[[Callable], Callable]) -> int:
    """Replace each module's ``_gradient_checkpointing_func`` by ``wrap(it)``; returns how many were wrapped."""
    require("transformers_checkpoint_function")
    count = 0
    for module in model.modules():
        func = getattr(module, "_gradient_checkpointing_func", None)
        if func is not None:
            module._gradient_checkpointing_func = wrap(func)
            count += 1
    return count


# --------------------------------------------------------------------------------------------
# deepspeed_on_meta
#   for: ``--deepspeed ds_config.json`` (memgraph/ds_engine): DeepSpeed's own engine (``deepspeed.initialize``)
#   run on meta tensors over the fake process group. Read from DeepSpeed 0.19.8 with its CPU accelerator
#   (``DS_ACCELERATOR=cpu``), the paths of a real CPU run; these places assume real data or a real device:
#   * deepspeed/accelerator/cpu_accelerator.py ``device_name``/``current_device_name`` ('cpu'): where the engine
#     moves the module and allocates its buffers; made 'meta' for the run;
#   * deepspeed/accelerator/cpu_accelerator.py ``is_fp16_supported`` (the host CPU's mkldnn fp16 support; engine.py
#     refuses an fp16 config without it): True on the cuda target, whose GPUs all have fp16;
#   * deepspeed/runtime/engine.py ``_do_args_sanity_check`` asserts ``LOCAL_RANK`` in the environment (set by
#     DeepSpeed's and torch's launchers): set to the traced rank for the run;
#   * deepspeed/runtime/zero/utils.py ``defragment`` (ZeRO-3's parameter partitions moved into one flat buffer
#     through a host staging buffer, ``device="cpu"``): replaced by the same allocations on meta (on the CPU
#     accelerator the staging buffer is the device buffer: ``cpu_buffer.to('cpu')`` returns it);
#   * ``assert_ints_same_as_other_ranks`` (zero/utils.py, imported by stage3.py, partition_parameters.py and
#     partitioned_param_coordinator.py) copies a meta tensor to the host to compare ranks: a check, skipped;
#   * deepspeed/runtime/zero/linear.py passes the accelerator's device name to ``torch.get_autocast_dtype`` and
#     ``torch.autocast``: given the target's name instead of 'meta';
#   * ZeRO-3 replaces ``torch.nn.functional.linear`` (partition_parameters.py) and deepspeed.comm keeps its
#     backend (``deepspeed.comm.comm.cdb``) for the process: both restored when the run ends.
#   * deepspeed/runtime/zero/stage_1_and_2.py keeps shape records as meta tensors of its own
#     (``torch.zeros_like(param.data, device="meta")``, ``round_robin_bit16_meta``): no memory in a real run, so
#     made outside the recorder (its ``torch`` seen through :class:`_TorchWithOwnMetaTensors`);
#   * deepspeed/accelerator/cpu_accelerator.py ``available_memory`` (the host's free RAM, psutil), which
#     stage_1_and_2.py asks to choose where to flatten the 16-bit groups (on the accelerator if the flat buffer fits
#     there, else through ``param.data.cpu()``, which has no data to copy on meta): on the cuda target it answers the
#     target GPU's free bytes, as the CUDA accelerator's NVML ``free`` does (ds_engine/run.py ``_free_device_bytes``),
#     not the free RAM of the machine memgraph runs on;
#   * deepspeed/utils/groups.py keeps the process groups it made (``_WORLD_GROUP``, ``_DATA_PARALLEL_GROUP``, ...) in
#     module globals for the process: each run starts from fresh ones (None / {}), restored at its end;
#   * deepspeed/comm/torch.py ``TorchBackend.__init__`` calls ``build_shm_op()``, which on the CPU accelerator builds
#     the ShareMemCommBuilder C++ op with g++ the first time on a machine (about 50 CPU s on 2 cores, cached in
#     ~/.cache/torch_extensions per Python and torch): the op serves ``inference_all_reduce`` and the backend's
#     shared-memory setup between real processes, neither of which a training step over the fake process group
#     uses; answered None (no op, as where the builder is incompatible) for the run;
#   ``.item()`` in the overflow and norm checks (stage_1_and_2.py ``has_overflow``, runtime/utils.py) is answered
#   by memgraph/ds_engine/scalars.py, not here.
# --------------------------------------------------------------------------------------------
_DS_STAGE_1_AND_2 = "deepspeed.runtime.zero.stage_1_and_2"
_DS_ASSERT_MODULES = ("deepspeed.runtime.zero.stage3", "deepspeed.runtime.zero.partition_parameters",
                      "deepspeed.runtime.zero.partitioned_param_coordinator")


def _ds_modules():
    import importlib

    return {name: importlib.import_module(name) for name in (
        "deepspeed.runtime.zero.utils", "deepspeed.runtime.zero.linear", "deepspeed.comm.comm", "deepspeed.comm.torch",
        "deepspeed.utils.groups", _DS_STAGE_1_AND_2,
        *_DS_ASSERT_MODULES)}


@_guard("deepspeed_on_meta", "deepspeed", "deepspeed 0.19.8, deepspeed/runtime/zero/utils.py, linear.py, stage3.py")
def _check_deepspeed_on_meta():
    from deepspeed.accelerator import get_accelerator

    modules = _ds_modules()
    for name in _DS_ASSERT_MODULES:
        if not hasattr(modules[name], "assert_ints_same_as_other_ranks"):
            return f"{name}.assert_ints_same_as_other_ranks is missing"
    if not hasattr(modules["deepspeed.runtime.zero.stage3"], "defragment"):
        return "deepspeed.runtime.zero.stage3.defragment is missing"
    source = inspect.getsource(modules["deepspeed.runtime.zero.utils"].defragment)
    if 'device="cpu"' not in source or "cpu_buffer.to(orig_device)" not in source:
        return "deepspeed.runtime.zero.utils.defragment no longer stages through a 'cpu' buffer"
    linear = modules["deepspeed.runtime.zero.linear"]
    if "get_accelerator().device_name()" not in inspect.getsource(linear.LinearFunctionForZeroStage3):
        return "LinearFunctionForZeroStage3 no longer asks get_accelerator().device_name()"
    if 'torch.zeros_like(param.data, device="meta")' not in inspect.getsource(modules[_DS_STAGE_1_AND_2]):
        return "stage_1_and_2.py no longer records shapes with torch.zeros_like(param.data, device='meta')"
    if not hasattr(modules["deepspeed.comm.comm"], "cdb"):
        return "deepspeed.comm.comm.cdb is missing"
    if "build_shm_op()" not in inspect.getsource(modules["deepspeed.comm.torch"].TorchBackend.__init__):
        return "deepspeed.comm.torch.TorchBackend.__init__ no longer calls build_shm_op()"
    if "accelerator.available_memory()" not in inspect.getsource(modules[_DS_STAGE_1_AND_2].DeepSpeedZeroOptimizer):
        return "DeepSpeedZeroOptimizer no longer asks accelerator.available_memory() where to flatten"
    return _missing(get_accelerator(), "device_name", "current_device_name", "is_fp16_supported", "available_memory")


class _TorchWithOwnMetaTensors:
    """``torch`` as stage_1_and_2.py sees it during the run: ``zeros_like(..., device="meta")`` (DeepSpeed's own shape
    records) made with memgraph's dispatch modes off, so the trace does not count them."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def zeros_like(t, *args, **kwargs):
        if kwargs.get("device") == "meta":
            with disable_current_modes():
                return torch.zeros_like(t, *args, **kwargs)
        return torch.zeros_like(t, *args, **kwargs)


def _defragment_on_meta(tensors: list[torch.Tensor]) -> torch.Tensor:
    """DeepSpeed 0.19.8 ``defragment`` with the staging buffer on the partitions' device (meta): the flat buffer is
    allocated, each partition copied in and freed, then each made a view of the buffer (on the CPU accelerator the
    staging buffer is the result; see the section comment)."""
    sizes = [t.numel() for t in tensors]
    buffer = torch.empty(sum(sizes), dtype=tensors[0].dtype, device=tensors[0].device)
    offset = 0
    for t, n in zip(tensors, sizes):
        buffer.narrow(0, offset, n).copy_(t)
        t.data = torch.empty(0, dtype=t.dtype, device=t.device)
        offset += n
    offset = 0
    for t, n in zip(tensors, sizes):
        t.data = buffer.narrow(0, offset, n)
        offset += n
    return buffer


class _NamedDevice:
    """What zero/linear.py asks of the accelerator: its device name (for autocast)."""

    def __init__(self, name: str):
        self.name = name

    def device_name(self, device_index=None) -> str:
        return self.name


@contextlib.contextmanager
def deepspeed_on_meta(rank: int, world_size: int, autocast_device: str, available_memory=None):
    """While open, ``deepspeed.initialize`` and the engine's steps run on meta tensors as rank ``rank`` of the
    (already initialised, fake) process group (see the section comment); ``available_memory()``, where given, is what
    the accelerator's ``available_memory`` answers (the target GPU's free bytes)."""
    import os

    require("deepspeed_on_meta")
    from deepspeed.accelerator import get_accelerator

    modules = _ds_modules()
    accelerator = get_accelerator()
    functional = torch.nn.functional
    with contextlib.ExitStack() as stack:
        patch = stack.enter_context
        patch(mock.patch.dict(os.environ, LOCAL_RANK=str(rank), RANK=str(rank), WORLD_SIZE=str(world_size)))
        patch(mock.patch.object(accelerator, "device_name", lambda device_index=None: "meta"))
        patch(mock.patch.object(accelerator, "current_device_name", lambda: "meta"))
        if autocast_device == "cuda":  # the target GPU has fp16, whatever the host CPU has
            patch(mock.patch.object(accelerator, "is_fp16_supported", lambda: True))
        if available_memory is not None:
            patch(mock.patch.object(accelerator, "available_memory", lambda device_index=None: available_memory()))
        patch(mock.patch.object(modules["deepspeed.runtime.zero.stage3"], "defragment", _defragment_on_meta))
        for name in _DS_ASSERT_MODULES:
            patch(mock.patch.object(modules[name], "assert_ints_same_as_other_ranks", lambda ints: None))
        patch(mock.patch.object(modules["deepspeed.runtime.zero.linear"], "get_accelerator",
                                lambda: _NamedDevice(autocast_device)))
        patch(mock.patch.object(modules[_DS_STAGE_1_AND_2], "torch", _TorchWithOwnMetaTensors()))
        patch(mock.patch.object(modules["deepspeed.comm.comm"], "cdb", None))
        patch(mock.patch.object(modules["deepspeed.comm.torch"], "build_shm_op", lambda: None))  # no g++ build
        groups = modules["deepspeed.utils.groups"]
        for name, value in list(vars(groups).items()):  # the process groups of an earlier run (another world)
            if (name.startswith("_") and name.isupper() or name in ("mpu", "mesh_device")) and (
                    value is None or isinstance(value, dict)):
                patch(mock.patch.object(groups, name, None if value is None else {}))
        patch(mock.patch.object(functional, "linear", functional.linear))  # ZeRO-3 replaces it
        yield


# --------------------------------------------------------------------------------------------
# deepspeed_offload_on_host
#   for: ``offload_optimizer: {device: cpu}`` (memgraph/ds_engine/offload.py). Read from DeepSpeed 0.19.8: ZeRO-1/2
#   (runtime/zero/stage_1_and_2.py) puts its host buffers on ``self.device``, ``'cpu'`` with the offload
#   (``get_accelerator().current_device_name() if not self.cpu_offload else 'cpu'``), and ZeRO-3
#   (runtime/zero/stage3.py) ``self.device = ... if not self.offload_optimizer else OffloadDeviceEnum.cpu`` ('cpu'):
#   memgraph makes every tensor put on ``'cpu'`` a meta stand-in known to be host memory. A version that names the
#   host otherwise would put its buffers where the stand-ins do not see them.
# --------------------------------------------------------------------------------------------
@_guard("deepspeed_offload_on_host", "deepspeed",
        "deepspeed 0.19.8, deepspeed/runtime/zero/stage_1_and_2.py, stage3.py")
def _check_deepspeed_offload_on_host():
    import importlib

    stage_1_and_2 = inspect.getsource(importlib.import_module(_DS_STAGE_1_AND_2).DeepSpeedZeroOptimizer.__init__)
    if "if not self.cpu_offload else 'cpu'" not in stage_1_and_2:
        return "DeepSpeedZeroOptimizer no longer puts its offloaded buffers on self.device = 'cpu'"
    stage3 = importlib.import_module("deepspeed.runtime.zero.stage3")
    if "if not self.offload_optimizer else OffloadDeviceEnum.cpu" not in inspect.getsource(stage3):
        return "DeepSpeedZeroOptimizer_Stage3 no longer puts its offloaded buffers on OffloadDeviceEnum.cpu"
    from deepspeed.runtime.zero.offload_config import OffloadDeviceEnum

    if OffloadDeviceEnum.cpu.value != "cpu":
        return f"OffloadDeviceEnum.cpu is {OffloadDeviceEnum.cpu.value!r}, not 'cpu'"
    return None


def deepspeed_offload_on_host() -> None:
    """Check (once) that DeepSpeed's optimizer offload still names the host ``'cpu'`` (see the section comment)."""
    require("deepspeed_offload_on_host")


# --------------------------------------------------------------------------------------------
# deepspeed_cpu_adam_on_meta
#   for: an ``"optimizer"`` section (Adam/AdamW) with ``offload_optimizer: {device: cpu}`` (memgraph/ds_engine):
#   DeepSpeed's engine then builds ``DeepSpeedCPUAdam`` (deepspeed 0.19.8 runtime/engine.py
#   ``get_optimizer_configuration``), read from deepspeed/ops/adam/cpu_adam.py:
#   * ``__init__`` loads the ``cpu_adam`` C++ op (``CPUAdamBuilder().load()``, a g++ build the first time) and calls
#     its ``create_adam``: on meta a stand-in op whose ``create_adam``/``adam_update``/``destroy_adam`` do nothing
#     (``adam_update`` updates the tensors in place in C++ and allocates nothing through PyTorch);
#   * ``step`` asserts each parameter is on ``torch.device('cpu')`` and makes ``exp_avg``/``exp_avg_sq`` with
#     ``torch.zeros_like(p.data, dtype=state_dtype, device=device)`` there: the module's ``torch.device('cpu')`` made
#     ``'meta'`` (its host partitions are meta stand-ins known to be host memory, ds_engine/offload.py), so the
#     states are allocated as DeepSpeed allocates them, on the host.
# --------------------------------------------------------------------------------------------
_DS_CPU_ADAM = "deepspeed.ops.adam.cpu_adam"


@_guard("deepspeed_cpu_adam_on_meta", "deepspeed", "deepspeed 0.19.8, deepspeed/ops/adam/cpu_adam.py")
def _check_deepspeed_cpu_adam_on_meta():
    import importlib

    module = importlib.import_module(_DS_CPU_ADAM)
    for name in ("CPUAdamBuilder", "torch", "DeepSpeedCPUAdam"):
        if not hasattr(module, name):
            return f"{_DS_CPU_ADAM}.{name} is missing"
    step = inspect.getsource(module.DeepSpeedCPUAdam.step)
    for needed in ("device = torch.device('cpu')", "torch.zeros_like(p.data, dtype=state_dtype, device=device)",
                   "self.ds_opt_adam.adam_update("):
        if needed not in step:
            return f"DeepSpeedCPUAdam.step no longer has {needed}"
    return None


class _CpuAdamOp:
    """The ``cpu_adam`` op on meta: nothing to build, nothing to compute (see the section comment)."""

    def create_adam(self, *args, **kwargs):
        return 0

    def adam_update(self, *args, **kwargs):
        return None

    def destroy_adam(self, *args, **kwargs):
        return 0


class _CpuAdamBuilderOnMeta:
    def load(self, *args, **kwargs):
        return _CpuAdamOp()


class _TorchWithHostOnMeta:
    """``torch`` as cpu_adam.py sees it on meta: ``torch.device('cpu')`` is ``'meta'``."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def device(*args, **kwargs):
        if args and args[0] == "cpu":
            return torch.device("meta")
        return torch.device(*args, **kwargs)


@contextlib.contextmanager
def deepspeed_cpu_adam_on_meta():
    """While open, ``DeepSpeedCPUAdam`` is built and steps on meta host stand-ins (see the section comment)."""
    import importlib

    require("deepspeed_cpu_adam_on_meta")
    module = importlib.import_module(_DS_CPU_ADAM)
    with mock.patch.object(module, "CPUAdamBuilder", _CpuAdamBuilderOnMeta), \
            mock.patch.object(module, "torch", _TorchWithHostOnMeta()):
        yield


__all__ = [
    "deepspeed_cpu_adam_on_meta",
    "deepspeed_offload_on_host",
    "ASSUMED_SCHEMAS", "BINDING_NAMESPACES", "DROPOUT_BINDING", "DisableTorchFunction", "GUARDS",
    "GradScalerAssumingFiniteGrads", "HAS_TORCH_FUNCTION", "ModTrackerCopy", "NO_META_KERNEL_OPS",
    "PrivateApiError", "SDPA_BINDING", "SINCE", "unavailable", "TENSOR_BINDINGS", "TORCH_RANGE", "TRANSFORMERS_RANGE",
    "TorchDispatchMode", "WeakIdKeyDictionary", "allocation_events", "body_without_torch_function_checks",
    "composite_ops_decompose_on_meta", "inductor_cuda_without_gpu", "inductor_joint_partition", "INDUCTOR_SM_COUNT", "current_graph_task_id", "deepspeed_on_meta", "default_attention", "disable_current_modes", "distributed_on_meta", "dump_memory_history", "fake_store", "fused_kernels_also_on",
    "fused_sdp_choice", "grad_scaler_state", "is_view", "kineto_events", "model_from_config",
    "nll_loss_nd", "nnpack_enabled", "noop_meta_kernels", "op_schema", "require", "sdp_priority_order",
    "select_conv_backend", "set_allocator_settings", "source_hash", "start_memory_history",
    "storage_key", "suggest_memory_format", "tree_flatten", "tree_map", "use_counts",
    "wrap_checkpoint_functions", "processor_without_tokenizer", "processor_audio_inputs", "processor_audio_replacements", "voxtral_input_features",
]


# --------------------------------------------------------------------------------------------
# torch.compile internals for ``--compile`` (memgraph/compiled/)
#   for: running the compiled step's graphs on meta under the recorder. Dynamo skips a frame while a
#   dispatch mode that does not ``ignore_compile_internals`` is on the stack, and traces torch function
#   modes into its graph: the modes of the trace are marked / popped around the compiled call (the
#   dispatch mode stack, the torch function stack). Inductor's CPU wrapper (codegen/wrapper.py) allocates
#   every buffer with a module global ``empty_strided_cpu`` and calls C++ kernels made by
#   ``AsyncCompile.cpp_pybinding``: on meta the former makes meta tensors and the latter are stubs (no g++),
#   the loaded module is dropped from ``PyCodeCache.modules_no_attr`` so a real compile never reuses it.
#   Graph breaks: ``torch._dynamo.utils.counters["graph_break"]`` (reason -> count). Knapsack partitioner:
#   ``torch._functorch.config.activation_memory_budget``. Read from torch 2.13.0, torch/_dynamo/convert_frame.py,
#   torch/_inductor/{compile_fx,async_compile,codecache,config}.py, torch/_inductor/codegen/wrapper.py,
#   torch/_functorch/config.py; the cuda target traces with Inductor's decomposition table
#   (torch/_inductor/decomposition.py select_decomp_table).
# --------------------------------------------------------------------------------------------
@_guard("compile_internals", "torch", "torch 2.13.0, torch/_inductor and torch/_dynamo")
def _check_compile_internals():
    from torch._dynamo import utils as dynamo_utils
    from torch._functorch import config as functorch_config
    from torch._inductor import async_compile, codecache, compile_fx, decomposition
    from torch._inductor import config as inductor_config
    from torch._inductor.codegen import wrapper
    from torch.utils import _python_dispatch

    for owner, names in ((torch._C, ("_len_torch_function_stack", "_pop_torch_function_stack",
                                     "_push_on_torch_function_stack")),
                         (_python_dispatch, ("_get_current_dispatch_mode_stack",)),
                         (async_compile.AsyncCompile, ("cpp_pybinding",)),
                         (codecache.PyCodeCache, ("modules_no_attr",)),
                         (compile_fx, ("compile_fx", "compile_fx_inner")),
                         (dynamo_utils, ("counters",)), (decomposition, ("select_decomp_table",))):
        problem = _missing(owner, *names)
        if problem:
            return problem
    if not all(hasattr(functorch_config, n) for n in ("activation_memory_budget", "graphsafe_rng_functionalization")):
        return "torch._functorch.config lost activation_memory_budget or graphsafe_rng_functionalization"
    if not all(hasattr(inductor_config, n) for n in ("custom_partitioner_fn", "compile_threads")):
        return "torch._inductor.config lost custom_partitioner_fn or compile_threads"
    if "inner_compile" not in _parameters(compile_fx.compile_fx):
        return "torch._inductor.compile_fx.compile_fx no longer takes inner_compile"
    if "empty_strided_cpu = " not in inspect.getsource(wrapper):
        return "Inductor's wrapper code no longer allocates through a global empty_strided_cpu"
    if "ignore_compile_internals" not in inspect.getsource(_python_dispatch):
        return "TorchDispatchMode.ignore_compile_internals is missing"
    return None


# --------------------------------------------------------------------------------------------
# The compiled optimizer step (``--compile-optimizer`` with foreach or for-loop; memgraph/compiled/scope.py, graphs.py)
#   for: the trace of ``torch.compile(opt.step)``. Dynamo runs the optimizer's ``_init_group`` eagerly while it
#   traces (OptimizerVariable.call_method: the state is born there, so memgraph puts the recorder's dispatch modes
#   back around it) and sets ``capturable`` for parameters on a GPU (_set_capturable, mirrored on the cuda target);
#   it keeps the state as graph attributes whose sources AOTAutograd reads from ``_param_name_to_source`` and each
#   placeholder's ``_dynamo_source`` (memgraph lifts them into placeholders); Inductor wraps the generated ``call``
#   of a graph mutating its inputs in ``align_inputs_from_check_idxs`` (a closure over it as ``model``). Read from
#   torch 2.13.0, torch/_dynamo/variables/optimizer.py, torch/_functorch/_aot_autograd/frontend_utils.py,
#   torch/_inductor/utils.py.
# --------------------------------------------------------------------------------------------
@_guard("compiled_optimizer", "torch", "torch 2.13.0, torch/_dynamo/variables/optimizer.py and torch/_functorch")
def _check_compiled_optimizer():
    from torch._dynamo.variables.optimizer import OptimizerVariable
    from torch._functorch._aot_autograd import frontend_utils
    from torch._inductor import utils as inductor_utils

    if "self.value._init_group(" not in inspect.getsource(OptimizerVariable.call_method):
        return "OptimizerVariable.call_method no longer runs the optimizer's _init_group itself"
    if 'group["capturable"] = True' not in inspect.getsource(OptimizerVariable._set_capturable):
        return "OptimizerVariable._set_capturable no longer sets capturable"
    source = inspect.getsource(frontend_utils._try_get_metadata_from_dynamo)
    if "_dynamo_source" not in source or "_param_name_to_source" not in source:
        return "AOTAutograd's _try_get_metadata_from_dynamo no longer reads _dynamo_source and _param_name_to_source"
    if "model(new_inputs)" not in inspect.getsource(inductor_utils.align_inputs_from_check_idxs):
        return "Inductor's align_inputs_from_check_idxs no longer calls the generated code as model"
    return None


def compile_internals():
    """The private torch.compile modules ``--compile`` reaches into (guarded): a namespace of them."""
    require("compile_internals")
    from torch._dynamo import utils as dynamo_utils
    from torch._functorch import config as functorch_config
    from torch._inductor import async_compile, codecache, compile_fx
    from torch._inductor import config as inductor_config
    from torch.utils import _python_dispatch

    return types.SimpleNamespace(dynamo_counters=dynamo_utils.counters, functorch_config=functorch_config,
                                 AsyncCompile=async_compile.AsyncCompile, PyCodeCache=codecache.PyCodeCache,
                                 compile_fx=compile_fx.compile_fx, compile_fx_inner=compile_fx.compile_fx_inner,
                                 inductor_config=inductor_config,
                                 dispatch_modes=_python_dispatch._get_current_dispatch_mode_stack,
                                 decompositions=_inductor_decompositions)


def _inductor_decompositions() -> dict:
    from torch._inductor.decomposition import select_decomp_table

    return select_decomp_table()


# Dynamo's tensor guards (TENSOR_MATCH, C++ TensorCheck in torch/csrc/dynamo/guards.cpp) store each tensor's
# dispatch keys as seen through the thread-local include/exclude sets of the moment the guards are built; at each
# later call they compare them through that call's sets. Dynamo builds the guards with the ignore_compile_internals
# modes off the stack (no Python keys in the include set), but a dispatch mode on the stack puts DispatchKey.Python
# and PythonTLSSnapshot in it (c10/core/impl/TorchDispatchModeTLS.cpp, push_onto_stack): every later call of a step
# traced under the recorder failed its guards and recompiled ("Unexpected recompilation", torch 2.13.0). Read from
# torch 2.13.0 torch/_dynamo/guards.py (CheckFunctionManager builds and sanity-checks the guards in __init__).
_DISPATCH_MODE_KEYS = ("Python", "PythonTLSSnapshot")


@_guard("dynamo_guard_keys", "torch", "torch 2.13.0, torch/_dynamo/guards.py CheckFunctionManager")
def _check_dynamo_guard_keys():
    from torch._dynamo import guards

    if "add_tensor_match_guard" not in inspect.getsource(guards.GuardBuilder.TENSOR_MATCH):
        return "GuardBuilder.TENSOR_MATCH no longer adds a C++ tensor match guard"
    if "self.guard_manager.check(" not in inspect.getsource(guards.CheckFunctionManager.__init__):
        return "CheckFunctionManager.__init__ no longer checks the guards it built"
    return _missing(torch._C, "_IncludeDispatchKeyGuard") or _missing(torch._C.DispatchKey, *_DISPATCH_MODE_KEYS)


@contextlib.contextmanager
def dynamo_guards_see_dispatch_modes():
    """Dynamo's guards built (and sanity-checked) with the include set a call under dispatch modes has (the keys
    a mode on the stack adds), so that the recorder's modes do not make every later call recompile."""
    require("dynamo_guard_keys")
    from torch._dynamo import guards

    built = guards.CheckFunctionManager.__init__

    def init(self, *args, **kwargs):
        with contextlib.ExitStack() as keys:
            for key in _DISPATCH_MODE_KEYS:
                keys.enter_context(torch._C._IncludeDispatchKeyGuard(getattr(torch._C.DispatchKey, key)))
            built(self, *args, **kwargs)

    guards.CheckFunctionManager.__init__ = init
    try:
        yield
    finally:
        guards.CheckFunctionManager.__init__ = built



# --------------------------------------------------------------------------------------------
# Compile-log text (speed only, never bytes): AOTAutograd prints its joint, forward and backward graphs as text for
# its logs and its cache entry (torch 2.13.0 torch/_functorch/_aot_autograd/graph_compile.py ``_log_joint_graph``,
# ``_log_fw_bw_graphs``: ``GraphModule.print_readable`` whenever ``AOTConfig.enable_log``, which
# ``aot_module_simplified`` always leaves on), and Inductor writes a runnable repro of each graph it compiles
# (torch/_inductor/compile_fx.py ``_InProcessFxCompile.codegen_and_compile`` calls
# ``torch._dynamo.repro.after_aot.save_graph_repro`` into a StringIO for a structured-log artifact). memgraph's
# compiles have no logs and no caches (force_disable_caches), so while they run the two loggers return no text and
# the repro is not written: 2-3% of ``analyze llama-3-8b --compile``'s CPU time, every graph and buffer the same.
# Where the functions changed, the text is made as before (a speed-up lost, nothing else): no error.
# --------------------------------------------------------------------------------------------
@_guard("compile_log_text", "torch", "torch 2.13.0, torch/_functorch/_aot_autograd/graph_compile.py, "
        "torch/_dynamo/repro/after_aot.py")
def _check_compile_log_text():
    from torch._dynamo.repro import after_aot
    from torch._functorch._aot_autograd import graph_compile

    problem = _missing(graph_compile, "_log_joint_graph", "_log_fw_bw_graphs") or _missing(after_aot,
                                                                                           "save_graph_repro")
    if problem:
        return problem
    if _parameters(graph_compile._log_joint_graph) != ["fx_g", "aot_config"]:
        return "graph_compile._log_joint_graph(fx_g, aot_config) changed"
    if _parameters(graph_compile._log_fw_bw_graphs)[:2] != ["fw_module", "bw_module"]:
        return "graph_compile._log_fw_bw_graphs(fw_module, bw_module, ...) changed"
    return None


def _no_joint_text(*_args, **_kwargs) -> None:
    return None


def _no_fw_bw_text(*_args, **_kwargs) -> tuple[None, None]:
    return None, None


def _no_repro(*_args, **_kwargs) -> None:
    return None


@contextlib.contextmanager
def compile_log_text_skipped():
    """While open, AOTAutograd's graph texts and Inductor's repro string are not made (see the comment above); a
    no-op where the touch point changed."""
    try:
        require("compile_log_text")
    except PrivateApiError:
        yield
        return
    from torch._dynamo.repro import after_aot
    from torch._functorch._aot_autograd import graph_compile

    with mock.patch.object(graph_compile, "_log_joint_graph", _no_joint_text), \
            mock.patch.object(graph_compile, "_log_fw_bw_graphs", _no_fw_bw_text), \
            mock.patch.object(after_aot, "save_graph_repro", _no_repro):
        yield


# OpOverload.py_kernels / _dispatch_cache (torch/_ops.py): AOTAutograd traces its joint graph with the Python
# dispatcher on (torch/_functorch/_aot_autograd), which resolves each op's key from the Python kernels as the C++
# dispatcher does from C++ ones: an op with a CompositeImplicitAutograd kernel decomposes at the Autograd key only
# while its backend key has no kernel of its own (c10/core/dispatch/OperatorEntry.cpp, computeDispatchTableEntry).
# torch registers Python Meta kernels (torch/_meta_registrations.py, torch/_refs, torch/_decomp: 109 aten overloads
# in torch 2.13.0, aten::nll_loss, dropout, _fused_rms_norm among them) for such ops, so on meta tensors they reach
# autograd's not-implemented fallback, which in its default "warn" mode gives them no gradient
# (torch/csrc/autograd/autograd_not_implemented_fallback.cpp): the joint graph of a compiled cross-entropy on meta
# had no gradient for the logits (and GPT-2's loss graph after its graph break none at all). On CPU and CUDA tensors
# the same ops decompose. While memgraph's AOTAutograd runs on meta, those Python Meta kernels are set aside so that
# the ops decompose on meta as on the GPU. Read from torch 2.13.0, torch/_ops.py (HigherOrderOperator/OpOverload).
@_guard("composite_meta_kernels", "torch", "torch 2.13.0, torch/_ops.py OpOverload.py_kernels, _dispatch_cache")
def _check_composite_meta_kernels():
    op = torch.ops.aten.nll_loss.default
    if not isinstance(getattr(op, "py_kernels", None), dict) or not isinstance(getattr(op, "_dispatch_cache", None),
                                                                                dict):
        return "OpOverload.py_kernels or OpOverload._dispatch_cache is no longer a dict"
    return _missing(torch._C, "_dispatch_has_kernel_for_dispatch_key")


def _composite_ops_with_python_meta_kernels() -> list:
    """The loaded aten overloads with a CompositeImplicitAutograd kernel and a Python Meta kernel (an overload with a
    Python kernel is loaded by its registration)."""
    from torch._C import DispatchKey

    found = []
    for name in dir(torch.ops.aten):
        packet = getattr(torch.ops.aten, name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if (DispatchKey.Meta in op.py_kernels
                    and torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd")):
                found.append(op)
    return found


@contextlib.contextmanager
def composite_ops_decompose_on_meta():
    """While open, aten ops with a CompositeImplicitAutograd kernel decompose on meta tensors under the Python
    dispatcher (their Python Meta kernels set aside), so that AOTAutograd's joint graph differentiates them."""
    require("composite_meta_kernels")
    from torch._C import DispatchKey

    set_aside = []
    try:
        for op in _composite_ops_with_python_meta_kernels():
            set_aside.append((op, op.py_kernels.pop(DispatchKey.Meta)))
            op._dispatch_cache.clear()
        yield len(set_aside)
    finally:
        for op, kernel in set_aside:
            op.py_kernels[DispatchKey.Meta] = kernel
            op._dispatch_cache.clear()


@contextlib.contextmanager
def torch_function_modes_popped():
    """The torch function modes (memgraph's autocast and SDPA-kernel emulations) off the stack for a compiled
    call, as Dynamo would otherwise trace them into its graph; pushed back after."""
    require("compile_internals")
    popped = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]
    try:
        yield popped[::-1]  # outermost first
    finally:
        for mode in reversed(popped):
            torch._C._push_on_torch_function_stack(mode)


@contextlib.contextmanager
def torch_function_modes_pushed(modes: list):
    """``modes`` (outermost first, as :func:`torch_function_modes_popped` yields them) back on the torch function
    stack for an eager call inside a compiled one (memgraph/compiled/eager_fallback.py); popped after."""
    require("compile_internals")
    for mode in modes:
        torch._C._push_on_torch_function_stack(mode)
    try:
        yield
    finally:
        for _ in modes:
            torch._C._pop_torch_function_stack()


# Inductor for 'cuda' on a machine without a GPU or Triton (memgraph/compiled/inductor_cuda.py): lowering, scheduling,
# fusion and buffer reuse for CUDA run in Python once Inductor believes a GPU and Triton are there. While one graph
# compiles: the CUDA device interface (torch/_dynamo/device_interface.py CudaInterface: device properties, compute
# capability, is_available, device count, current device) and torch.cuda.get_device_properties /
# get_device_capability answer for the --gpu (its compute capability and memory; INDUCTOR_SM_COUNT multiprocessors);
# the scheduler's has_triton() (torch/_inductor/scheduler.py create_backend) says yes; Triton kernels' inductor_meta
# takes a fixed backend hash (torch.utils._triton.triton_hash_with_backend imports Triton); Inductor's joint-graph
# passes (compile_fx._recursive_joint_graph_passes, as compile_fx.partition_fn runs them before the partitioner); the wrapper's Triton
# header (PythonWrapperCodegen.write_triton_header_once: ``import triton``) is left out and its ``get_raw_stream``
# (CUDADeviceOpOverrides.import_get_raw_stream_as: torch._C._cuda_getCurrentRawStream, absent in a CPU build) is a
# stub; AsyncCompile.triton returns a stub kernel whose ``run`` does nothing (no Triton compile). Read from torch
# 2.13.0, torch/_inductor/{scheduler,async_compile}.py, codegen/wrapper.py, codegen/cuda/device_op_overrides.py,
# runtime/hints.py (DeviceProperties.create), torch/_dynamo/device_interface.py, torch/utils/_triton.py.
# torch.cuda.get_rng_state() is a host uint8 tensor of the philox seed (uint64) and offset (int64): 16 bytes
# (ATen/cuda/CUDAGeneratorImpl.cpp CUDAGeneratorImpl::get_state, seed_size + offset_size). While Inductor compiles
# a checkpointed region with random ops for 'cuda', the partitioner takes one as the meta value of the state it saves
# (torch/_functorch/partitioners.py functionalize_rng_ops get_sample_rng_state) and the fake run of
# run_and_save_rng_state returns one (torch/_prims/rng_prims.py); a CPU build has no CUDA generator to ask.
CUDA_RNG_STATE_BYTES = 16


def _cuda_rng_state(device="cuda"):
    return torch.empty(CUDA_RNG_STATE_BYTES, dtype=torch.uint8)
INDUCTOR_SM_COUNT = 132  # multiprocessors of an H100 SXM5 (NVIDIA H100 Tensor Core GPU datasheet); Inductor reads it
# to split large reductions (torch 2.13 torch/_inductor/ir.py Reduction.num_splits), whose partials are a few KiB
_DEVICE_INTERFACE_NAMES = ("get_device_properties", "get_compute_capability", "is_available", "device_count",
                           "current_device", "is_bf16_supported")


@_guard("inductor_cuda", "torch", "torch 2.13.0, torch/_inductor scheduler, codegen, async_compile; "
        "torch/_dynamo/device_interface.py")
def _check_inductor_cuda():
    from torch._dynamo import device_interface
    from torch._inductor import async_compile, scheduler
    from torch._inductor.codegen import wrapper
    from torch._inductor.codegen.cuda import device_op_overrides
    from torch.utils import _triton

    for owner, names in ((device_interface.CudaInterface, _DEVICE_INTERFACE_NAMES),
                         (device_interface.CudaInterface.Worker, ("get_device_properties", "current_device")),
                         (scheduler, ("has_triton",)), (_triton, ("triton_hash_with_backend",)),
                         (wrapper.PythonWrapperCodegen, ("write_triton_header_once",)),
                         (device_op_overrides.CUDADeviceOpOverrides, ("import_get_raw_stream_as",)),
                         (async_compile.AsyncCompile, ("triton",))):
        problem = _missing(owner, *names)
        if problem:
            return problem
    if "empty_strided_cuda = " not in inspect.getsource(wrapper):
        return "Inductor's wrapper code no longer allocates through a global empty_strided_cuda"
    if "has_triton()" not in inspect.getsource(scheduler.Scheduler.create_backend):
        return "Scheduler.create_backend no longer asks has_triton()"
    from torch._inductor import compile_fx
    from torch._inductor import config as inductor_config

    passes = getattr(compile_fx, "_recursive_joint_graph_passes", None)
    if passes is None or _parameters(passes)[:3] != ["gm", "skip_invoke_subgraph", "input_device"]:
        return "torch._inductor.compile_fx._recursive_joint_graph_passes(gm, skip_invoke_subgraph, input_device) changed"
    if not hasattr(inductor_config, "joint_graph_constant_folding"):
        return "torch._inductor.config.joint_graph_constant_folding is missing"
    return None


def inductor_joint_partition(joint, joint_inputs, partitioner, fake_mode, **kwargs):
    """Inductor's own partition step as torch 2.13 compile_fx.partition_fn runs it: its joint-graph passes
    (``_recursive_joint_graph_passes``: pattern rewrites, random ops made Inductor's seeded ones, no-op removal) on the
    joint graph, then ``partitioner(joint, joint_inputs, **kwargs)`` (where partition_fn calls the partitioner). Constant folding of the joint graph is off: its values are meta tensors (a few
    constant tensors the GPU run would fold stay ops). ``fake_mode`` is the graph's, which the passes read as
    ``torch._inductor.virtualized.V.fake_mode`` (as compile_fx sets it)."""
    require("inductor_cuda")
    from torch._inductor import compile_fx
    from torch._inductor import config as inductor_config
    from torch._inductor.virtualized import V

    with inductor_config.patch(joint_graph_constant_folding=False), V.set_fake_mode(fake_mode):
        joint = compile_fx._recursive_joint_graph_passes(joint, skip_invoke_subgraph=True,
                                                          input_device=torch.device("cuda", 0))
    return partitioner(joint, joint_inputs, **kwargs)


class _StubTritonKernel:
    """A Triton kernel generated and never compiled: ``run`` writes nothing (its buffers are meta tensors)."""

    def __init__(self, name: str):
        self.name = name

    def run(self, *_args, **_kwargs) -> None:
        return None


@contextlib.contextmanager
def inductor_cuda_without_gpu(gpu):
    """While open, Inductor compiles for 'cuda' on this machine as for ``gpu`` (a memgraph.facts.gpus.GpuSpec),
    Triton kernels generated as source only (see the comment above)."""
    require("inductor_cuda")
    from torch._dynamo import device_interface
    from torch._inductor import async_compile, scheduler
    from torch._inductor.codegen import wrapper
    from torch._inductor.codegen.cuda import device_op_overrides
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils import _triton

    major, minor = gpu.compute_capability
    props = types.SimpleNamespace(
        name=gpu.name, major=major, minor=minor, total_memory=gpu.capacity_bytes,
        multi_processor_count=INDUCTOR_SM_COUNT, warp_size=32, max_threads_per_block=1024,  # CUDA limits, sm_70+
        regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048, gcnArchName="")
    interface = device_interface.CudaInterface
    patches = [(interface, "get_device_properties", staticmethod(lambda device=None: props)),
               (interface, "get_compute_capability", staticmethod(lambda device=None: major * 10 + minor)),
               (interface, "is_available", staticmethod(lambda: True)),
               (interface, "device_count", staticmethod(lambda: 1)),
               (interface, "current_device", staticmethod(lambda: 0)),
               # torch.cuda.is_bf16_supported(including_emulation=False): native bf16 from sm_80 (torch/cuda/__init__.py);
               # Inductor skips the frame (compile_fx.py _check_triton_bf16_support) on a GPU without it
               (interface, "is_bf16_supported", staticmethod(lambda including_emulation=True: major >= 8)),
               (interface.Worker, "get_device_properties", staticmethod(lambda device=None: props)),
               (interface.Worker, "current_device", staticmethod(lambda: 0)),
               (torch.cuda, "get_device_properties", lambda device=None: props),
               (torch.cuda, "get_device_capability", lambda device=None: (major, minor)),
               (scheduler, "has_triton", lambda: True),
               (_triton, "triton_hash_with_backend", lambda: "memgraph-no-triton"),
               (wrapper.PythonWrapperCodegen, "write_triton_header_once", _triton_header_left_out),
               (device_op_overrides.CUDADeviceOpOverrides, "import_get_raw_stream_as",
                lambda self, name: f"{name} = lambda index: None  # memgraph: no CUDA stream on meta"),
               (async_compile.AsyncCompile, "triton",
                lambda self, kernel_name, source_code, device_str="cuda": _StubTritonKernel(kernel_name)),
               (torch.cuda, "get_rng_state", _cuda_rng_state),
               (FakeTensor, "__invert__", _invert), (FakeTensor, "copy_", _copy),
               (FakeTensor, "__getitem__", _getitem), (FakeTensor, "__setitem__", _setitem)]
    with contextlib.ExitStack() as stack:  # each undone at the end (an inherited attribute removed again)
        for owner, name, value in patches:
            stack.enter_context(mock.patch.object(owner, name, value))
        yield props


# Four Tensor methods have hand-written Python bindings that take a device guard for ``self``'s device
# (torch/csrc/autograd/python_variable_methods.cpp THPVariable_invert, THPVariable_copy_; python_variable_indexing.cpp
# THPVariable_getitem, THPVariable_setitem): on a fake CUDA tensor a CPU build has no CUDA guard and raises ("PyTorch
# is not linked with support for cuda devices"; torch._C._ensureCUDADeviceGuardSet does not help in a CPU-only build).
# Inductor's passes and decompositions call them on fake CUDA tensors; while it compiles for 'cuda' on this machine
# they go through the ops themselves (no binding), or for indexing through a fake meta twin of the same layout.
def _on_cuda_fake(t) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type == "cuda"


def _invert(self):
    return torch.bitwise_not(self)


def _copy(self, src, non_blocking: bool = False):
    return torch.ops.aten.copy_.default(self, src, non_blocking)


def _meta_twin(value):
    """A fake meta tensor of ``value``'s layout (same fake mode); other values as they are."""
    if not _on_cuda_fake(value):
        return value
    return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")


def _twins(index):
    if isinstance(index, tuple):
        return tuple(_twins(i) for i in index)
    if isinstance(index, list):
        return [_twins(i) for i in index]
    return _meta_twin(index)


def _getitem(self, index):
    """``self[index]``: worked out on the meta twin, answered with a fake CUDA tensor of the result's layout (a
    fresh tensor, not a view: only the layout is read while Inductor compiles)."""
    if not _on_cuda_fake(self):
        return torch.Tensor.__getitem__(self, index)
    out = torch.Tensor.__getitem__(_meta_twin(self), _twins(index))
    return torch.empty_strided(out.shape, out.stride(), dtype=out.dtype, device=self.device)


def _setitem(self, index, value) -> None:
    """``self[index] = value``: checked on the meta twins (fake tensors hold no values to write)."""
    if not _on_cuda_fake(self):
        return torch.Tensor.__setitem__(self, index, value)
    torch.Tensor.__setitem__(_meta_twin(self), _twins(index), _meta_twin(value))
    return None


def _triton_header_left_out(self) -> None:
    """PythonWrapperCodegen.write_triton_header_once without ``import triton``: only the raw-stream line."""
    self.write_get_raw_stream_header()


# --------------------------------------------------------------------------------------------
# transformers audio processors: _process_audio and _retrieve_input_features without a tokenizer
#   for: the audio inputs and audio-token counts of audio-language models, made by the processor's own code
#   (model_spec/audio_text_inputs.py). ``<Processor>._process_audio(self, audio, **audio_kwargs)`` (Qwen2-Audio,
#   GLM-ASR, Audio Flamingo 3, Qwen3-ASR) returns (audio_inputs with ``num_audio_tokens``, replacement texts) and
#   reads only ``self.feature_extractor``, ``self.audio_token`` and its __init__ options (``max_audio_len``);
#   ``VoxtralProcessor._retrieve_input_features(self, audio, max_source_positions, **kwargs)`` reads only
#   ``self.feature_extractor``. The tokenizer, which needs a hub download, is never touched, so the processor is
#   made without its __init__. Read from transformers 5.23.0, models/*/processing_*.py. ``_process_audio`` first
#   appears in transformers 5.16.0 (Qwen2AudioProcessor: 5.6.0 to 5.15.0 compute features and token counts inline in
#   ``__call__``, next to the tokenizer call, checked in the 5.6.0 to 5.16.0 wheels), so below 5.16 audio-language
#   inputs are refused with the version to install.
# --------------------------------------------------------------------------------------------
@_guard("transformers_audio_processors", "transformers", "transformers 5.23.0, models/*/processing_*.py",
        since=("5.16", "audio-language inputs (task audio-text-to-text, --audio-seconds)"))
def _check_transformers_audio_processors():
    from transformers import Qwen2AudioProcessor, VoxtralProcessor

    if _parameters(Qwen2AudioProcessor._process_audio)[:2] != ["self", "audio"]:
        return "Qwen2AudioProcessor._process_audio no longer takes (self, audio, **kwargs)"
    if _parameters(VoxtralProcessor._retrieve_input_features)[:3] != ["self", "audio", "max_source_positions"]:
        return "VoxtralProcessor._retrieve_input_features no longer takes (self, audio, max_source_positions)"
    return None


AUDIO_TOKEN_PLACEHOLDER = "<audio>"  # the text a processor repeats per audio token; memgraph reads only the count


def processor_without_tokenizer(cls, feature_extractor):
    """An instance of processor class ``cls`` holding ``feature_extractor`` and its __init__'s defaults (no
    tokenizer): enough for its audio methods below."""
    require("transformers_audio_processors")
    proc = object.__new__(cls)
    proc.feature_extractor = feature_extractor
    first = next(iter(list(inspect.signature(cls.__init__).parameters)[1:2]), None)
    if first is not None and first != "feature_extractor":  # GraniteSpeechProcessor(audio_processor, tokenizer)
        setattr(proc, first, feature_extractor)
    proc.audio_token = AUDIO_TOKEN_PLACEHOLDER
    proc.audio_bos_token = proc.audio_eos_token = AUDIO_TOKEN_PLACEHOLDER  # Qwen2.5-Omni's replace_audio_token
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if p.default is not inspect.Parameter.empty and p.default is not None and not hasattr(proc, name):
            setattr(proc, name, p.default)
    return proc


def processor_audio_inputs(proc, waves: list, audio_kwargs: dict) -> dict:
    """``proc._process_audio(waves, **audio_kwargs)``'s audio inputs (with ``num_audio_tokens``)."""
    return dict(processor_audio_replacements(proc, waves, audio_kwargs)[0])


def processor_audio_replacements(proc, waves: list, audio_kwargs: dict) -> tuple[dict, list[int]]:
    """``proc._process_audio``'s audio inputs, and the audio tokens its text replacement puts in per clip (the count
    of ``AUDIO_TOKEN_PLACEHOLDER`` in each: VibeVoiceProcessor.replace_audio_token repeats ``audio_token``)."""
    made, replacements = proc._process_audio(waves, **audio_kwargs)
    if not isinstance(replacements, (list, tuple)):
        return dict(made), []
    return dict(made), [str(r).count(AUDIO_TOKEN_PLACEHOLDER) for r in replacements]


def voxtral_input_features(proc, waves: list, max_source_positions: int, audio_kwargs: dict):
    """``VoxtralProcessor._retrieve_input_features``: the clips' frames in chunks of ``max_source_positions``."""
    return proc._retrieve_input_features(waves, max_source_positions, **audio_kwargs)


@_guard("transformers_torchaudio_backend", "transformers",
        "transformers 5.23.0, utils/import_utils.py BACKENDS_MAPPING and requires_backends; the module global "
        "torchaudio of models/granite_speech/feature_extraction_granite_speech.py and "
        "models/fun_asr_nano/feature_extraction_fun_asr_nano.py")
def _check_transformers_torchaudio_backend():
    from transformers.utils import import_utils

    entry = import_utils.BACKENDS_MAPPING.get("torchaudio")
    if not (isinstance(entry, tuple) and len(entry) == 2 and callable(entry[0])):
        return "BACKENDS_MAPPING['torchaudio'] is no longer an (is_available, message) pair"
    return None


@contextlib.contextmanager
def torchaudio_stand_in(module, stand_in):
    """Within: transformers' backend check sees torchaudio as installed, and ``module.torchaudio`` is ``stand_in``
    (model_spec/torchaudio_shapes.py); both restored on exit."""
    require("transformers_torchaudio_backend")
    from transformers.utils import import_utils

    message = import_utils.BACKENDS_MAPPING["torchaudio"][1]
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(import_utils.BACKENDS_MAPPING, {"torchaudio": (lambda: True, message)}))
        stack.enter_context(mock.patch.object(module, "torchaudio", stand_in, create=True))
        yield


@_guard("transformers_config_attention_reset", "transformers",
        "transformers 5.23.0, configuration_utils.py PreTrainedConfig._attn_implementation (a property whose "
        "setter sets the sub-configs' too)")
def _check_transformers_config_attention_reset():
    from transformers import PretrainedConfig

    prop = getattr(PretrainedConfig, "_attn_implementation", None)
    if not isinstance(prop, property) or prop.fset is None:
        return "PreTrainedConfig._attn_implementation is no longer a settable property"
    return None


def forget_attention_choice(config) -> None:
    """Undo the attention implementation a refused ``_from_config`` left on ``config`` and its sub-configs, so that a
    build without ``attn_implementation`` picks transformers' default per sub-model again."""
    require("transformers_config_attention_reset")
    config._attn_implementation = None


# --compile --strategy fsdp (memgraph/compiled/strategies.py): ``nn.Module.compile(**kw)`` (public) sets the private
# ``_compiled_call_impl = torch.compile(self._call_impl, **kw)``, which ``nn.Module._wrapped_call_impl`` calls instead
# of ``_call_impl``; the trace wraps that compiled call in its own (memgraph/compiled/step.py _CompiledCall). Read from
# torch 2.13.0 torch/nn/modules/module.py (Module.compile, _wrapped_call_impl).
@_guard("module_compiled_call", "torch", "torch 2.13.0, torch/nn/modules/module.py Module.compile")
def _check_module_compiled_call():
    source = inspect.getsource(torch.nn.Module.compile)
    if "self._compiled_call_impl = torch.compile(self._call_impl" not in source:
        return "nn.Module.compile no longer sets _compiled_call_impl = torch.compile(self._call_impl, ...)"
    if "_compiled_call_impl" not in inspect.getsource(torch.nn.Module._wrapped_call_impl):
        return "nn.Module._wrapped_call_impl no longer calls _compiled_call_impl"
    return None


def wrap_module_compiled_call(module: torch.nn.Module, wrap: Callable) -> None:
    """``module``, already ``module.compile(...)``d, calls ``wrap(its compiled call)`` instead."""
    require("module_compiled_call")
    module._compiled_call_impl = wrap(module._compiled_call_impl)


# --compile with --gradient-checkpointing (memgraph/compiled/rng_state.py): Inductor's code for a checkpointed region
# calls the higher-order ops ``run_and_save_rng_state`` (forward: the generator's state saved beside a random op's
# output) and ``run_with_rng_state`` (the recompute in backward: the op run again from that state); a higher-order op
# under a dispatch mode runs the function registered for that mode's exact class in its ``python_key_table``
# (``HigherOrderOperator.py_impl(mode class)``), with the mode popped. Read from torch 2.13.0, torch/_prims/
# rng_prims.py, torch/_ops.py (HigherOrderOperator.py_impl, dispatch).
@_guard("rng_state_hops", "torch", "torch 2.13.0, torch/_prims/rng_prims.py and torch/_ops.py HigherOrderOperator")
def _check_rng_state_hops():
    from torch._prims import rng_prims

    for name in ("run_and_save_rng_state", "run_with_rng_state"):
        hop = getattr(rng_prims, name)
        if not isinstance(hop, torch._ops.HigherOrderOperator) or not isinstance(hop.python_key_table, dict):
            return f"torch._prims.rng_prims.{name} is no longer a HigherOrderOperator with a python_key_table"
        if not isinstance(getattr(hop, "_dispatch_cache", None), dict):
            return f"torch._prims.rng_prims.{name} has no _dispatch_cache dict"
    return None


@contextlib.contextmanager
def rng_state_hops_for(mode_types, save: Callable, run_with: Callable):
    """While open, ``run_and_save_rng_state`` under a mode of one of ``mode_types`` runs ``save(mode, op, *args,
    **kwargs)`` and ``run_with_rng_state`` runs ``run_with(mode, rng_state, op, *args, **kwargs)``."""
    require("rng_state_hops")
    from torch._prims import rng_prims

    added = []
    try:
        for hop, fn in ((rng_prims.run_and_save_rng_state, save), (rng_prims.run_with_rng_state, run_with)):
            for cls in mode_types:
                if cls not in hop.python_key_table:
                    hop.python_key_table[cls] = fn
                    added.append((hop, cls))
            hop._dispatch_cache.clear()
        yield
    finally:
        for hop, cls in added:
            hop.python_key_table.pop(cls, None)
            hop._dispatch_cache.clear()


# --compile --strategy ddp on the cuda target (memgraph/compiled/aot_graphs.py): Dynamo's DDPOptimizer compiles each
# bucket's subgraph with ``TracingContext.fakify_first_call`` set (torch/_dynamo/backends/distributed.py
# FakeifyFirstAOTInvocationGuard), and AOTAutograd's first call then returns the forward graph's output values
# (``FakifiedOutWrapper.pre_compile`` reads them from the partitioned forward graph's output node), which feed the next
# subgraph's compile. Read from torch 2.13.0 torch/_guards.py (TracingContext) and
# torch/_functorch/_aot_autograd/runtime_wrappers.py (FakifiedOutWrapper).
@_guard("fakify_first_call", "torch", "torch 2.13.0, torch/_guards.py TracingContext.fakify_first_call")
def _check_fakify_first_call():
    import torch._functorch.aot_autograd  # noqa: F401 (runtime_wrappers alone is a circular import)
    from torch._functorch._aot_autograd import runtime_wrappers

    if "fakify_first_call" not in inspect.getsource(torch._guards.TracingContext.__init__):
        return "torch._guards.TracingContext no longer has fakify_first_call"
    if "fakify_first_call" not in inspect.getsource(runtime_wrappers.FakifiedOutWrapper.pre_compile):
        return "FakifiedOutWrapper.pre_compile no longer reads fakify_first_call"
    return None


def outputs_fakified_first() -> bool:
    """True while AOTAutograd compiles a graph whose first call returns its forward graph's output values
    (DDPOptimizer's subgraphs)."""
    require("fakify_first_call")
    context = torch._guards.TracingContext.try_get()
    return bool(context is not None and context.fakify_first_call)
