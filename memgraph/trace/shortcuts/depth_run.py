"""``--depth-synthesis auto``: trace a deep model at a few small depths, synthesize the full depth, verify.

:func:`trace_with_depth_synthesis` wraps a full-trace function. For a model of ``n`` layers with
``n > BASE_DEPTH + 1`` whose config changes depth by one field (:mod:`memgraph.model_spec.depth`), it traces
``BASE_DEPTH`` and ``BASE_DEPTH + 1`` layers, synthesizes ``BASE_DEPTH + 1`` layers from the shallower trace
(:func:`memgraph.trace.shortcuts.depth.synthesize`) and compares it with the real one field by field; only when they are
equal does it synthesize ``n`` layers. The trace's other fields follow the depth as a trace's do: parameter
counts by one layer's parameters per layer; typed notes (:class:`memgraph.notes.Note`) by their per-layer
counts (SDPA calls, autocast casts: what one more copy of the repeated layer adds, the same rule the verified
synthesis of the log follows); everything else equal at both depths. A plain-``str`` note that differs between
the two depths (a producer not yet typed) is read as text: its numbers are checked affine in the depth on a
third trace (``BASE_DEPTH - 1`` layers) and moved along that line (:func:`_extrapolate_notes`). Anything else,
or any error, falls back to the full trace with one note saying why: the speed-up never changes a number.
With ``--checkpoint-every K`` (layers 0, K, 2K, ... checkpointed) every depth above counts blocks of K layers
(:func:`layer_period`; memgraph/trace/shortcuts/depth.py "Blocks"): traced at 3K and 4K layers (2K for notes).

Inside :func:`shared_notes_trace` (a batch sweep, memgraph/sweep.py, one per sequence length; a whole
``memgraph fit``, memgraph/fit/__init__.py) the
``BASE_DEPTH - 1``-layer trace, whose only use is its notes, is traced once per pair of notes at ``BASE_DEPTH``
and ``BASE_DEPTH + 1`` layers; notes that passed the affinity check are reused by every later size with the
same pair of strings. The notes at full depth are a function of the three lists of notes alone, and notes
that pass the check with a given pair have their text and every number fixed by that pair (each number on the
line through its two values). So a reused list gives the notes this size's own shallow trace gives, unless that
trace's notes would fail the check (a separate analysis then falls back to the full trace; the sweep does not):
the one case where a sweep and a separate analysis can differ, which tests/test_sweep.py's comparison of every
size would show.
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from memgraph.model_spec.depth import model_depth, with_depth
from memgraph.notes import Note
from memgraph.trace.shortcuts.depth import SynthesisError, Layers, find_stack, synthesize
from memgraph.trace.record.event_log import Origin
from memgraph.trace.shortcuts.checks import first_difference

BASE_DEPTH = 3  # traced depths 3 and 4 (and 2 for plain-str notes that differ); layer 1 is repeated
# synthesis only where it traces fewer layers than the model has: at most 2 + 3 + 4 = 9 are traced
MIN_DEPTH = (BASE_DEPTH - 1) + BASE_DEPTH + (BASE_DEPTH + 1) + 1
# DeepSpeed is traced at full depth without trying: its ZeRO-2/3 logs do not repeat per layer. The engine flattens
# every layer's weights into one flat group (bit16_groups_flat, stage 2) or partitions them (stage 3), and fills its
# reduce buckets (reduce_bucket_size elements: hidden_size² under "auto") across layer boundaries, so a bucket's
# flush falls at another place in each layer (llama-3-8b: 218,112,000 elements a layer, 13.0005 buckets of 4096²).
# Measured on tiny-llama at 12 layers, zero2.json and zero3.json over 8 ranks (the notes' rounded buffer sizes
# aside): the synthesis of 4 layers from 3 differs from the 4-layer trace (stage 2: its iteration bounds; stage 3:
# a storage freed before its allocation in the copied layer), so the attempt always ended in the full trace.
DEEPSPEED_WHY = "DeepSpeed's flat parameter groups and reduce buckets span the layers, so no layer's events repeat"
_SAME_AT_EVERY_DEPTH = ("batch", "optimizer_impl", "unknowns", "assumptions")
# inside shared_notes_trace(): (notes at BASE_DEPTH, at BASE_DEPTH + 1) -> notes at BASE_DEPTH - 1 layers
_NOTES_BELOW: ContextVar[dict | None] = ContextVar("memgraph_notes_below", default=None)


@contextmanager
def shared_notes_trace():
    """Within this block, traces of one model under options that differ only in the batch size share their
    ``BASE_DEPTH - 1``-layer notes trace (module docstring); the block is a sweep of batch sizes."""
    token = _NOTES_BELOW.set({})
    try:
        yield
    finally:
        _NOTES_BELOW.reset(token)


def layer_period(opts) -> int:
    """How many consecutive layers make the unit depth synthesis repeats: ``--checkpoint-every K`` checkpoints
    layers 0, K, 2K, ... (memgraph/model_spec/checkpointing.py), so the step repeats every K layers; else 1."""
    return opts.checkpoint_every if opts.gradient_checkpointing and opts.checkpoint_every > 1 else 1


def trace_with_depth_synthesis(spec, opts, trace_at):
    """The trace of ``spec`` under ``opts``: ``trace_at(spec)`` (a full trace), or a verified synthesis."""
    if opts.depth_synthesis == "off":
        return trace_at(spec)
    if opts.compile:  # one compiled graph spans every layer: its ops are not attributed to layers, and the traces at
        trace = trace_at(spec)  # smaller depths were made only to be set aside (their unknowns differ)
        trace.notes.append("depth synthesis: not used (--compile: the compiled graphs span all layers); "
                           "all layers traced")
        return trace
    depth, why = model_depth(spec)
    if opts.deepspeed is not None and depth is not None and depth >= MIN_DEPTH:
        trace = trace_at(spec)  # no 2-, 3- and 4-layer traces made only to be set aside: see DEEPSPEED_WHY
        trace.notes.append(f"depth synthesis: not used ({DEEPSPEED_WHY}); all {depth} layers traced")
        return trace
    period = layer_period(opts)
    if depth is not None and period > 1 and depth % period:
        trace = trace_at(spec)
        trace.notes.append(f"depth synthesis: not used ({depth} layers are not whole periods of "
                           f"--checkpoint-every {period}); all layers traced")
        return trace
    if depth is None or depth < MIN_DEPTH * period:
        trace = trace_at(spec)
        if depth is None and _stacked_layers(spec) >= MIN_DEPTH:
            trace.notes.append(f"depth synthesis: not used ({why}); all layers traced")
        return trace
    start = time.perf_counter()
    try:
        trace, traced = _synthesized(spec, trace_at, depth, period)
    except Exception as e:  # noqa: BLE001 - any failure of the shortcut is a fallback, never a wrong number
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        trace = trace_at(spec)
        trace.notes.append(f"depth synthesis: not used ({reason[:200]}); all {depth} layers traced")
        return trace
    trace.seconds = time.perf_counter() - start
    b, m = BASE_DEPTH * period, BASE_DEPTH // 2 * period
    repeated = f"layer {m}" if period == 1 else \
        f"layers {m} to {m + period - 1} (one period of --checkpoint-every {period})"
    trace.notes.append(f"depth synthesis: traced {', '.join(map(str, traced[:-1]))} and {traced[-1]} of {depth} "
                       f"layers; {repeated} repeated to {depth} layers (verified: the synthesis of "
                       f"{b + period} layers from the {b}-layer trace equals the {b + period}-layer "
                       "trace, storage by storage and event by event)")
    return trace


def _stacked_layers(spec) -> int:
    """The largest layer count a config names (sub-configs included): whether a fallback is worth a note."""
    config = getattr(spec, "config", None)
    if config is None:
        return 0
    found = [v for k, v in config.to_dict().items() if "layers" in str(k) and isinstance(v, int)]
    found += [v for sub in config.to_dict().values() if isinstance(sub, dict)
              for k, v in sub.items() if "layers" in str(k) and isinstance(v, int)]
    return max(found, default=0)


def _synthesized(spec, trace_at, depth: int, period: int = 1):
    """Depths here count blocks of ``period`` layers (memgraph/trace/shortcuts/depth.py "Blocks")."""
    b = BASE_DEPTH
    shallow = {d: trace_at(with_depth(spec, d * period)) for d in (b, b + 1)}
    stack = find_stack({d * period: [s.name for s in t.log.storages if s.origin == Origin.PARAMETER]
                        for d, t in shallow.items()})
    for name in _SAME_AT_EVERY_DEPTH:
        if getattr(shallow[b], name) != getattr(shallow[b + 1], name):
            raise SynthesisError(f"the trace's {name} changes with the depth")
    traced = [b, b + 1]
    notes_from = {d: t.notes for d, t in shallow.items()}
    if _text_differs(shallow[b].notes, shallow[b + 1].notes):  # numbers in words: checked on a third depth
        shared, key = _NOTES_BELOW.get(), (tuple(shallow[b].notes), tuple(shallow[b + 1].notes))
        if shared is not None and key in shared:  # a sweep: an earlier size's, verified with these same strings
            notes_from[b - 1] = list(shared[key])
        else:
            notes_from[b - 1] = trace_at(with_depth(spec, (b - 1) * period)).notes
        traced.insert(0, b - 1)
        if _extrapolate_notes(notes_from, b - 1, b, b + 1) != notes_from[b + 1]:
            raise SynthesisError("numbers in the trace's notes are not affine in the depth")
        if shared is not None:  # only notes that passed the check are shared
            shared[key] = tuple(notes_from[b - 1])
    check = _synthesize_trace(shallow, stack, b, b + 1, notes_from, period)
    difference = first_difference(check, shallow[b + 1])
    if difference:
        raise SynthesisError(f"the synthesis of {(b + 1) * period} layers differs from their trace: {difference}")
    return _synthesize_trace(shallow, stack, b, depth // period, notes_from, period), [d * period for d in traced]


def _synthesize_trace(shallow: dict, stack: str, b: int, depth: int, notes_from: dict, period: int = 1):
    base, next_ = shallow[b], shallow[b + 1]
    flat_bounds = [p for bound in base.iteration_bounds for p in bound]
    log, marks, trainable = synthesize(base.log, stack, b, depth, flat_bounds, base.trainable_sids, period)
    per_layer = lambda name: getattr(base, name) + (depth - b) * (getattr(next_, name) - getattr(base, name))
    lo, hi = min(notes_from), max(notes_from)
    return replace(
        base, log=log, iteration_bounds=list(zip(marks[::2], marks[1::2])), trainable_sids=trainable,
        parameter_count=per_layer("parameter_count"), trainable_parameter_count=per_layer("trainable_parameter_count"),
        notes=_extrapolate_notes(notes_from, lo, hi, depth),
        modalities=_modalities(base.modalities, stack, b, depth, period),
        unknowns=list(base.unknowns), assumptions=list(base.assumptions), batch=list(base.batch))


_NUMBER = re.compile(r"(\d{1,3}(?:,\d{3})+|\d+)")  # an integer, with thousands commas or without


def _text_differs(a: list[str], b: list[str]) -> bool:
    """Whether two depths' notes differ other than in typed notes (whose counts need no third trace)."""
    return len(a) != len(b) or any(x != y and not (isinstance(x, Note) and isinstance(y, Note)) for x, y in zip(a, b))


