"""The peak of a small MLP, computed by hand byte for byte.

Model: x[B, D0] -> Linear(D0, D1, bias=False) -> ReLU -> Linear(D1, D2, bias=False), loss = out.sum(),
fp32 (4 bytes), B, D0, D1, D2 = 4, 16, 32, 8 (tests/fixtures/nets.py).
"""

import pytest

from memgraph.api import analyze, measure
from tests.fixtures.nets import B, D0, D1, D2

F32 = 4
MLP = "tests.fixtures.nets:mlp"
X = f"x=float32[{B},{D0}]"

W1 = D1 * D0 * F32  # 2048: first weight, and its gradient
W2 = D2 * D1 * F32  # 1024
PARAMS = W1 + W2  # 3072
INPUT = B * D0 * F32  # 256
OUT = B * D2 * F32  # 128: model output, alive until the iteration ends (the loop holds it)
LOSS = F32  # out.sum()
SEED = F32  # ones_like(loss): held by torch.autograd.backward's grad_tensors_ until backward returns
RELU_GRAD = B * D1 * F32  # 512: threshold_backward's output, the gradient flowing into layer 1

# Backward peak: when layer 1's weight gradient is made, alive are the parameters, the input, the
# output, the loss, the seed, W2's gradient, the gradient into layer 1 and W1's new gradient.
# (ReLU's saved output and the gradient into ReLU were freed by then.)
SGD_PEAK = PARAMS + INPUT + OUT + LOSS + SEED + W2 + RELU_GRAD + W1
assert SGD_PEAK == 7048


def _round512(n: int) -> int:  # c10 CUDACachingAllocator kMinBlockSize
    return -(-n // 512) * 512


def test_sgd_peak_cpu_target_by_hand():
    r = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu")
    assert r.steady_state_peak.bytes == SGD_PEAK
    assert r.steady_state_peak.phase == "backward"
    assert r.steady_state_peak.module == "0"  # the first Linear of the Sequential
    assert r.steady_state_peak.by_category["gradients"] == W1 + W2
    assert r.steady_state_peak.by_category["parameters"] == PARAMS


# cuBLAS keeps a 32 MiB workspace (sm90, H100) and a 1 MiB cuBLASLt workspace per thread that ran a
# GEMM: the forward thread and autograd's backward thread (CublasHandlePool.cpp).
CUBLAS_WORKSPACES = 2 * (32 * 2**20 + 1 * 2**20)


def test_sgd_peak_cuda_target_rounds_every_block_to_512_bytes():
    r = analyze(MLP, inputs=(X,), optimizer="sgd", target="cuda", gpu="h100-80gb")
    parts = (PARAMS, INPUT, OUT, LOSS, SEED, W2, RELU_GRAD, W1)
    tensors = _round512(W1) + _round512(W2) + sum(_round512(p) for p in parts[1:])
    # 2048 + 1024 + 512 (input) + 512 (out) + 512 (loss) + 512 (seed) + 1024 + 512 + 2048 = 8704
    assert tensors == 8704
    assert r.steady_state_peak.bytes == tensors + CUBLAS_WORKSPACES
    assert r.steady_state_peak.by_category["workspaces"] == CUBLAS_WORKSPACES


def test_sgd_momentum_steady_state_adds_one_buffer_per_parameter():
    # iteration 1 creates the momentum buffers (clone of the gradients); from iteration 2 on they
    # are alive during backward, so the backward peak grows by exactly the parameter bytes.
    r = analyze(MLP, inputs=(X,), optimizer="sgd-momentum", target="cpu")
    assert r.steady_state_peak.bytes == SGD_PEAK + PARAMS
    assert r.steady_state_peak.by_category["optimizer_state"] == PARAMS


@pytest.mark.slow
@pytest.mark.parametrize("loop,expected", [("plain", SGD_PEAK), ("trainer", SGD_PEAK - OUT)])
def test_cpu_measurement_agrees_with_the_hand_computation(loop, expected):
    """The real CPU allocator, to the byte (no tolerance: c10's CPU allocator reports requested sizes)."""
    m = measure(MLP, device="cpu", inputs=(X,), optimizer="sgd", target="cpu", loop=loop)
    assert m["iterations"][1]["peak_allocated"] == expected


def test_peak_of_each_phase_by_hand():
    """SGD, cpu target: each phase's highest point, by hand.

    forward: ReLU's output is made while the first Linear's output is still referenced by the Sequential
    loop: params + input + h1 (512) + relu(h1) (512, saved for backward) = 4352.
    backward: the step peak (SGD_PEAK). optimizer: plain SGD updates in place and allocates nothing, so its
    peak is what it starts with: params + input + out + loss + both gradients = 6532 (the seed is gone);
    zero_grad starts from the same bytes and only frees.
    """
    r = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu")
    peaks = {p.phase: p for p in r.phase_peaks}
    assert list(peaks) == ["forward", "backward", "optimizer", "zero_grad"]
    assert peaks["forward"].bytes == PARAMS + INPUT + 2 * RELU_GRAD == 4352
    assert peaks["forward"].by_category["activations"] == B * D1 * F32
    assert (peaks["forward"].module, peaks["forward"].op) == ("1", "aten.relu.default")
    assert peaks["backward"].bytes == SGD_PEAK
    assert peaks["optimizer"].bytes == peaks["zero_grad"].bytes == PARAMS + INPUT + OUT + LOSS + W1 + W2 == 6532
    assert peaks["optimizer"].module == "" and peaks["optimizer"].by_category["gradients"] == W1 + W2
    assert all(sum(p.by_category.values()) == p.bytes for p in r.phase_peaks)


def test_trainer_loop_drops_the_outputs_before_backward():
    """--loop trainer (Hugging Face Trainer): compute_loss returns only the loss, so the model output
    (128 B; sum's backward does not save its input) is freed before backward: the peak loses OUT."""
    r = analyze(MLP, inputs=(X,), optimizer="sgd", target="cpu", loop="trainer")
    assert r.steady_state_peak.bytes == SGD_PEAK - OUT == 6920
