"""Reuse meta-kernel outputs for ops that repeat: :class:`OpCache`, the lowest dispatch mode of a trace.

A meta kernel computes only its outputs' metadata (shape, strides, dtype) from its inputs' metadata, and many of
them are Python (torch/_meta_registrations.py, torch/_refs, decompositions). A training step runs the same op
on the same metadata again and again (every layer, every iteration, every test of one tiny model), so the
outputs of a call are remembered by (op, each tensor argument's shape, stride, dtype and storage offset, every
other argument) and a repeat gets fresh ``torch.empty_strided`` meta tensors of the same metadata instead of a
run of the kernel. The modes above (the recorder, the meta-kernel fixes, the shadow values) still see every op.

The rules follow FakeTensorMode's own dispatch cache (torch 2.13, torch/_subclasses/fake_tensor.py
``_validate_cache_key``, ``_prep_args_for_hash``, ``_validate_output_for_cache_entry``): no caching of ops tagged
``data_dependent_output``, ``dynamic_output_shape`` or ``inplace_view``, of ``_unsafe_view`` and the lift ops,
of ops outside ATen/prims, of views; the default dtype is part of the key. Stricter here: every argument is a
plain meta tensor (not a host, fake or subclass tensor; not complex, whose conjugate and negative bits the key
leaves out), a number, string, dtype, device, layout or memory format, or a list/tuple of those (a SymInt, a
generator, a function: the call runs as is); an op with no tensor argument is keyed only with ``device=meta``.
Two kinds of op are cached:

* an op whose schema lets no return alias an argument: a repeat gets ``empty_strided`` outputs, reused only when
  the kernel's were exactly that (meta, a storage of its own not shared with an input or another output, storage
  offset 0, the storage size the strides need, not requiring grad; ints, floats, bools and Nones of a tuple are
  kept as they were); anything else marks that key as never cached;
* an in-place op ``op_(self, ...) -> self`` that writes nothing else: a repeat returns ``self``, reused only
  when the kernel returned ``self`` with its metadata unchanged (``resize_`` and ``set_`` are never cached).

Random ops (``nondeterministic_seeded``: dropout, ``bernoulli_``) are cached too: on meta they draw nothing from
a generator (the CPU generator's state is unchanged, tests/test_op_cache.py), and a ``generator=`` argument is
not keyed. Autograd runs above the mode and sets the outputs' ``requires_grad`` itself.

``MEMGRAPH_NO_OP_CACHE=1`` (read at each trace) turns the cache off: every op runs its kernel.
"""

from __future__ import annotations

import contextlib
import os

import torch

from memgraph.private_api import TorchDispatchMode, op_schema, storage_key
from memgraph.trace.record.recorder import arg_tensors, without_dynamo_wrapper

__all__ = ["OpCache", "cache_enabled", "clear", "op_cache", "stats"]

_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter
_PLAIN = (_Tensor, _Parameter)  # exact types: a subclass (fake, quantized, DTensor) is never keyed
_STRIDED = torch.strided
_META = torch.device("meta")
_SCALARS = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout,
                      torch.memory_format})
_COMPLEX = frozenset({torch.complex32, torch.complex64, torch.complex128})
_SKIP_TAGS = (torch.Tag.data_dependent_output, torch.Tag.dynamic_output_shape, torch.Tag.inplace_view)
_SKIP_OPS = {"aten::_unsafe_view", "aten::lift", "aten::lift_fresh", "aten::lift_fresh_copy", "aten::resize_",
             "aten::resize_as_", "aten::set_", "aten::as_strided_", "aten::_resize_output_"}
_NAMESPACES = ("aten", "prims")

_FRESH, _IN_PLACE = 1, 2  # the kinds of cacheable op (_kind); 0: never cached
_NEVER = ()  # the entry of a key whose outputs were not what empty_strided makes
_SELF = (_IN_PLACE,)  # the entry of an in-place op: its first argument, unchanged in metadata
_MAX_ENTRIES = 200_000  # cleared when reached: a process tracing many shapes keeps a bounded cache

_ENTRIES: dict = {}  # key -> entry (_entry)
# id(OpOverload) -> (the op, _FRESH / _IN_PLACE / 0): keyed by id, as OpOverload.__hash__ is Python (torch 2.13
# torch/_ops.py); the op is held, so its id is never reused by another op
_KINDS: dict = {}
_COUNTS = {"hits": 0, "misses": 0, "bypassed": 0}


def cache_enabled() -> bool:
    """False when ``MEMGRAPH_NO_OP_CACHE`` is set to anything but ``""`` / ``"0"``."""
    return os.environ.get("MEMGRAPH_NO_OP_CACHE", "") in ("", "0")


def op_cache():
    """The mode to enter first (lowest) around a traced step: an :class:`OpCache`, or nothing when turned off."""
    return OpCache() if cache_enabled() else contextlib.nullcontext()


def clear() -> None:
    """Forget every remembered output and the counts (tests)."""
    _ENTRIES.clear()
    for k in _COUNTS:
        _COUNTS[k] = 0


def stats() -> dict[str, int]:
    """Calls answered from the cache (hits), run and remembered (misses), run without a key (bypassed)."""
    return dict(_COUNTS)


