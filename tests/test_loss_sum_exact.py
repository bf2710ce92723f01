"""--loss sum on tiny Llama equals the real CPU allocator, both iterations (issue: the steady state missed
5.8% in fp32 and 11.1% in bf16). ``logits.sum().backward()`` sends the LM head a zero-stride gradient
(``expand`` of a scalar); the CPU ``mm`` copies such an operand before its GEMM (``addmm_impl_cpu_``
``clone(Contiguous)``, memgraph/facts/ops/cpu_gemm.py), and a bf16 GEMM (oneDNN) takes scratch of its own."""

from pathlib import Path

import pytest
import torch

from memgraph.api import analyze_traced, measure
from memgraph.cpu_profiler import cpu_memory_events, memory_profile
from memgraph.facts.ops import cpu_gemm
from memgraph.model_spec.options import TrainingOptions

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")
# Within 0.01%, the cpu target's claim: the first iteration differs by 12 B (0.0004% here), the 0-dim
# temporaries of 4-12 B the real CPU run makes outside the dispatcher (memgraph/facts/ops/defaults.py).
TOLERANCE = 1e-4


def _kernel_bytes_above_output(op, *args) -> int:
    with memory_profile() as prof:
        out = op(*args)
    live = peak = 0
    for _, nbytes in cpu_memory_events(prof):
        live += nbytes
        peak = max(peak, live)
    del out
    return peak - live


def _gemm_cases(device: str):
    grad = torch.ones((), device=device).expand(4, 8)  # what out.sum().backward() sends back: strides (0, 0)
    weight, x = torch.randn(8, 16, device=device), torch.randn(4, 16, device=device)
    return [(torch.mm, (grad, weight), 4 * 8 * 4),  # grad_input: the [4, 8] fp32 grad copied, 128 B
            (torch.mm, (grad.t(), x), 8 * 4 * 4),  # grad_weight: its transpose, 128 B
            (torch.mm, (x, weight.t()), 0),  # a transposed contiguous operand is taken as is
            (torch.addmm, (torch.zeros(16, device=device), grad, weight), 4 * 8 * 4)]


def test_cpu_mm_copies_a_zero_stride_operand():
    for (op, args, by_hand), (_, meta, _) in zip(_gemm_cases("cpu"), _gemm_cases("meta")):
        predicted = (cpu_gemm.mm if op is torch.mm else cpu_gemm.addmm)(meta, {}, op(*meta))
        assert _kernel_bytes_above_output(op, *args) == by_hand
        assert sum(predicted) == by_hand


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_loss_sum_equals_the_cpu_allocator_both_iterations(precision):
    # b=2, s=32: the steady state peaks in the LM head's backward (main predicted 3,360,924 B fp32 and
    # 1,756,312 B bf16 against 3,567,772 and 1,976,216 measured: the two [64, 1000] grad copies were missing).
    opts = TrainingOptions(seq_len=32, batch_size=2, target="cpu", loss="sum", precision=precision)
    result, _ = analyze_traced(TINY, opts)
    record = measure(TINY, "cpu", opts)
    measured = [it["peak_allocated"] for it in record["iterations"][:2]]
    predicted = [result.first_iteration_peak.bytes, result.steady_state_peak.bytes]
    for p, m in zip(predicted, measured):
        assert abs(p - m) / m < TOLERANCE, (predicted, measured)
