"""Record a training step run eagerly on the meta device into an :class:`EventLog`.

:class:`Recorder` is a ``TorchDispatchMode``. Every ATen op that reaches it becomes an
:class:`OpRecord`; every tensor storage it sees is given a storage id (sid). A storage is
*allocated* when an op first returns it and *freed* when its last Python/C++ reference goes
(observed with a weakref on the untyped storage, so lifetimes are exactly the eager ones:
tensors held by the training loop, by autograd's saved variables, by the optimizer, ...).

Views, aliases and in-place ops need no special casing: they return a tensor whose storage is
already known, so they allocate nothing.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import torch

from memgraph.errors import MemgraphError, TraceError
from memgraph.private_api import TorchDispatchMode, fake_mode_active, fake_tensor_type
from memgraph.trace.record.event_log import ALLOC, FREE, EventLog, OpRecord, Origin, Role

_FAKE = fake_tensor_type()

__all__ = ["ALLOC", "FREE", "Recorder", "arg_tensors", "without_dynamo_wrapper"]


# id(OpOverload) -> (the op, "aten.mm.default"): one string per op kind, not one per call; by id, as
# OpOverload.__hash__ is Python (torch 2.13 torch/_ops.py); the op is held, so its id is never reused by another op
_OP_NAMES: dict = {}
_DTYPE_NAMES: dict = {}  # torch.dtype -> "float32"


def _op_name(func) -> str:
    known = _OP_NAMES.get(id(func))
    if known is None:
        known = _OP_NAMES[id(func)] = (func, str(func))
    return known[1]


def _dtype_name(dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


_Tensor = torch.Tensor
_LIFT_FRESH = torch.ops.aten.lift_fresh.default
_TO_COPY = torch.ops.aten._to_copy.default


def _host_meta_move(src, out) -> bool:
    """``out`` is ``src`` moved between the host and meta, nothing else changed (see :meth:`Recorder._alias`)."""
    return (isinstance(src, _Tensor) and isinstance(out, _Tensor) and src.is_meta != out.is_meta
            and src.dtype == out.dtype and src.layout == out.layout)


def arg_tensors(args: tuple, kwargs: dict) -> list:
    """Tensors in an op's positional then keyword arguments, in order: :func:`_tensors` of both, without
    its recursion for the usual arguments (tensors, scalars, lists of them)."""
    out = []
    for a in args:
        if isinstance(a, _Tensor):
            out.append(a)
        elif isinstance(a, (list, tuple, dict)):
            _tensors(a, out)
    if kwargs:
        _tensors(kwargs, out)
    return out


def _out_tensors(out) -> list:
    """Tensors an op returned, in order (:func:`_tensors`), one tensor without a list walk."""
    if isinstance(out, _Tensor):
        return [out]
    return _tensors(out, [])


def _tensors(obj, out: list) -> list:
    """Tensors in an ATen op's arguments or results (tensors, lists/tuples of them, dicts), in order."""
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            _tensors(item, out)
    elif isinstance(obj, dict):
        for item in obj.values():
            _tensors(item, out)
    return out


