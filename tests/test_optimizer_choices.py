"""The optimizers users pick besides SGD/Adam(W): state bytes by hand on tiny-llama, and the cpu target
against the real CPU allocator.

tiny-llama (tests/configs/tiny-llama.json): embed_tokens and lm_head [1000, 64]; per layer q_proj/o_proj
[64, 64], k_proj/v_proj [32, 64], gate_proj/up_proj [128, 64], down_proj [64, 128], two RMSNorm [64];
final norm [64]. 202,048 parameters.
"""

import pytest
import torch

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.bnb_optimizers import EmulatedAdam8bit, state_bytes
from tests.conftest import CONFIGS

MODEL = str(CONFIGS / "tiny-llama.json")
F32 = 4
PARAM_BYTES = 202_048 * F32
MATRICES = [(1000, 64), (1000, 64)] + 2 * [(64, 64), (32, 64), (32, 64), (64, 64), (128, 64), (128, 64), (64, 128)]
VECTORS = 2 * 2 + 1  # RMSNorm weights of 64


def _cpu(optimizer, **kw):
    return analyze(MODEL, seq_len=32, batch_size=2, optimizer=optimizer, target="cpu", **kw)


def test_adafactor_state_is_factored():
    """torch.optim.Adafactor: row_var [R, 1] + col_var [1, C] per matrix, a full variance per vector
    (torch/optim/_adafactor.py Adafactor._init_group); its step count is a float32 host tensor per parameter
    (torch.tensor(0.0, dtype=_get_scalar_dtype())), the cpu target's memory: 21 parameters x 4 B."""
    expected = F32 * (sum(r + c for r, c in MATRICES) + VECTORS * 64)
    assert expected == 17_984  # against 1,616,384 B for AdamW's two full moments
    assert _cpu("adafactor").static["optimizer_state"] == expected + (len(MATRICES) + VECTORS) * 4


def test_lion_keeps_one_moment():
    assert _cpu("lion").static["optimizer_state"] == PARAM_BYTES  # exp_avg only


def test_sgd_nesterov_keeps_one_momentum_buffer():
    assert _cpu("sgd-nesterov").static["optimizer_state"] == PARAM_BYTES


def test_8bit_adam_state_of_one_parameter_by_hand():
    """gate_proj [128, 64] = 8192 elements >= min_8bit_size 4096: uint8 state1 + state2 (8192 B each) and
    float32 absmax1 + absmax2 of ceil(8192 / 256) = 32 blocks (128 B each, 512 B once the caching allocator
    rounds them). k_proj [32, 64] = 2048 < 4096 keeps two float32 states (8192 B each)."""
    assert state_bytes(128 * 64) == 2 * 8192 + 2 * 32 * 4
    assert state_bytes(32 * 64) == 2 * 2048 * 4
    r = analyze(MODEL, seq_len=32, batch_size=2, optimizer="adamw8bit", gpu="h100-80gb")
    rows = {m.module: m for m in r.modules}
    assert rows["model.layers.0.mlp.gate_proj"].optimizer_state_bytes == 2 * 8192 + 2 * 512
    assert rows["model.layers.0.self_attn.k_proj"].optimizer_state_bytes == 2 * 8192


def test_paged_state_stays_outside_the_allocator():
    """PagedAdamW8bit: state buffers of parameters of >= 1e5 elements come from cudaMallocManaged."""
    big, small = (torch.nn.Parameter(torch.empty(n, device="meta")) for n in (100_000, 99_999))
    opt = EmulatedAdam8bit([big, small], "paged-adamw8bit", lr=1e-3)
    for p in (big, small):
        p.grad = torch.empty_like(p)
    opt.step()
    assert opt.paged_bytes == 2 * 100_000  # two uint8 states of the big one
    assert opt.state[big]["state1"] is None and opt.state[small]["state1"].dtype == torch.uint8
    assert opt.state[big]["absmax1"].shape == (-(-100_000 // 256),)  # absmax stays a device tensor


def test_8bit_optimizers_need_the_cuda_target():
    with pytest.raises(MemgraphError, match="use --target cuda"):
        _cpu("adam8bit")


def test_no_fused_adafactor():
    with pytest.raises(MemgraphError, match="no fused implementation"):
        _cpu("adafactor", optimizer_impl="fused")


@pytest.mark.slow
@pytest.mark.parametrize("optimizer, impl", [("adafactor", "for-loop"), ("adafactor", "foreach"),
                                             ("lion", "for-loop"), ("sgd-nesterov", "foreach")])
def test_within_2_percent_of_the_cpu_allocator(optimizer, impl):
    """Tolerance 2%: the cpu target's bound (tests/test_cpu_ground_truth.py); the same step runs for real."""
    r = _cpu(optimizer, optimizer_impl=impl)
    measured = max(it["peak_allocated"] for it in measure(
        MODEL, device="cpu", seq_len=32, batch_size=2, optimizer=optimizer, optimizer_impl=impl)["iterations"][1:])
    assert abs(r.steady_state_peak.bytes - measured) <= 0.02 * measured, (r.steady_state_peak.bytes, measured)
    assert r.ops["unknown"] == {}
