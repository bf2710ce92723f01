"""Record a training step run eagerly on the meta device.

:class:`Recorder` is a ``TorchDispatchMode``. Every ATen op that reaches it becomes a node of
a ``torch.fx.Graph``; every tensor storage it sees is given a storage id (sid). A storage is
*allocated* when an op first returns it and *freed* when its last Python/C++ reference goes
(observed with a weakref on the untyped storage, so lifetimes are exactly the eager ones:
tensors held by the training loop, by autograd's saved variables, by the optimizer, ...).

Views, aliases and in-place ops need no special casing: they return a tensor whose storage is
already known, so they allocate nothing.

The fx nodes carry ``node.meta["memgraph"]`` (an :class:`OpInfo`); storages are in
:attr:`Recorder.storages`; the ordered alloc/free stream is :attr:`Recorder.events`.
"""

from __future__ import annotations

import operator
import weakref
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map
from torch.utils.weak import WeakIdKeyDictionary

from ..errors import TraceError

ALLOC, FREE = 0, 1


@dataclass
class StorageRecord:
    """One tensor storage: the unit of memory that an allocator hands out."""

    sid: int
    nbytes: int
    dtype: str
    shape: tuple[int, ...]
    origin: str  # "parameter" | "buffer" | "input" | "op" | "untracked" | "workspace"
    name: str  # parameter/buffer/input name, or the op that created it
    module: str  # innermost module path when it was created
    phase: str
    iteration: int
    node: int  # index of the creating op node (-1 if created before the trace)
    alloc_event: int
    free_event: int | None = None
    last_use_node: int = -1
    saved_for_backward: bool = False
    role: str | None = None  # "gradient" | "optimizer_state" | "autocast_cache" once known


@dataclass
class OpInfo:
    """What :class:`Recorder` knows about one op node."""

    index: int
    op: str  # "aten.mm.default"
    module: str
    phase: str
    iteration: int
    inputs: tuple[int, ...]  # sids read
    outputs: tuple[int, ...]  # sids written/returned
    allocated: tuple[int, ...]  # sids first allocated by this op
    event: int  # index in Recorder.events when the op ran


