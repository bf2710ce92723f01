"""--activation-offload (save_on_cpu(pin_memory=True)) on the MLP of tests/test_mlp_by_hand.py, and the cpu target
against the real CPU allocator on tiny-llama.

What autograd saves in the MLP (x[4, 16] -> mm(W1.t()) -> ReLU -> mm(W2.t()), x needs no grad): layer 1's mm
saves x (for W1's gradient) = 256 B; ReLU saves its output = 512 B; layer 2's mm saves its input, ReLU's output
again (a second pack, a second copy) = 512 B, and W2.t() (for the gradient into ReLU) = 1024 B. Four packs,
2304 B.
"""

import pytest

from memgraph.api import analyze, measure
from tests.conftest import CONFIGS
from tests.test_mlp_by_hand import INPUT, MLP, RELU_GRAD, W2, X, _round512

SAVED = INPUT + RELU_GRAD + RELU_GRAD + W2  # x, relu out (ReLU's), relu out (mm's), W2.t()
assert SAVED == 2304


def _run(target: str, offload: bool):
    kw = dict(gpu="h100-80gb") if target == "cuda" else {}
    return analyze(MLP, inputs=(X,), optimizer="sgd", target=target, activation_offload=offload, **kw)


def test_cuda_target_moves_the_saved_bytes_to_the_host():
    """The four packs leave the device (no saved activation at the peak) and are a host-memory note; backward
    unpacks x into a new device block (256 B -> 512 B, the allocator's minimum) while layer 1's weight gradient is
    made, so the device peak grows by that block."""
    plain, offloaded = _run("cuda", False), _run("cuda", True)
    note = next(n for n in offloaded.notes if n.startswith("--activation-offload"))
    assert "4 saved tensors" in note and f"peak {SAVED:,} B of host RAM" in note
    assert offloaded.steady_state_peak.by_category["activations"] == 0
    assert offloaded.steady_state_peak.bytes == plain.steady_state_peak.bytes + _round512(INPUT)


def test_cpu_target_counts_the_copies_in_the_one_allocator():
    """On the cpu target pack's copies are CPU allocations: at the peak all four (2304 B) are alive, as saved
    activations."""
    r = _run("cpu", True)
    assert r.steady_state_peak.by_category["activations"] == SAVED


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(), dict(precision="bf16", loop="plain"),
                                dict(gradient_checkpointing=True)])
def test_offload_within_2_percent_of_the_cpu_allocator(kw):
    """Tolerance 2%: the cpu target's bound (tests/test_cpu_ground_truth.py); the real run uses PyTorch's own
    save_on_cpu. Measured 0 B apart (fp32) and 84 B apart (bf16, plain loop) when written."""
    llama = str(CONFIGS / "tiny-llama.json")
    kw = {"seq_len": 64, "batch_size": 2, "activation_offload": True, **kw}
    predicted = analyze(llama, target="cpu", **kw).steady_state_peak.bytes
    measured = max(it["peak_allocated"] for it in measure(llama, device="cpu", **kw)["iterations"][1:])
    assert abs(predicted - measured) <= 0.02 * measured, (predicted, measured)
