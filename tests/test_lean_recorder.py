"""The recorder's fast paths (issue 17) record what the general ones did."""

from __future__ import annotations

import gc

import pytest
import torch

from memgraph.trace.record.recorder import Recorder, _out_tensors, _tensors, arg_tensors


def test_collector_paused_once_by_the_entry_points_and_restored():
    """collector.paused_gc: off inside, back on after (an error too); inside an open pause it does nothing; a
    collector the caller turned off stays off. trace_training is one of the entry points that take it."""
    from memgraph.collector import paused_gc
    from memgraph.model_spec.options import TrainingOptions
    from memgraph.trace import tracer

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        with paused_gc():  # nested: a no-op
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner exit did not turn it back on
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with paused_gc():
            raise RuntimeError("boom")
    assert gc.isenabled()  # restored on the way out of an error too
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()  # a collector the caller had turned off stays off
    finally:
        gc.enable()
    gc.freeze()  # as cli.py does after the imports: what was frozen stays frozen through a pause
    try:
        frozen = gc.get_freeze_count()
        with paused_gc():
            pass
        # not handed back by unfreeze() (0); a frozen object may still be freed by refcounting meanwhile (another
        # thread's, in a full run: the count fell by 2 once), so it can only fall
        assert 0 < gc.get_freeze_count() <= frozen and gc.isenabled()
    finally:
        gc.unfreeze()
    seen = []
    original = tracer._trace_all_layers
    tracer._trace_all_layers = lambda spec, opts, rank=0: seen.append(gc.isenabled()) or "trace"
    try:
        assert tracer.trace_training("spec", TrainingOptions(depth_synthesis="off")) == "trace"
    finally:
        tracer._trace_all_layers = original
    assert seen == [False] and gc.isenabled()


def test_argument_flattening_matches_the_general_walk():
    a, b, c, d = (torch.empty(i, device="meta") for i in range(1, 5))
    args = (a, 3, [b, None, (c,)], {"x": d}, "s")
    kwargs = {"out": c, "alpha": 2}
    expected = _tensors(kwargs, _tensors(args, []))
    assert [id(t) for t in arg_tensors(args, kwargs)] == [id(t) for t in expected] == [id(t) for t in (a, b, c, d, c)]
    assert [id(t) for t in _out_tensors(a)] == [id(a)]
    assert [id(t) for t in _out_tensors((a, [b]))] == [id(a), id(b)]


def test_record_counts_allocations_views_and_inputs():
    with Recorder() as rec:
        x = torch.empty(4, 8, device="meta")  # aten.empty: allocates
        y = x.t()  # a view: allocates nothing, reads x
        z = torch.mm(y, x)  # [8, 8] float32: 256 bytes
        del z
    ops = {o.op: o for o in rec.log.ops}
    assert len(ops["aten.empty.memory_format"].allocated) == 1
    assert ops["aten.t.default"].allocated == () and ops["aten.t.default"].outputs == ops["aten.t.default"].inputs
    mm = ops["aten.mm.default"]
    assert len(mm.allocated) == 1 and rec.log.storages[mm.allocated[0]].nbytes == 8 * 8 * 4
    assert rec.log.storages[mm.allocated[0]].free_event is not None  # freed by `del z`, by reference count
    assert y.shape == (8, 4)
