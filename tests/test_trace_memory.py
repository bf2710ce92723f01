"""What a trace keeps is its event log, nothing per layer besides (deep models: issue on hostile input).

Python memory held by a finished trace, per recorded op, measured with tracemalloc: an OpRecord with its
three tuples (about 200 B), on average 0.4 StorageRecords with their shapes (about 100 B an op) and 0.8
alloc/free events (about 60 B an op), so about 480 B an op. With the torch.fx graph the recorder used to
build besides, the same trace kept 1,926 B an op (measured on the previous recorder), and a 1,000-layer
model needed 2 GB.
"""

import gc
import json
import tracemalloc

import pytest

from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.trace.tracer import trace_training
from tests.conftest import CONFIGS

BYTES_PER_OP_BOUND = 800  # the log's records (~480 B an op) and slack for the interpreter's own caches


@pytest.mark.slow  # tracemalloc slows the trace about threefold
def test_a_trace_keeps_about_its_event_log_per_op(tmp_path):
    config = json.loads((CONFIGS / "tiny-llama.json").read_text())
    config["num_hidden_layers"] = 4
    (tmp_path / "deep.json").write_text(json.dumps(config))
    spec = resolve(str(tmp_path / "deep.json"))
    opts = TrainingOptions(seq_len=32, target="cpu", optimizer="sgd")
    trace_training(spec, opts)  # warm up: first-use caches (op names, kernels) are not the trace's
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        trace = trace_training(spec, opts)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    print(f"{kept / len(trace.log.ops):.0f} B an op over {len(trace.log.ops)} ops")
    assert kept / len(trace.log.ops) < BYTES_PER_OP_BOUND