@dataclass(eq=False)
class Recorder(TorchDispatchMode):
    """Dispatch mode that turns an eager meta-device run into a graph and a storage stream."""

    module_of: object = None  # callable returning the current module path
    device_type: str = "meta"
    workspace_of: object = None  # callable (op, args, kwargs, out) -> [bytes] of kernel scratch buffers
    on_op: object = None  # callable (recorder, OpInfo) after each op: runtime models add allocations here
    phase: str = "setup"
    iteration: int = 0
    graph: fx.Graph = field(default_factory=fx.Graph)
    storages: list[StorageRecord] = field(default_factory=list)
    events: list[tuple[int, int]] = field(default_factory=list)  # (ALLOC|FREE, sid)
    ops: list[OpInfo] = field(default_factory=list)
    phase_marks: list[tuple[int, int, str]] = field(default_factory=list)  # (first event, iteration, phase)

    def __post_init__(self):
        super().__init__()
        self._sid_by_key: dict[int, int] = {}  # id(untyped storage) -> sid, while alive
        self._refs: dict[int, weakref.ref] = {}
        self._node_of = WeakIdKeyDictionary()  # tensor -> fx node that produced it
        self._placeholders = 0

    def enter(self, iteration: int, phase: str) -> None:
        """Start a phase; events from now on belong to it."""
        self.iteration, self.phase = iteration, phase
        self.phase_marks.append((len(self.events), iteration, phase))

    def close(self) -> None:
        """Stop recording frees: storages still alive now stay alive in the trace."""
        self._refs.clear()  # a dropped weakref never calls back

    # -- storages -----------------------------------------------------------------------
    def _module(self) -> str:
        return self.module_of() if self.module_of is not None else ""

    def sid_of(self, t: torch.Tensor) -> int | None:
        """Storage id of a tracked tensor, None if its storage was never seen."""
        return self._sid_by_key.get(id(t.untyped_storage()))

    def register(self, t: torch.Tensor, origin: str, name: str, module: str = "", node: int = -1) -> int:
        """Track ``t``'s storage (allocating it now) unless it is tracked already."""
        st = t.untyped_storage()
        key = id(st)
        sid = self._sid_by_key.get(key)
        if sid is not None:
            return sid
        sid = len(self.storages)
        self.storages.append(
            StorageRecord(
                sid=sid, nbytes=st.nbytes(), dtype=str(t.dtype).removeprefix("torch."),
                shape=tuple(t.shape), origin=origin, name=name, module=module,
                phase=self.phase, iteration=self.iteration, node=node, alloc_event=len(self.events),
            )
        )
        self._sid_by_key[key] = sid
        self.events.append((ALLOC, sid))
        self._refs[sid] = weakref.ref(st, lambda _r, key=key, sid=sid: self._on_free(key, sid))
        return sid

    def _transient(self, nbytes: int, name: str, module: str, node: int) -> None:
        """A buffer the kernel allocates and frees inside the op (never seen as a tensor)."""
        sid = len(self.storages)
        self.storages.append(StorageRecord(
            sid=sid, nbytes=nbytes, dtype="uint8", shape=(nbytes,), origin="workspace", name=name, module=module,
            phase=self.phase, iteration=self.iteration, node=node, alloc_event=len(self.events),
            free_event=len(self.events) + 1, last_use_node=node,
        ))
        self.events.append((ALLOC, sid))
        self.events.append((FREE, sid))

    def persistent(self, nbytes: int, name: str, module: str, node: int) -> int:
        """A buffer a library allocates through the device allocator and keeps (never freed)."""
        sid = len(self.storages)
        self.storages.append(StorageRecord(
            sid=sid, nbytes=nbytes, dtype="uint8", shape=(nbytes,), origin="workspace", name=name, module=module,
            phase=self.phase, iteration=self.iteration, node=node, alloc_event=len(self.events), last_use_node=node,
        ))
        self.events.append((ALLOC, sid))
        return sid

    def _on_free(self, key: int, sid: int) -> None:
        self.storages[sid].free_event = len(self.events)
        self.events.append((FREE, sid))
        if self._sid_by_key.get(key) == sid:
            del self._sid_by_key[key]
        self._refs.pop(sid, None)

    # -- graph --------------------------------------------------------------------------
    def _arg_node(self, t: torch.Tensor) -> fx.Node:
        node = self._node_of.get(t)
        if node is None:
            node = self.graph.placeholder(f"external_{self._placeholders}")
            self._placeholders += 1
            self._node_of[t] = node
        return node

    def _tracked(self, t) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type == self.device_type

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        module = self._module()
        try:
            out = func(*args, **kwargs)
        except Exception as e:  # re-raised with the op and module attached
            where = module or "the model's top level"
            raise TraceError(
                f"tracing failed at {func} in module '{where}' ({self.phase}, iteration "
                f"{self.iteration}): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            ) from e
        self._record(func, args, kwargs, out, module)
        return out

    def _record(self, func, args, kwargs, out, module: str) -> None:
        index = len(self.ops)
        flat_in = [t for t in tree_flatten((args, kwargs))[0] if self._tracked(t)]
        inputs = []
        for t in flat_in:
            sid = self.sid_of(t)
            if sid is None:  # a storage created where no op we saw could create it
                sid = self.register(t, "untracked", str(func), module, node=index)
            self.storages[sid].last_use_node = index
            inputs.append(sid)
        node_args, node_kwargs = tree_map(
            lambda a: self._arg_node(a) if isinstance(a, torch.Tensor) else a, (args, kwargs)
        )
        node = self.graph.call_function(func, tuple(node_args), dict(node_kwargs))
        event = len(self.events)
        flat_out, _ = tree_flatten(out)
        outputs, allocated = [], []
        multi = not isinstance(out, torch.Tensor)
        for i, t in enumerate(flat_out):
            if not self._tracked(t):
                continue
            before = len(self.storages)
            sid = self.register(t, "op", str(func), module, node=index)
            if len(self.storages) > before:
                allocated.append(sid)
            self.storages[sid].last_use_node = index
            outputs.append(sid)
            self._node_of[t] = self.graph.call_function(operator.getitem, (node, i)) if multi else node
        if self.workspace_of is not None:
            for nbytes in self.workspace_of(str(func), args, kwargs, out):
                self._transient(nbytes, f"workspace of {func}", module, index)
        info = OpInfo(index, str(func), module, self.phase, self.iteration,
                      tuple(inputs), tuple(outputs), tuple(allocated), event)
        node.meta["memgraph"] = info
        self.ops.append(info)
        if self.on_op is not None:
            self.on_op(self, info)

    # -- roles ----------------------------------------------------------------------------
    def mark_saved(self, t: torch.Tensor) -> None:
        """Autograd saved ``t`` for backward (called from a saved-tensors pack hook)."""
        if self._tracked(t):
            sid = self.sid_of(t)
            if sid is not None:
                self.storages[sid].saved_for_backward = True

    def mark_role(self, t: torch.Tensor, role: str, module: str | None = None) -> None:
        """Name the role of ``t``'s storage (gradient, optimizer_state), optionally re-attributing it."""
        if self._tracked(t):
            sid = self.sid_of(t)
            if sid is not None and self.storages[sid].origin == "op":
                self.storages[sid].role = role
                if module is not None:
                    self.storages[sid].module = module
