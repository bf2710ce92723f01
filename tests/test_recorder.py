"""The recorder: views allocate nothing, in-place ops allocate nothing, lifetimes are eager."""

import torch

from memgraph.trace.record.recorder import ALLOC, FREE, Recorder


def _run(fn):
    rec = Recorder()
    x = torch.empty(8, 8, device="meta")
    rec.register(x, "input", "x")
    with rec:
        fn(x)
    rec.close()
    return rec


def test_views_and_inplace_ops_allocate_nothing():
    def body(x):
        v = x.view(64).t() if x.dim() == 1 else x.view(64)
        v.mul_(2)
        x.transpose(0, 1).add_(1)

    rec = _run(body)
    assert [k for k, _ in rec.log.events] == [ALLOC]  # only the registered input
    assert len(rec.log.ops) == 4


def test_temporary_is_freed_when_its_last_reference_goes():
    kept = []

    def body(x):
        a = x * 2  # 256 B, dropped at the end of the function
        b = x + 1  # 256 B, kept by the caller
        kept.append(b)
        del a

    rec = _run(body)
    kinds = [(k, rec.log.storages[s].name) for k, s in rec.log.events]
    assert kinds == [(ALLOC, "x"), (ALLOC, "aten.mul.Tensor"), (ALLOC, "aten.add.Tensor"), (FREE, "aten.mul.Tensor")]
    assert rec.log.storages[2].nbytes == 8 * 8 * 4


def test_logits_held_by_the_loop_stay_alive_through_backward():
    # out = model(x); out.sum().backward(): `out` is referenced by the caller during backward.
    from memgraph.api import analyze

    r = analyze("tests.fixtures.nets:mlp", inputs=("x=float32[4,16]",), optimizer="sgd", target="cpu")
    names = {(t.name, t.phase) for t in r.steady_state_peak.top_tensors}
    assert ("aten.mm.default", "forward") in names  # the [4, 8] output, created in forward
    out = [t for t in r.steady_state_peak.top_tensors if t.phase == "forward" and t.shape == [4, 8]]
    assert out and out[0].held_past_last_use
