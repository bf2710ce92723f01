"""Reused meta-kernel outputs (memgraph/trace/record/op_cache.py): the same trace with and without the cache."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.trace.record import op_cache
from memgraph.trace.record.op_cache import OpCache
from memgraph.trace.tracer import trace_training
from tests.conftest import CONFIGS

aten = torch.ops.aten


def _trace(monkeypatch, off: bool, config: str, **options):
    monkeypatch.setenv("MEMGRAPH_NO_OP_CACHE", "1" if off else "")
    return trace_training(resolve(str(CONFIGS / config)), TrainingOptions(**options))


def _fields(trace) -> dict:
    log = trace.log
    return {"storages": [dataclasses.astuple(s) for s in log.storages], "events": log.events,
            "ops": [dataclasses.astuple(o) for o in log.ops], "phase_marks": log.phase_marks, "notes": trace.notes,
            "unknowns": trace.unknowns}


@pytest.mark.parametrize("config, options", [
    ("tiny-llama.json", {"seq_len": 32, "depth_synthesis": "off"}),  # cpu target, fp32, AdamW
    ("tiny-gpt2.json", {"seq_len": 32, "target": "cuda", "gpu": "h100-80gb", "precision": "bf16-mixed"}),
])
def test_event_log_equal_with_and_without_the_cache(monkeypatch, config, options):
    """Every storage (bytes, dtype, shape, origin, module, op, free event, last use, role), every event and op
    record, the notes and unknowns: equal field by field with the cache off, filling and answering."""
    op_cache.clear()
    off = _fields(_trace(monkeypatch, True, config, **options))
    assert op_cache.stats() == {"hits": 0, "misses": 0, "bypassed": 0}  # off: the mode is not entered
    filling = _fields(_trace(monkeypatch, False, config, **options))
    first = op_cache.stats()
    answering = _fields(_trace(monkeypatch, False, config, **options))
    second = op_cache.stats()
    for name in off:
        assert filling[name] == off[name], name
        assert answering[name] == off[name], name
    # two iterations of two layers repeat most ops already in the first trace; the second trace misses none
    assert first["hits"] > first["misses"] > 0
    assert second["misses"] == first["misses"]
    assert second["hits"] > first["hits"]


def test_repeat_gets_fresh_outputs_of_the_same_metadata():
    """native_layer_norm (a Python meta kernel, three outputs): the repeat is answered from the cache with new
    tensors of the kernel's shapes, strides and dtypes, each of its own storage."""
    op_cache.clear()
    x = torch.empty(2, 3, 8, device="meta")
    w = torch.empty(8, device="meta")
    with OpCache():
        first = aten.native_layer_norm.default(x, [8], w, w, 1e-5)
        again = aten.native_layer_norm.default(x, [8], w, w, 1e-5)
    assert op_cache.stats() == {"hits": 1, "misses": 1, "bypassed": 0}
    assert type(again) is type(first) and len(again) == 3
    for a, b in zip(first, again):
        assert (a.shape, a.stride(), a.dtype, a.device) == (b.shape, b.stride(), b.dtype, b.device)
        assert a is not b and a.untyped_storage()._cdata != b.untyped_storage()._cdata
    assert tuple(again[1].shape) == (2, 3, 1)  # mean: the normalised dimension kept as 1
    assert again[0].stride() == (24, 8, 1)


def test_in_place_repeat_returns_self():
    op_cache.clear()
    x = torch.empty(4, 4, device="meta")
    y = torch.empty(4, 4, device="meta")
    with OpCache():
        assert aten.add_.Tensor(x, y) is x
        assert aten.add_.Tensor(y, x) is y  # same metadata: answered, and it is the new call's self
    assert op_cache.stats() == {"hits": 1, "misses": 1, "bypassed": 0}


def test_what_is_never_keyed():
    """Views (the output aliases the input), a host tensor argument, an op with no tensor and no device=meta,
    an unkeyable argument (a generator): run as is, each call counted as bypassed."""
    op_cache.clear()
    x = torch.empty(4, 4, device="meta")
    host = torch.ones(())
    with OpCache():
        v = aten.view.default(x, [16])
        aten.view.default(x, [16])
        aten.add.Tensor(x, host)  # a CPU 0-dim tensor: not a meta tensor
        aten.zeros.default([2], device="cpu")
        aten.bernoulli.default(x, generator=torch.Generator())
    assert v.untyped_storage()._cdata == x.untyped_storage()._cdata
    assert op_cache.stats() == {"hits": 0, "misses": 0, "bypassed": 5}


def test_outputs_not_made_by_empty_strided_are_never_reused():
    """A kernel output at a storage offset, in a storage larger than its strides need, or sharing an input's
    storage would not be the same memory from empty_strided: such a key is marked never cached."""
    x = torch.empty(10, device="meta")
    assert op_cache._fresh_entry(torch.empty(10, device="meta")[2:5], (x,), {}) is op_cache._NEVER
    assert op_cache._fresh_entry(torch.empty(10, device="meta")[:5], (x,), {}) is op_cache._NEVER  # 40 B, needs 20
    assert op_cache._fresh_entry(x.view(2, 5), (x,), {}) is op_cache._NEVER
    assert op_cache._fresh_entry(torch.empty(2, 5, device="meta"), (x,), {}) == ((2, 5), (5, 1), torch.float32)


def test_random_ops_on_meta_draw_nothing():
    """Why dropout is cached: on meta it leaves the CPU generator's state as it was (torch 2.13)."""
    state = torch.get_rng_state()
    aten.native_dropout.default(torch.empty(64, 64, device="meta"), 0.1, True)
    aten.bernoulli_.float(torch.empty(64, device="meta"), 0.5)
    assert torch.equal(state, torch.get_rng_state())


def test_environment_variable_turns_it_off(monkeypatch):
    monkeypatch.setenv("MEMGRAPH_NO_OP_CACHE", "1")
    assert not op_cache.cache_enabled()
    assert not isinstance(op_cache.op_cache(), OpCache)
    monkeypatch.setenv("MEMGRAPH_NO_OP_CACHE", "0")
    assert op_cache.cache_enabled()
    assert isinstance(op_cache.op_cache(), OpCache)
