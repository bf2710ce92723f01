"""Per-modality totals: parameters, gradients, optimizer state, saved activations, bytes at the peak.

Every storage is attributed to a module (parameters: their owner; gradients and optimizer
state: their parameter's owner; activations and temporaries: the module running when they
were made), and a module to its modality group (:mod:`memgraph.analysis.modality`). Rows add
up to the totals: storages made outside every module (the loss, optimizer temporaries, the
inputs) form the ``shared`` group.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..annotate.categories import Category
from .modality import SHARED


@dataclass
class ModalityRow:
    modality: str
    parameters: int  # elements
    trainable_parameters: int
    parameter_bytes: int
    gradient_bytes: int  # one iteration's gradients
    optimizer_state_bytes: int
    saved_activation_bytes: int  # saved for backward in forward, one iteration
    peak_bytes: int  # alive at the steady-state peak


def modality_rows(storages, sizes, cats, alive: set[int], modalities: dict[str, str],
                  trainable: set[int], last_iteration: int, itemsize) -> list[ModalityRow]:
    fields = ("parameters", "trainable_parameters", "parameter_bytes", "gradient_bytes",
              "optimizer_state_bytes", "saved_activation_bytes", "peak_bytes")
    rows: dict[str, dict[str, int]] = defaultdict(lambda: dict.fromkeys(fields, 0))
    for sid, s in enumerate(storages):
        row = rows[modalities.get(s.module, SHARED)]
        cat, size = cats[sid], sizes[sid]
        if cat == Category.PARAMETER:
            numel = s.nbytes // max(itemsize(s.dtype), 1)
            row["parameters"] += numel
            row["parameter_bytes"] += size
            row["trainable_parameters"] += numel if sid in trainable else 0
        elif cat == Category.GRADIENT and s.iteration == last_iteration:
            row["gradient_bytes"] += size
        elif cat == Category.OPTIMIZER_STATE and s.free_event is None:
            row["optimizer_state_bytes"] += size
        if s.saved_for_backward and s.phase == "forward" and s.iteration == last_iteration:
            row["saved_activation_bytes"] += size
        if sid in alive:
            row["peak_bytes"] += size
    return [ModalityRow(modality=m, **v) for m, v in sorted(rows.items(), key=lambda kv: (kv[0] == SHARED, kv[0]))]
