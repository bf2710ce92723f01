"""The cyclic garbage collector paused where it only costs time: imports, tracing, analysis.

Python's cyclic collector runs automatically whenever allocations outnumber deallocations by the
generation-0 threshold (700 objects, ``gc.get_threshold()``), and every third, tenth, ... run walks
every tracked object alive. Importing torch and transformers creates hundreds of thousands of
long-lived objects (modules, functions, classes, op overloads), and a trace millions of small records
that all live to the end, so most of those walks find nothing to free. Measured on the development
machine (torch 2.13.0, transformers 5.23, Python 3.11; benchmarks/speed_report.py part 0, reports/speed.md):
the imports of a llama analysis (torch, transformers' modeling_llama, memgraph.api) take 3.60 CPU s with the
collector on and 2.96 CPU s with it paused.

Tensor lifetimes do not depend on it: storages are freed by reference counting (trace/record/recorder.py);
a storage kept alive only by a reference cycle would be freed at a time no program order decides,
with or without the pause (the golden tests check that the numbers are the same).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def paused_gc():
    """The cyclic garbage collector off (and what exists now frozen out of its reach) for a block.

    Taken once, at the entry points: ``memgraph`` on the command line (cli.py ``run``, from the start), and the
    Python API's analyses (api.py ``analyze_spec``), sweeps (sweep.py) and ``fit`` (fit/), and the trace itself
    (trace/tracer.py ``trace_training``) for callers that start there. Inside an open pause it does nothing,
    so the entry points nest freely. Lifetimes of tensors do not depend on it: storages are freed by reference
    counting (trace/record/recorder.py)."""
    if not gc.isenabled():  # already paused by an outer entry point
        yield
        return
    # what a caller froze (cli.py, after the imports) stays frozen: unfreeze() would hand it all back
    freeze = gc.get_freeze_count() == 0
    gc.disable()
    if freeze:
        gc.freeze()
    try:
        yield
    finally:
        if freeze:
            gc.unfreeze()
        gc.enable()
