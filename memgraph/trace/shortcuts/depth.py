"""Depth synthesis: the event log of a deep model from the trace of a shallow copy of it.

Tracing costs time linear in the number of ops, and almost all ops of a transformer are in its repeated
layers, whose event streams are the same from layer to layer up to storage ids and the layer index in
names. So the training step is traced at a small depth ``b`` (layers ``0 .. b-1``) and one interior
layer ``m`` of it is repeated: every item the layer made (its storages, ops, alloc and free events, its
entries in a foreach optimizer op's tensor lists) is copied ``n - b`` more times as layers ``m .. m+n-b``,
and everything after layer ``m`` is renumbered. The result is the :class:`EventLog` a trace of all ``n``
layers records (same storages, fields, order, ops and phase marks), provided layer ``m``'s neighbours
look like layer ``m`` to it. :func:`synthesize` is checked against a real trace at depth ``b + 1``
before it is trusted (:mod:`memgraph.trace.shortcuts.depth_run`); any difference is a fallback to the full trace.

**Blocks.** Where the layers alternate with a period ``p`` (``--checkpoint-every 2``: transformers checkpoints
layers 0, 2, 4, ..., so no one layer looks like its neighbours), the unit repeated is a block of ``p``
consecutive layers: everything below reads "layer" as "block", and a layer index ``i`` is block ``i // p``
at place ``i % p`` in it (:class:`Layers`).

**Labels.** Each storage, op and event belongs to a layer or to none:

* a storage: the layer index in its name or module path (parameters, buffers, gradients and optimizer
  state re-attributed to their parameter's module, activations made inside a layer); otherwise the layer
  of the op that made it; for the outputs of an op over all layers (``_foreach_sqrt(exp_avg_sqs)``) the
  layer of the input at the same list position;
* an op: the layer in its module path; an op outside every module (the optimizer's), the one layer all
  the storages it touches belong to (a per-parameter op), else none (a foreach op over every layer, the loss);
* an alloc event: its storage's layer; a free event: the layer of the op that ran last (the free
  happened in that op's code), or, after an op of no layer, the freed storage's layer (``zero_grad``
  dropping each ``.grad``); an op outside every module that touches no storage (``torch.tensor(0.)``, a
  parameter's ``step`` in the optimizer) goes with the item after it.

**Copies.** Each maximal run of layer-``m`` items in program order is emitted once per copy, in
ascending layer order where its neighbours are layer ``m-1`` before / ``m+1`` after (forward, optimizer)
and descending where they are the other way round (backward). A reference from an item in synthesized
layer ``L`` (original layer ``l``) to a storage or op of original layer ``l'`` goes to synthesized layer
``L + l' - l``; when that layer is a copy of ``m`` (or of another original layer than ``l'``) the target is
the item of layer ``m`` (or of that layer) that corresponds to it: same iteration, phase, module and name
up to the layer index, op or shape, and the same ordinal among those. A list in an op of no layer (a
foreach op's tensor lists) gets every copy of each run of layer-``m`` entries.
"""

from __future__ import annotations

import re
from collections import defaultdict

from memgraph.errors import MemgraphError
from memgraph.trace.record.event_log import ALLOC, EventLog, OpRecord, Origin, StorageRecord


class SynthesisError(MemgraphError):
    """The trace does not have the structure depth synthesis copies (the caller falls back to a full trace)."""


def find_stack(parameter_names_by_depth: dict[int, list[str]]) -> str:
    """The module path of the repeated layers (``model.layers``, GPT-2's ``transformer.h``): the one prefix
    ``P`` such that the parameter names ``P.<i>.*`` of the trace at depth ``d`` have exactly ``i in range(d)``,
    for every traced depth ``d``."""
    candidates = None
    for depth, names in parameter_names_by_depth.items():
        indices: dict[str, set[int]] = defaultdict(set)
        for name in names:
            for match in re.finditer(r"\.(\d+)(?=\.|$)", name):
                indices[name[:match.start()]].add(int(match.group(1)))
        found = {prefix for prefix, seen in indices.items() if seen == set(range(depth))}
        candidates = found if candidates is None else candidates & found
    if not candidates or len(candidates) != 1:
        raise SynthesisError(f"no single stack of layers whose count follows the depth ({sorted(candidates or [])})")
    return candidates.pop()