@dataclass(eq=False)
class Recorder(TorchDispatchMode):
    """Dispatch mode that turns an eager meta-device run into a storage event log."""

    module_of: object = None  # callable returning the current module path
    device_type: str = "meta"
    # Host tensors the model makes (torch.arange without a device, AdamW's for-loop ``step`` counters) are device
    # memory on the cpu target, whose device is the host; None on the cuda target, where they are not (a host
    # tensor moved to the device is: its copy is a meta tensor).
    host_type: str | None = None
    workspace_of: object = None  # callable (op, args, kwargs, out) -> [bytes] of kernel scratch buffers
    # id(untyped storage) of meta tensors that stand for host memory on the cuda target (DeepSpeed's offloaded
    # optimizer partitions, memgraph/ds_engine/offload.py): not device memory, never recorded
    not_device: set = field(default_factory=set)
    on_op: object = None  # callable (recorder, OpRecord) after each op: runtime models add allocations here
    phase: str = "setup"
    iteration: int = 0
    log: EventLog = field(default_factory=EventLog)

    def __post_init__(self):
        super().__init__()
        self._sid_by_key: dict[int, int] = {}  # id(untyped storage) -> sid, while alive
        self._refs: dict[int, weakref.ref] = {}
        self._alias_refs: dict[int, weakref.ref] = {}  # id(storage) -> weakref, storages that alias a sid (_alias)
        self._holders: dict[int, int] = {}  # sid -> storages holding it, where more than one (_alias)

    def enter(self, iteration: int, phase: str) -> None:
        """Start a phase; events from now on belong to it."""
        self.iteration, self.phase = iteration, phase
        self.log.phase_marks.append((len(self.log.events), iteration, phase))

    def close(self) -> None:
        """Stop recording frees: storages still alive now stay alive in the trace."""
        self._refs.clear()  # a dropped weakref never calls back
        self._alias_refs.clear()

    # -- storages -----------------------------------------------------------------------
    def _module(self) -> str:
        return self.module_of() if self.module_of is not None else ""

    def sid_of(self, t: torch.Tensor) -> int | None:
        """Storage id of a tracked tensor, None if its storage was never seen."""
        return self._sid_by_key.get(id(t.untyped_storage()))

    def register(self, t: torch.Tensor, origin: Origin | str, name: str, module: str = "", op_index: int = -1) -> int:
        """Track ``t``'s storage (allocating it now) unless it is tracked already."""
        st = t.untyped_storage()
        key = id(st)
        sid = self._sid_by_key.get(key)
        if sid is not None:
            return sid
        rec = self.log.allocate(st.nbytes(), _dtype_name(t.dtype), tuple(t.shape), Origin(origin),
                                name, module, self.phase, self.iteration, op_index)
        sid = rec.sid
        self._sid_by_key[key] = sid
        self._refs[sid] = weakref.ref(st, lambda _r, key=key, sid=sid: self._on_free(key, sid))
        return sid

    def _workspace(self, nbytes: int, name: str, module: str, op_index: int):
        rec = self.log.allocate(nbytes, "uint8", (nbytes,), Origin.WORKSPACE, name, module, self.phase,
                                self.iteration, op_index)
        rec.last_use_op = op_index
        return rec

    def _transient(self, nbytes: int, name: str, module: str, op_index: int) -> None:
        """A buffer the kernel allocates and frees inside the op (never seen as a tensor)."""
        self.log.free(self._workspace(nbytes, name, module, op_index).sid)

    def persistent(self, nbytes: int, name: str, module: str, op_index: int) -> int:
        """A buffer a library allocates through the device allocator and keeps (never freed)."""
        return self._workspace(nbytes, name, module, op_index).sid

    def _on_free(self, key: int, sid: int) -> None:
        if self._sid_by_key.get(key) == sid:
            del self._sid_by_key[key]
        if self._alias_refs.pop(key, None) is None:
            self._refs.pop(sid, None)
        held = self._holders.pop(sid, 1) - 1
        if held:
            self._holders[sid] = held
        else:
            self.log.free(sid)

    def _alias(self, t: torch.Tensor, sid: int) -> None:
        """``t``'s storage is the memory of ``sid`` on the target: no allocation; ``sid`` is freed when the last
        storage holding it goes. On the cpu target a copy between the host and meta (``.to(device)`` of a mask
        made on the CPU, ``.cpu()`` / ``.tolist()`` of a meta tensor) is one tensor in the real step, where
        ``Tensor.to`` returns ``self`` for the device it is already on (aten/src/ATen/native/TensorConversions.cpp
        ``to_impl``)."""
        st = t.untyped_storage()
        key = id(st)
        if key in self._sid_by_key:
            return
        self._sid_by_key[key] = sid
        self._holders[sid] = self._holders.get(sid, 1) + 1
        self._alias_refs[key] = weakref.ref(st, lambda _r, key=key, sid=sid: self._on_free(key, sid))

    # -- ops ------------------------------------------------------------------------------
    def tracks(self, t: torch.Tensor) -> bool:
        """Whether ``t``'s memory is the target's device memory, i.e. recorded (meta; host too on the cpu target)."""
        if self.not_device and id(t.untyped_storage()) in self.not_device:
            return False
        if self.device_type == "meta":  # no torch.device object made per tensor
            return t.is_meta or (self.host_type is not None and t.device.type == self.host_type
                                 and not isinstance(t, _FAKE))  # a fake "cpu" tensor holds no memory
        return t.device.type == self.device_type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        module = self._module()
        try:
            out = func(*args, **kwargs)
        except MemgraphError:  # already says what went wrong (a nested op's TraceError, --timeout)
            raise
        except Exception as e:  # re-raised with the op and module attached
            where = module or "the model's top level"
            raise TraceError(
                f"tracing failed at {func} in module '{where}' ({self.phase}, iteration "
                f"{self.iteration}): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from e
        if not fake_mode_active():  # DTensor's sharding propagation: no device work, and run only on a
            self._record(func, args, kwargs, out, module)  # cache miss, so recording it made traces differ
        return out

    def _record(self, func, args, kwargs, out, module: str) -> None:
        log = self.log
        storages = log.storages
        sid_by_key = self._sid_by_key
        meta = self.device_type == "meta" and self.host_type is None  # t.is_meta: no torch.device made per tensor
        index = len(log.ops)
        name = _op_name(func)
        inputs = []
        outputs, allocated = [], []
        host = self.not_device
        for t in arg_tensors(args, kwargs):
            if not (t.is_meta if meta else self.tracks(t)) or host and id(t.untyped_storage()) in host:
                continue
            sid = sid_by_key.get(id(t.untyped_storage()))
            if sid is None and func is _LIFT_FRESH:  # torch.tensor(data): made without dispatch, lifted here
                sid = self.register(t, Origin.OP, name, module, op_index=index)
                allocated.append(sid)
            elif sid is None:  # a storage created where no op we saw could create it
                sid = self.register(t, Origin.UNTRACKED, name, module, op_index=index)
            storages[sid].last_use_op = index
            inputs.append(sid)
        if not meta and func is _TO_COPY and inputs and _host_meta_move(args[0], out):
            self._alias(out, inputs[0])
        event = len(log.events) - len(allocated)
        for t in _out_tensors(out):
            if not (t.is_meta if meta else self.tracks(t)) or host and id(t.untyped_storage()) in host:
                continue
            sid = sid_by_key.get(id(t.untyped_storage()))
            if sid is None:
                sid = self.register(t, Origin.OP, name, module, op_index=index)
                allocated.append(sid)
            storages[sid].last_use_op = index
            outputs.append(sid)
        if self.workspace_of is not None:
            for nbytes in self.workspace_of(name, args, kwargs, out):
                self._transient(nbytes, f"workspace of {func}", module, index)
        info = OpRecord(index, name, module, self.phase, self.iteration,
                        tuple(inputs), tuple(outputs), tuple(allocated), event)
        log.ops.append(info)
        if self.on_op is not None:
            self.on_op(self, info)

    # -- roles ----------------------------------------------------------------------------
    def mark_saved(self, t: torch.Tensor) -> None:
        """Autograd saved ``t`` for backward (called from a saved-tensors pack hook)."""
        if isinstance(t, torch.Tensor) and self.tracks(t):
            sid = self.sid_of(t)
            if sid is not None:
                self.log.storages[sid].saved_for_backward = True

    def mark_role(self, t: torch.Tensor, role: Role | str, module: str | None = None) -> None:
        """Name the role of ``t``'s storage (gradient, optimizer_state), optionally re-attributing it."""
        if isinstance(t, torch.Tensor) and self.tracks(t):
            sid = self.sid_of(t)
            if sid is not None and self.log.storages[sid].origin == Origin.OP:
                self.log.storages[sid].role = Role(role)
                if module is not None:
                    self.log.storages[sid].module = module


def without_dynamo_wrapper(cls: type) -> type:
    """``cls`` with its own ``__torch_dispatch__`` called directly.

    TorchDispatchMode.__init_subclass__ wraps a subclass's ``__torch_dispatch__`` in torch._disable_dynamo (so
    that torch.compile never traces into a dispatch frame; torch/utils/_python_dispatch.py, torch 2.12-2.13): a
    per-op cost of setting and restoring the eval-frame callback, in every mode of the stack. The trace's modes
    never run under torch.compile (``--compile`` compiles outside them: memgraph/compiled/), so the method the
    class defined is put back (the wrapper keeps it in ``__wrapped__``, functools.wraps)."""
    method = cls.__dict__["__torch_dispatch__"]
    cls.__torch_dispatch__ = getattr(method, "__wrapped__", method)
    return cls


without_dynamo_wrapper(Recorder)
