"""Why the step needs what it needs: the peak's place in plain words, its largest consumers, and what the
change that saves most takes away.

The consumers are the storages alive at the steady-state peak (the same set the analysis reports,
``memgraph/analysis/peaks.py``), grouped so that one line is one thing a user can change: parameters,
gradients and optimizer state by category; activations and temporaries by the op that made them, their
dtype and shape, and the module path with layer numbers folded (``model.layers.*.self_attn``), so "32
layers' attention probabilities" is one line, not 32.
"""

from __future__ import annotations

import re
from collections import defaultdict

from memgraph.analysis.liveness import alive_after
from memgraph.facts.cuda_allocator import ALLOCATED_SIZE
from memgraph.fit.outcome import Outcome
from memgraph.trace.record.event_log import Category
from memgraph.units import human_bytes

WHOLE = {Category.PARAMETER: "the parameters", Category.GRADIENT: "the gradients",
         Category.OPTIMIZER_STATE: "the optimizer state", Category.BUFFER: "the buffers", Category.INPUT: "the inputs",
         Category.AUTOCAST_CACHE: "autocast's low-precision copies of the weights"}
KIND = {Category.ACTIVATION: "saved for backward", Category.TEMPORARY: "temporary", Category.WORKSPACE: "workspace"}
# aten ops (torch 2.13 names) in words; an op not here is named as it is
OP_WORDS = {
    "aten._log_softmax_backward_data": "the backward of the loss' log-softmax",
    "aten._log_softmax": "the loss' log-softmax",
    "aten.nll_loss_backward": "the backward of the loss",
    "aten._safe_softmax": "the attention probabilities (softmax of the scores)",
    "aten._softmax": "a softmax",
    "aten._softmax_backward_data": "the backward of a softmax",
    "aten.mm": "a matrix multiply", "aten.addmm": "a matrix multiply", "aten.bmm": "a batched matrix multiply",
    "aten.embedding_dense_backward": "the embedding's gradient",
}


def why_lines(o: Outcome, trace, vocab_size: int | None, count: int = 5) -> list[str]:
    """The peak in plain words and its ``count`` largest consumers, with their sizes."""
    peak = o.result.steady_state_peak
    op = _op_words(peak.op)
    where = f"in {peak.module}" if peak.module else "at the top level of the step (the loss or the optimizer)"
    lines = [f"the peak ({human_bytes(peak.bytes)} allocated) is in the {peak.phase} of iteration {peak.iteration}, "
             f"{where}, during {op}"]
    lines += [f"{human_bytes(b)}: {what}" for what, b in consumers(trace, peak.event, vocab_size)[:count]]
    return lines


def consumers(trace, event: int, vocab_size: int | None) -> list[tuple[str, int]]:
    """(what, bytes) of the storages alive after ``event``, grouped (see the module docstring), largest first."""
    log = trace.log
    groups: dict[tuple, list[int]] = defaultdict(list)
    for sid in alive_after(log.events, event):
        s = log.storages[sid]
        if s.category in WHOLE:
            key = (s.category,)
        else:
            key = (s.category, s.name.removesuffix(".default"), s.dtype, tuple(s.shape), re.sub(r"\.\d+(?=\.|$)", ".*", s.module))
        groups[key].append(ALLOCATED_SIZE["cuda"](s.nbytes))
    rows = [(_describe(k, len(sizes), vocab_size), sum(sizes)) for k, sizes in groups.items()]
    return sorted(rows, key=lambda r: -r[1])


def _describe(key: tuple, n: int, vocab_size: int | None) -> str:
    if len(key) == 1:
        return WHOLE[key[0]]
    category, op, dtype, shape, module = key
    kind = KIND.get(category, category.value)
    dims = "x".join(map(str, shape))
    if vocab_size and shape and shape[-1] == vocab_size:
        what = f"the {dtype} logits over the {vocab_size:,}-token vocabulary [{dims}] ({_op_words(op)})"
    elif op in ("aten._softmax", "aten._safe_softmax") and len(shape) == 4 and shape[-1] == shape[-2]:
        what = f"the attention probabilities (softmax of the [batch, heads, seq, seq] scores), {dtype} [{dims}]"
    else:
        what = f"{_op_words(op)}, {dtype} [{dims}]"
    place = f" in {module}" if module else ""
    return f"{what}{place}, {kind}" + (f", {n} of them" if n > 1 else "")


def _op_words(op: str) -> str:
    op = op.removesuffix(".default")
    return OP_WORDS.get(op, op or "no op")


def removal_line(yours: Outcome, best: Outcome | None) -> list[str]:
    """What the change that saves most takes away, by category at the peak (the analyses' own numbers)."""
    if best is None or best.device_total >= yours.device_total:
        return []
    before, after = yours.result.steady_state_peak.by_category, best.result.steady_state_peak.by_category
    diffs = sorted(((before.get(k, 0) - after.get(k, 0), k) for k in before), reverse=True)
    parts = [f"{k.replace('_', ' ')} -{human_bytes(d)}" for d, k in diffs if d > 0][:3]
    return [f"{best.label} saves most: {human_bytes(yours.device_total - best.device_total)} of the device total "
            f"({human_bytes(yours.device_total)} -> {human_bytes(best.device_total)})"
            + (f"; at its peak: {', '.join(parts)}" if parts else "")]