class Layers:
    """Reads and rewrites the layer index in names and module paths of one stack, in units of ``period``
    consecutive layers (a *block*): with ``period`` 2, layers 2i and 2i+1 are block i, and a block moved by j
    moves each of its layers by 2j. Period 1 (a block is a layer) unless the layers alternate (depth_run.py)."""

    def __init__(self, stack: str, period: int = 1):
        self.stack, self.period = stack, period
        self.pattern = re.compile(r"(?<![^.])" + re.escape(stack) + r"\.(\d+)(?=\.|$)")

    def of(self, text: str) -> int | None:
        """The block ``text`` names, None if none; two different ones are an error."""
        if self.stack not in text:
            return None
        found = {int(g) // self.period for g in self.pattern.findall(text)}
        if len(found) > 1:
            raise SynthesisError(f"{text!r} names two layers")
        return found.pop() if found else None

    def renumber(self, text: str, block_to) -> str:
        """``text`` with each layer index ``i`` moved to block ``block_to(i // period)``, same place in it."""
        p = self.period
        return self.pattern.sub(lambda match: f"{self.stack}.{block_to(int(match.group(1)) // p) * p + int(match.group(1)) % p}",
                                text)


class _Synthesis:
    """One synthesis: the depth-``b`` log, the layer ``m`` to repeat, ``k`` extra copies of it."""

    def __init__(self, log: EventLog, layers: Layers, depth: int, target: int, trainable: set[int]):
        self.log, self.layers, self.b = log, layers, depth
        self.m = depth // 2  # an interior layer: its neighbours m-1 and m+1 are layers like it
        self.k = target - depth
        self.pattern = layers.pattern
        self._renamed: dict = {}
        self._label_storages_and_ops()
        self._index_analogs()
        self.params = len(trainable)  # the optimizer's parameters, and how many more each copy adds
        self.params_per_layer = sum(1 for sid in trainable if self.slab[sid] == self.m)

    # -- labels ----------------------------------------------------------------------------------------
    def _label_storages_and_ops(self) -> None:
        log, of = self.log, self.layers.of
        own = []
        for s in log.storages:
            a, b = of(s.name), of(s.module)
            if a is not None and b is not None and a != b:
                raise SynthesisError(f"storage {s.sid} is named in layer {a} and attributed to layer {b}")
            own.append(a if a is not None else b)
        self.olab = []
        self.slab = list(own)
        for op in log.ops:  # in program order, so an op sees the layers of the temporaries earlier ops made
            label = of(op.module)
            if label is None and not op.module:  # an op outside every module (the optimizer's)
                seen = {self.slab[sid] for sid in op.inputs + op.outputs} - {None}
                label = seen.pop() if len(seen) == 1 else None
            self.olab.append(label)
            # storages of no layer of their own: from the op that made them
            for pos, sid in enumerate(op.allocated):
                if own[sid] is not None:
                    continue
                if label is not None:
                    self.slab[sid] = label
                elif len(op.outputs) > 1 and len(op.inputs) >= len(op.outputs):  # a foreach op's list
                    self.slab[sid] = own[op.inputs[op.outputs.index(sid)]]
        for s in log.storages:  # workspaces and untracked inputs: the op they were made in
            if self.slab[s.sid] is None and s.op_index >= 0 and s.origin in (Origin.WORKSPACE, Origin.UNTRACKED):
                self.slab[s.sid] = self.olab[s.op_index]

    def _index_analogs(self) -> None:
        """Keys under which an item of one layer finds the item of another layer that corresponds to it."""
        strip = lambda text: self.pattern.sub(lambda _m: self.layers.stack + ".#", text)
        counts: dict[tuple, int] = defaultdict(int)
        self.skey, self.sby = [], {}
        for s in self.log.storages:
            label = self.slab[s.sid]
            base = (s.iteration, s.phase, s.origin, strip(s.name), strip(s.module), s.shape, s.dtype)
            n = counts[(label, base)]
            counts[(label, base)] = n + 1
            self.skey.append((base, n))
            self.sby[(label, base, n)] = s.sid
        counts.clear()
        self.okey, self.oby = [], {}
        for op in self.log.ops:
            label = self.olab[op.index]
            base = (op.iteration, op.phase, op.op, strip(op.module))
            n = counts[(label, base)]
            counts[(label, base)] = n + 1
            self.okey.append((base, n))
            self.oby[(label, base, n)] = op.index

    # -- references -------------------------------------------------------------------------------------
    def _place(self, label: int, ctx: tuple[int, int] | None) -> tuple[int, int]:
        """Where an item of original layer ``label``, referenced from context ``ctx`` = (original layer,
        synthesized layer) or None (no layer), lies: (original layer whose item it is a copy of, copy)."""
        m, k = self.m, self.k
        if ctx is None:
            if label == m:
                raise SynthesisError("a single item of no layer refers to one item of the repeated layer")
            return label, 0
        t = ctx[1] + label - ctx[0]
        if t < 0 or t >= self.b + k:
            raise SynthesisError(f"a reference to layer {t} of {self.b + k}")
        if t < m:
            return t, 0
        if t > m + k:
            return t - k, 0
        return m, t - m

    def storage(self, sid: int, ctx) -> tuple[int, int]:
        """The instance (original sid, copy) that storage ``sid`` referenced from ``ctx`` is."""
        return self._instance(sid, ctx, self.slab, self.skey, self.sby, "storage")

    def op(self, index: int, ctx) -> tuple[int, int]:
        """The instance (original op index, copy) that op ``index`` referenced from ``ctx`` is."""
        return self._instance(index, ctx, self.olab, self.okey, self.oby, "op")

    def _instance(self, i: int, ctx, labels, keys, by, kind: str) -> tuple[int, int]:
        label = labels[i]
        if label is None:
            return i, 0
        layer, copy = self._place(label, ctx)
        if layer != label:
            base, n = keys[i]
            i = by.get((layer, base, n))
            if i is None:
                raise SynthesisError(f"{kind} {base} #{n} has no counterpart in layer {layer}")
        return i, copy

    def storages(self, sids: tuple[int, ...], ctx) -> list[tuple[int, int]]:
        """A tuple of storage references; from an op of no layer, each run of layer-``m`` entries becomes
        all its copies (a foreach op's lists)."""
        if ctx is not None:
            return [self.storage(sid, ctx) for sid in sids]
        out, labels, i = [], [self.slab[sid] for sid in sids], 0
        while i < len(sids):
            if labels[i] != self.m:
                out.append((sids[i], 0))
                i += 1
                continue
            j = i
            while j < len(sids) and labels[j] == self.m:
                j += 1
            for copy in self._copy_order(labels, i, j):
                out += [(sid, copy) for sid in sids[i:j]]
            i = j
        return out

    def _copy_order(self, labels: list, start: int, end: int) -> range:
        """The copies of the run ``labels[start:end]`` (all layer ``m``) in program order: ascending when
        layer ``m-1`` is before it or ``m+1`` after it, descending the other way round."""
        before = next((x for x in reversed(labels[:start]) if x is not None and x != self.m), None)
        after = next((x for x in labels[end:] if x is not None and x != self.m), None)
        up = before == self.m - 1 or after == self.m + 1
        down = before == self.m + 1 or after == self.m - 1
        if up and down:
            raise SynthesisError("a run of the repeated layer between layers in both orders")
        return range(self.k, -1, -1) if down else range(self.k + 1)

    def rename(self, text: str, ctx) -> str:
        """``text`` with each layer index moved to where ``ctx`` puts it."""
        if self.layers.stack not in text:
            return text
        key = (text, ctx)
        done = self._renamed.get(key)
        if done is None:
            done = self._renamed[key] = self._rename(text, ctx)
        return done

    def _rename(self, text: str, ctx) -> str:

        def block_to(block: int) -> int:
            layer, copy = self._place(block, ctx)
            return layer + copy if layer <= self.m else layer + self.k

        return self.layers.renumber(text, block_to)

    # -- the stream ------------------------------------------------------------------------------------------
    def _items(self, marks: list[int]) -> list[tuple[str, int]]:
        """Ops, events and marks in program order: an op before the events it returned (``OpRecord.event``),
        a phase mark (``("p", index in phase_marks)``) before the ops of its phase, a position to carry over
        (``("q", position)``) before the marks and ops at that position."""
        log = self.log
        ops_at, phases_at = defaultdict(list), defaultdict(list)
        for op in log.ops:
            ops_at[op.event].append(op)
        for i, (pos, _it, _ph) in enumerate(log.phase_marks):
            phases_at[pos].append(i)
        mark_set = set(marks)
        items = []
        for pos in range(len(log.events) + 1):
            if pos in mark_set:
                items.append(("q", pos))
            ops, phases = ops_at.get(pos, ()), phases_at.get(pos, ())
            after = {}  # op index -> the phase mark it follows
            for i in phases:
                for op in ops:
                    if (op.iteration, op.phase) == log.phase_marks[i][1:]:
                        after[op.index] = i
            items += [("o", op.index) for op in ops if op.index not in after]
            for i in phases:
                items.append(("p", i))
                items += [("o", op.index) for op in ops if after.get(op.index) == i]
            if pos < len(log.events):
                items.append(("e", pos))
        return items

    def _item_labels(self, items: list[tuple[str, int]]) -> list[int | None]:
        events, labels, last_op = self.log.events, [], None
        for kind, i in items:
            if kind == "o":
                last_op = label = self.olab[i]
            elif kind in ("p", "q"):
                label = None
            else:
                what, sid = events[i]
                label = self.slab[sid] if what == ALLOC or last_op is None else last_op
            labels.append(label)
        for start, end in self._per_parameter_runs(items):
            labels[start:end] = ["n"] * (end - start)
        following = None  # an op outside every module that touches no storage (the optimizer's torch.tensor(0.)
        for i in range(len(items) - 1, -1, -1):  # for a parameter's step) belongs with what comes next
            kind, index = items[i]
            if kind in ("p", "q"):
                following = None
            elif kind == "o" and labels[i] is None and self._outside_the_layers(self.log.ops[index]) \
                    and not self.log.ops[index].inputs and not self.log.ops[index].outputs:
                labels[i] = following
            elif labels[i] == "n":
                following = None
            elif labels[i] is not None:
                following = labels[i]
        return labels

    def _outside_the_layers(self, op: OpRecord) -> bool:
        """Whether ``op`` ran outside every module, or in a module that holds the stack (``model`` for
        ``model.layers``): FSDP2's hooks on a layer run under its parent's record_function (torch 2.13
        torch/distributed/fsdp/_fully_shard/_fsdp_state.py ``_pre_forward``: ``FSDP::root_pre_forward`` /
        ``FSDP::pre_forward`` profiler ranges), one pair of profiler ops per layer, before it."""
        return not op.module or self.layers.stack.startswith(op.module + ".")

    def _bare(self, item: tuple[str, int]) -> tuple | None:
        """An op outside every module that touches no storage, as (op, phase, iteration); else None."""
        if item[0] != "o":
            return None
        op = self.log.ops[item[1]]
        if op.module or op.inputs or op.outputs:
            return None
        return op.op, op.phase, op.iteration

    def _per_parameter_runs(self, items) -> list[tuple[int, int]]:
        """Runs of one bare op repeated a multiple of the parameter count of times: the optimizer's per-parameter
        calls on values the trace does not hold (foreach Adam's ``step.item()`` per parameter for the bias
        corrections, torch 2.13 torch/optim/adam.py ``_multi_tensor_adam`` with CPU ``step`` tensors)."""
        runs, i = [], 0
        while i < len(items):
            bare = self._bare(items[i])
            j = i + 1
            while bare is not None and j < len(items) and self._bare(items[j]) == bare:
                j += 1
            if bare is not None and j - i > 1 and self.params and (j - i) % self.params == 0:
                runs.append((i, j))
            i = j
        return runs

    def emit(self, marks: list[int]) -> list[tuple[str, int, object, int]]:
        """The synthesized stream: (kind, original index, context, copy) per emitted item."""
        items = self._items(marks)
        labels = self._item_labels(items)
        out, i, m = [], 0, self.m
        while i < len(items):
            label = labels[i]
            if label == "n":  # a per-parameter run: as many calls per parameter for the parameters at the target
                j = next((x for x in range(i, len(items)) if labels[x] != "n"), len(items))
                per_param = (j - i) // self.params
                out += [(*item, None, 0) for item in items[i:j]]
                out += [(*items[j - 1], None, 0)] * (per_param * self.params_per_layer * self.k)
                i = j
                continue
            if label != m:
                ctx = None if label is None else (label, label if label < m else label + self.k)
                out.append((*items[i], ctx, 0))
                i += 1
                continue
            j = i
            while j < len(items) and labels[j] == m:
                j += 1
            for copy in self._copy_order(labels, i, j):
                out += [(kind, index, (m, m + copy), copy) for kind, index in items[i:j]]
            i = j
        return out


def synthesize(log: EventLog, stack: str, depth: int, target: int, marks: list[int], sids: set[int],
               period: int = 1):
    """The event log of ``target`` layers from ``log``, a trace at ``depth`` layers of the stack ``stack``;
    with ``period`` p > 1, ``depth`` and ``target`` count blocks of p layers and a block is what is repeated.

    ``marks`` are event positions to carry over (iteration bounds), ``sids`` a set of storage ids to carry
    over (the trainable parameters). Returns (log, new marks, new sids)."""
    if target < depth:
        raise SynthesisError(f"cannot shrink {depth} layers to {target}")
    return _synthesize(log, stack, depth, target, marks, sids, period)  # inside trace_training's paused_gc


def _synthesize(log: EventLog, stack: str, depth: int, target: int, marks: list[int], sids: set[int],
                period: int = 1):
    syn = _Synthesis(log, Layers(stack, period), depth, target, sids)
    stream = syn.emit(sorted(set(marks)))
    new_sid: dict[tuple[int, int], int] = {}
    new_op: dict[tuple[int, int], int] = {}
    n_ops = 0
    for kind, index, ctx, copy in stream:  # numbering: sids in allocation order, ops in program order
        if kind == "o":
            new_op[(index, copy)] = n_ops  # a per-parameter run's repeats: storages never refer to them
            n_ops += 1
        elif kind == "e":
            what, sid = log.events[index]
            if what == ALLOC:
                new_sid[(sid, copy)] = len(new_sid)
    instance, slab, skey, sby = syn._instance, syn.slab, syn.skey, syn.sby

    def refs(sids: tuple[int, ...], ctx) -> tuple[int, ...]:  # the hot loop: syn.storage inlined, per op and tuple
        try:
            if ctx is None:
                return tuple([new_sid[key] for key in syn.storages(sids, ctx)])
            return tuple([new_sid[(sid, 0) if slab[sid] is None else instance(sid, ctx, slab, skey, sby, "storage")]
                          for sid in sids])
        except KeyError as e:
            raise SynthesisError(f"a reference to a storage the synthesis does not make ({e.args[0]})") from None

    out = EventLog()
    storages: list[StorageRecord | None] = [None] * len(new_sid)
    position: dict[int, int] = {}
    for kind, index, ctx, copy in stream:
        if kind == "q":
            position[index] = len(out.events)
        elif kind == "p":
            out.phase_marks.append((len(out.events), *log.phase_marks[index][1:]))
        elif kind == "o":
            op = log.ops[index]
            out.ops.append(OpRecord(len(out.ops), op.op, syn.rename(op.module, ctx), op.phase, op.iteration,
                                    refs(op.inputs, ctx), refs(op.outputs, ctx), refs(op.allocated, ctx),
                                    len(out.events)))
        else:
            what, sid = log.events[index]
            if what == ALLOC:
                s = log.storages[sid]
                new = new_sid[(sid, copy)]
                op_index = -1 if s.op_index < 0 else _lookup(new_op, [syn.op(s.op_index, ctx)], "op")[0]
                storages[new] = StorageRecord(new, s.nbytes, s.dtype, s.shape, s.origin, syn.rename(s.name, ctx),
                                              syn.rename(s.module, ctx), s.phase, s.iteration, op_index,
                                              len(out.events), None, -1, s.saved_for_backward, s.role, s.category)
                out.events.append((ALLOC, new))
            else:
                new = _lookup(new_sid, [syn.storage(sid, ctx)], "storage")[0]
                record = storages[new]
                if record is None or record.free_event is not None:
                    raise SynthesisError(f"a free of storage {new} before its allocation or twice")
                record.free_event = len(out.events)
                out.events.append((what, new))
    out.storages = storages
    _last_uses(out)
    position[len(log.events)] = len(out.events)
    copies = defaultdict(list)
    for sid, copy in new_sid:
        copies[sid].append(new_sid[(sid, copy)])
    return out, [position[p] for p in marks], {new for sid in sids for new in copies[sid]}


def _lookup(table: dict, keys, what: str) -> list[int]:
    try:
        return [table[key] for key in keys]
    except KeyError as e:
        raise SynthesisError(f"a reference to a {what} the synthesis does not make ({e.args[0]})") from None


def _last_uses(log: EventLog) -> None:
    """``StorageRecord.last_use_op`` as the recorder sets it: the last op that read or returned the storage;
    a workspace's is the op it belongs to."""
    for s in log.storages:
        s.last_use_op = s.op_index if s.origin == Origin.WORKSPACE else -1
    storages = log.storages
    for op in log.ops:
        for sid in op.inputs:
            storages[sid].last_use_op = op.index
        for sid in op.outputs:
            storages[sid].last_use_op = op.index


__all__ = ["SynthesisError", "find_stack", "synthesize"]
