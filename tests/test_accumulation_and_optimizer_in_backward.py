"""--grad-accum and --optimizer-in-backward: peaks by hand on the MLP of tests/test_mlp_by_hand.py, and the cpu
target against the real CPU allocator on tiny-llama.

MLP: x[4, 16] -> Linear(16, 32) -> ReLU -> Linear(32, 8), loss = out.sum(), fp32, SGD (its for-loop step is
in place: no temporaries). Plain SGD peaks in backward when layer 1's weight gradient is made:
PARAMS + INPUT + OUT + LOSS + SEED + W2 + RELU_GRAD + W1 = 7048 (tests/test_mlp_by_hand.py).
"""

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from tests.conftest import CONFIGS
from tests.test_mlp_by_hand import MLP, SGD_PEAK, W1, W2, X


def _peak(**kw):
    return analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu", **kw).steady_state_peak


def test_grad_accum_adds_the_new_gradient_beside_the_accumulated_one():
    """Micro-steps 2..4: W1's and W2's .grad from the earlier micro-steps stay, and layer 1's new weight
    gradient (W1 bytes) is made before AccumulateGrad adds it in place and frees it. The loss is divided by 4
    (a new 4-byte scalar; the undivided one is freed), so the rest is as in plain SGD."""
    peak = _peak(grad_accum=4)
    assert peak.bytes == SGD_PEAK + W1 == 9096
    assert peak.phase == "backward"


def test_optimizer_in_backward_frees_each_gradient_after_its_step():
    """Layer 2's gradient is stepped and dropped (its post-accumulate-grad hook) before layer 1's is made:
    the plain peak less W2."""
    peak = _peak(optimizer_in_backward=True)
    assert peak.bytes == SGD_PEAK - W2 == 6024
    assert peak.by_category["gradients"] == W1


def test_grad_accum_with_optimizer_in_backward_is_refused():
    with pytest.raises(MemgraphError, match="drop --grad-accum"):
        TrainingOptions(grad_accum=2, optimizer_in_backward=True)


LLAMA = str(CONFIGS / "tiny-llama.json")


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(grad_accum=4), dict(grad_accum=4, loop="trainer"),
                                dict(optimizer_in_backward=True),
                                dict(optimizer_in_backward=True, batch_size=1, seq_len=8),
                                dict(grad_accum=2, lora_rank=4, optimizer="adafactor")])
def test_within_2_percent_of_the_cpu_allocator(kw):
    """Tolerance 2%: the cpu target's bound (tests/test_cpu_ground_truth.py); the same step runs for real."""
    kw = {"seq_len": 32, "batch_size": 2, **kw}
    r = analyze(LLAMA, target="cpu", **kw)
    measured = max(it["peak_allocated"] for it in measure(LLAMA, device="cpu", **kw)["iterations"][1:])
    assert abs(r.steady_state_peak.bytes - measured) <= 0.02 * measured, (r.steady_state_peak.bytes, measured)
