"""Issue 13's per-architecture fixes: balanced routing values by hand, and tiny transformers architectures within
1% of the real CPU step (slow: each builds, measures and analyses one architecture, 5-15 s)."""

import pytest
import torch

from memgraph.trace.shadow_values import ShadowValues, balanced_routing


def test_balanced_routing_by_hand():
    # 5 tokens choosing k=2 of E=4 experts: token t -> (2t, 2t+1) mod 4
    v = balanced_routing((5, 4), dim=1, k=2)
    assert v.tolist() == [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1]]
    assert torch.bincount(v.flatten(), minlength=4).tolist() == [3, 3, 2, 2]  # balanced within one token
    # argmax over the expert dimension of [1, 6, 4] logits, keepdim False: t mod 4
    assert balanced_routing((1, 6, 4), dim=2, k=1, keepdim=False).tolist() == [[0, 1, 2, 3, 0, 1]]


def test_router_topk_gets_values_and_a_note():
    shadows = ShadowValues()
    logits = torch.empty(5, 4, device="meta")
    with shadows:
        _, idx = logits.topk(2, dim=1)
        counts = torch.zeros(5, 4, device="meta").scatter(1, idx, 1).long().sum(0).tolist()  # JetMoE's expert_size
    assert counts == [3, 3, 2, 2]
    assert shadows.routed == 1 and "balanced" in shadows.assumption_notes()[0]


def test_valueless_bool_read_is_guessed_and_counted():
    shadows = ShadowValues()
    x = torch.empty(3, device="meta")
    with shadows:
        assert bool(x.min() > -1e-5)  # I-BERT's activation-range test: no value on meta
    assert shadows.guessed == 1


@pytest.mark.slow
@pytest.mark.parametrize("task,model_type", [
    ("causal-lm", "jetmoe"),  # routing values: expert_size.tolist()
    ("masked-lm", "ibert"),  # guessed bool reads
    ("image-classification", "focalnet"),  # NC11 pointwise strides (was +20.7%)
])
def test_tiny_architecture_within_one_percent(task, model_type):
    """Measured for real on the CPU allocator and analysed for the cpu target; 1%: the sweep's tolerance (the
    remaining error on dense models is allocator rounding of a few bytes)."""
    from memgraph.coverage import architectures, run_one

    (row,) = [run_one(*a) for a in architectures([task], model_type)]
    assert row.runs_for_real and row.analyzes, row.reason
    assert abs(row.error_pct) <= 1.0, row
