"""The recorder's fast paths (issue 17) record what the general ones did."""

from __future__ import annotations

import gc

import pytest
import torch

from memgraph.trace.record.recorder import Recorder, _arg_tensors, _out_tensors, _tensors


def test_gc_paused_while_recording_and_restored():
    assert gc.isenabled()
    with Recorder():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        with Recorder():
            raise RuntimeError("boom")
    assert gc.isenabled()  # restored on the way out of an error too
    gc.disable()
    try:
        with Recorder():
            pass
        assert not gc.isenabled()  # a collector the caller had turned off stays off
    finally:
        gc.enable()


def test_argument_flattening_matches_the_general_walk():
    a, b, c, d = (torch.empty(i, device="meta") for i in range(1, 5))
    args = (a, 3, [b, None, (c,)], {"x": d}, "s")
    kwargs = {"out": c, "alpha": 2}
    expected = _tensors(kwargs, _tensors(args, []))
    assert [id(t) for t in _arg_tensors(args, kwargs)] == [id(t) for t in expected] == [id(t) for t in (a, b, c, d, c)]
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