def _extrapolate_notes(notes: dict, lo: int, hi: int, depth: int) -> list[str]:
    """The notes at ``depth``: a typed note's per-layer counts moved along the line through the traces at ``lo``
    and ``hi`` layers (:meth:`Note.at_depth`); in a plain-str note, each number that differs between them moved
    along that line (SDPA call counts: calls per layer times layers)."""
    if len(notes[lo]) != len(notes[hi]):
        raise SynthesisError("the trace's notes change with the depth")
    out = []
    for a, b in zip(notes[lo], notes[hi]):
        if isinstance(a, Note) or isinstance(b, Note):
            if not (isinstance(a, Note) and isinstance(b, Note)):
                raise SynthesisError("the trace's notes change with the depth")
            try:
                out.append(a.at_depth(b, lo, hi, depth))
            except ValueError as e:
                raise SynthesisError(str(e)) from None
            continue
        pa, pb = _NUMBER.split(a), _NUMBER.split(b)  # "32,768" is one number
        if len(pa) != len(pb) or pa[::2] != pb[::2]:
            raise SynthesisError("the trace's notes change with the depth")
        for i in range(1, len(pa), 2):
            va, vb = int(pa[i].replace(",", "")), int(pb[i].replace(",", ""))
            if va != vb:
                slope, rest = divmod(vb - va, hi - lo)
                if rest:
                    raise SynthesisError("a number in the trace's notes is not affine in the depth")
                value = va + slope * (depth - lo)
                pa[i] = f"{value:,}" if "," in pa[i] + pb[i] else str(value)
        out.append("".join(pa))
    return out


def _modalities(modalities: dict[str, str], stack: str, b: int, depth: int, period: int = 1) -> dict[str, str]:
    """Module path -> modality group at ``depth``: the paths of layer (block) ``b // 2`` once per copy, later
    ones renumbered, in ``named_modules`` order."""
    layers, m, k = Layers(stack, period), b // 2, depth - b
    out = {}
    items = list(modalities.items())
    i = 0
    while i < len(items):
        label = layers.of(items[i][0])
        if label != m:
            shift = 0 if label is None or label < m else k
            out[_shift(layers, items[i][0], shift)] = items[i][1]
            i += 1
            continue
        j = i
        while j < len(items) and layers.of(items[j][0]) == m:
            j += 1
        for copy in range(k + 1):
            out.update((_shift(layers, path, copy), group) for path, group in items[i:j])
        i = j
    return out


def _shift(layers: Layers, path: str, shift: int) -> str:
    if not shift or layers.stack not in path:
        return path
    return layers.renumber(path, lambda block: block + shift)


__all__ = ["BASE_DEPTH", "shared_notes_trace", "trace_with_depth_synthesis"]
