"""The storage event log: memgraph's one intermediate form.

Everything after the trace reads this and nothing else. It holds

* ``storages``: one :class:`StorageRecord` per tensor storage (the unit an allocator hands out),
  indexed by storage id (sid). Views and in-place results share their base's storage, so they
  are already resolved: a record is a block of device memory, not a tensor;
* ``events``: the ordered alloc/free stream, ``(ALLOC | FREE, sid)``, in program order;
* ``ops``: one :class:`OpRecord` per ATen op that ran, with the storages it read and wrote;
* ``phase_marks``: ``(first event, iteration, phase)`` where each phase of each iteration begins.

Each record's :class:`Origin` (where it came from) and :class:`Role` (what the training loop made
of it) are set while tracing; its :class:`Category` is written by the categorize pass
(:mod:`memgraph.analysis.categorize`), so every later pass reads one field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

ALLOC, FREE = 0, 1


class Origin(str, Enum):
    """Where a storage came from."""

    PARAMETER = "parameter"
    BUFFER = "buffer"
    INPUT = "input"
    OP = "op"  # returned by an ATen op
    UNTRACKED = "untracked"  # read by an op but made where no op we saw could make it
    WORKSPACE = "workspace"  # kernel scratch or a library workspace: never a tensor


class Role(str, Enum):
    """What the training loop made of an op-made storage (set by the tracer)."""

    GRADIENT = "gradient"
    OPTIMIZER_STATE = "optimizer_state"
    AUTOCAST_CACHE = "autocast_cache"


class Category(str, Enum):
    """Memory categories, one enum from analysis to report (values are the report's names)."""

    PARAMETER = "parameters"
    BUFFER = "buffers"
    INPUT = "inputs"
    GRADIENT = "gradients"
    OPTIMIZER_STATE = "optimizer_state"
    AUTOCAST_CACHE = "autocast_cache"  # autocast's low-precision copies of the weights (cached_cast)
    ACTIVATION = "activations"  # saved for backward by autograd
    TEMPORARY = "temporaries"  # everything else: outputs, intermediates, backward scratch
    WORKSPACE = "workspaces"  # kernel scratch buffers and library workspaces (cuBLAS), not tensors


@dataclass(slots=True)
class StorageRecord:
    """One tensor storage."""

    sid: int
    nbytes: int
    dtype: str
    shape: tuple[int, ...]
    origin: Origin
    name: str  # parameter/buffer/input name, or the op that created it
    module: str  # innermost module path when it was created (parameters: their owner)
    phase: str
    iteration: int
    op_index: int  # index in EventLog.ops of the op that created it (-1: before the trace)
    alloc_event: int
    free_event: int | None = None  # None: alive at the end of the trace
    last_use_op: int = -1  # index of the last op that read or wrote it
    saved_for_backward: bool = False
    role: Role | None = None
    category: Category | None = None  # written by analysis.categorize


@dataclass(slots=True)
class OpRecord:
    """One ATen op that ran."""

    index: int
    op: str  # "aten.mm.default"
    module: str
    phase: str
    iteration: int
    inputs: tuple[int, ...]  # sids read
    outputs: tuple[int, ...]  # sids returned (new or already known)
    allocated: tuple[int, ...]  # sids first allocated by this op
    event: int  # index in EventLog.events when the op returned


@dataclass
class EventLog:
    storages: list[StorageRecord] = field(default_factory=list)
    events: list[tuple[int, int]] = field(default_factory=list)
    ops: list[OpRecord] = field(default_factory=list)
    phase_marks: list[tuple[int, int, str]] = field(default_factory=list)

    def allocate(self, nbytes: int, dtype: str, shape: tuple[int, ...], origin: Origin, name: str, module: str,
                 phase: str, iteration: int, op_index: int) -> StorageRecord:
        """Append a new storage and its ALLOC event."""
        sid = len(self.storages)  # positional: StorageRecord's field order (one call per storage)
        rec = StorageRecord(sid, nbytes, dtype, shape, origin, name, module, phase, iteration, op_index,
                            len(self.events))
        self.storages.append(rec)
        self.events.append((ALLOC, sid))
        return rec

    def free(self, sid: int) -> None:
        self.storages[sid].free_event = len(self.events)
        self.events.append((FREE, sid))