def _kind(func) -> int:
    """The op-level rules (module docstring), decided once per op: _FRESH (every return a new tensor or a
    value), _IN_PLACE (``op_(self, ...)`` returning ``self``, nothing else written) or 0."""
    if getattr(func, "namespace", None) not in _NAMESPACES or func.is_view \
            or any(tag in func.tags for tag in _SKIP_TAGS):
        return 0
    schema = op_schema(func)
    if schema.name in _SKIP_OPS or not schema.returns:
        return 0
    if not schema.is_mutable:
        return _FRESH if all(r.alias_info is None for r in schema.returns) else 0
    args, ret = schema.arguments, schema.returns[0]
    written = [a for a in args if a.alias_info is not None and a.alias_info.is_write]
    if (len(schema.returns) == 1 and schema.name.endswith("_") and written == [args[0]] and not args[0].kwarg_only
            and str(args[0].type) == "Tensor" and ret.alias_info is not None and ret.alias_info.is_write
            and ret.alias_info.before_set == args[0].alias_info.before_set):
        return _IN_PLACE
    return 0


def _add(a, key: list) -> int:
    """Append argument ``a`` to ``key``: the number of tensors in it, -1 when it cannot be keyed (the call then
    runs as is)."""
    cls = type(a)
    if cls is _Tensor or cls is _Parameter:
        dtype = a.dtype
        if not a.is_meta or dtype in _COMPLEX or a.layout is not _STRIDED:
            return -1
        key += (a.shape, a.stride(), dtype, a.storage_offset())
        return 1
    if cls in _SCALARS:
        key += (cls, a)
        return 0
    if cls is list or cls is tuple:
        key += (cls, len(a))
        n = 0
        for item in a:
            m = _add(item, key)
            if m < 0:
                return -1
            n += m
        return n
    return -1  # a SymInt, a function, a generator, a tensor subclass, ...


def _key(func, args, kwargs):
    """The call's key; None when an argument cannot be keyed, or when no argument is a tensor and no ``device``
    argument says meta (a factory op whose device would come from elsewhere)."""
    key = [id(func), torch.get_default_dtype()]
    tensors = 0
    for a in args:
        n = _add(a, key)
        if n < 0:
            return None
        tensors += n
    for name, a in kwargs.items():
        key.append(name)
        n = _add(a, key)
        if n < 0:
            return None
        tensors += n
    if not tensors and kwargs.get("device") != _META:
        return None
    return tuple(key)


def _fresh_entry(out, args, kwargs):
    """What a repeat of a _FRESH op returns, from the kernel's output ``out``: ``(shape, stride, dtype)`` for a
    tensor, ``(type, items)`` for a list/tuple of tensors (3-tuples) and values (1-tuples), or _NEVER."""
    inputs = {storage_key(t) for t in arg_tensors(args, kwargs)}
    seen = set()

    def one(t):
        if type(t) is not _Tensor or not t.is_meta or t.requires_grad or t.layout is not _STRIDED \
                or t.storage_offset() != 0 or t.dtype in _COMPLEX:
            raise _Uncached
        st = storage_key(t)
        if st in inputs or st in seen:
            raise _Uncached
        seen.add(st)
        meta = (tuple(t.shape), t.stride(), t.dtype)
        if _synth(*meta).untyped_storage().nbytes() != t.untyped_storage().nbytes():  # a larger buffer
            raise _Uncached
        return meta

    try:
        if isinstance(out, _Tensor):
            return one(out)
        if type(out) in (tuple, list):
            return (type(out), tuple(one(t) if isinstance(t, _Tensor) else (_value(t),) for t in out))
    except _Uncached:
        pass
    return _NEVER


def _value(v):
    if v is not None and type(v) not in (int, float, bool):
        raise _Uncached
    return v


class _Uncached(Exception):
    pass


def _synth(shape, stride, dtype):
    return torch.empty_strided(shape, stride, dtype=dtype, device=_META)


def _item(item):
    return _synth(*item) if len(item) == 3 else item[0]


class OpCache(TorchDispatchMode):
    """The lowest dispatch mode of a trace: repeats of a cacheable op get remembered outputs (module docstring)."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        known = _KINDS.get(id(func))
        if known is None:
            known = _KINDS[id(func)] = (func, _kind(func))
        kind = known[1]
        key = _key(func, args, kwargs) if kind else None
        if key is None:
            _COUNTS["bypassed"] += 1
            return func(*args, **kwargs)
        entry = _ENTRIES.get(key)
        if entry:
            _COUNTS["hits"] += 1
            if len(entry) == 3:
                return _synth(*entry)
            if entry is _SELF:
                return args[0]
            return entry[0](_item(item) for item in entry[1])
        out = func(*args, **kwargs)
        if entry is None:  # first call: remember it
            if len(_ENTRIES) >= _MAX_ENTRIES:
                _ENTRIES.clear()
            if kind == _FRESH:
                entry = _fresh_entry(out, args, kwargs)
            else:  # the kernel returned self, its metadata unchanged
                self_ = args[0] if args else None
                entry = _SELF if self_ is not None and out is self_ and key[2:6] == (self_.shape, self_.stride(), self_.dtype,
                                                               self_.storage_offset()) else _NEVER
            _ENTRIES[key] = entry
            _COUNTS["misses"] += 1
        else:
            _COUNTS["bypassed"] += 1
        return out



without_dynamo_wrapper(OpCache)
