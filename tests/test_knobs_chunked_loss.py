"""--loss chunked-ce: torchtune's CEWithChunkedOutputLoss on tiny-llama (vocab 1000, hidden 64), batch 2 x 64
tokens = 128 positions, bf16. The logits bytes are computed by hand from shapes; the cpu target is compared with
the real CPU allocator running the same step."""

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.losses import NUM_OUTPUT_CHUNKS
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from memgraph.trace.tracer import trace_training
from tests.conftest import CONFIGS

LLAMA = str(CONFIGS / "tiny-llama.json")
B, S, V = 2, 64, 1000
BF16, FP32 = 2, 4
CHUNK_ROWS = B * S // NUM_OUTPUT_CHUNKS  # tensor_split(8, dim=1): 8 positions x 2 samples = 16 rows


def _logits(loss: str):
    """Iteration 2's forward storages with the vocabulary as last dimension: (op, shape, bytes, alloc, free)."""
    trace = trace_training(resolve(LLAMA), TrainingOptions(target="cpu", seq_len=S, batch_size=B, precision="bf16",
                                                           loss=loss))
    return [(s.name, s.shape, s.nbytes, s.alloc_event, s.free_event) for s in trace.log.storages
            if s.iteration == 2 and s.phase == "forward" and s.shape and s.shape[-1] == V and s.nbytes]


def test_unchunked_head_makes_whole_logits_and_their_float32_copy():
    """transformers' head: lm_head [128, 1000] bf16 = 256,000 B, ForCausalLMLoss's logits.float() [2, 64, 1000]
    fp32 = 512,000 B, and log_softmax's float32 output (saved for backward) 512,000 B."""
    rows = _logits("auto")
    assert [(op, nbytes) for op, _, nbytes, _, _ in rows] == [
        ("aten.mm.default", B * S * V * BF16), ("aten._to_copy.default", B * S * V * FP32),
        ("aten._log_softmax.default", B * S * V * FP32)]


def test_chunked_head_upcasts_one_chunk_at_a_time():
    """Eight lm_head chunks [16, 1000] bf16 = 32,000 B each (256,000 B together, all kept, as torchtune's list),
    eight float32 copies of 64,000 B that never overlap (each freed before the next is made), and eight saved
    log_softmax outputs of 64,000 B."""
    rows = _logits("chunked-ce")
    mm = [nbytes for op, _, nbytes, _, _ in rows if op == "aten.mm.default"]
    assert mm == [CHUNK_ROWS * V * BF16] * NUM_OUTPUT_CHUNKS and sum(mm) == B * S * V * BF16 == 256_000
    copies = [(alloc, free) for op, shape, nbytes, alloc, free in rows
              if op == "aten._to_copy.default" and nbytes == CHUNK_ROWS * V * FP32 == 64_000]
    assert len(copies) == NUM_OUTPUT_CHUNKS
    assert all(free < next_alloc for (_, free), (next_alloc, _) in zip(copies, copies[1:]))
    saved = [nbytes for op, _, nbytes, _, _ in rows if op == "aten._log_softmax.default"]
    assert saved == [64_000] * NUM_OUTPUT_CHUNKS


def test_chunked_ce_is_refused_for_other_tasks():
    with pytest.raises(MemgraphError, match="drop --loss"):
        analyze(str(CONFIGS / "tiny-bert.json"), target="cpu", loss="chunked-ce", seq_len=16)


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_chunked_ce_within_2_percent_of_the_cpu_allocator(precision):
    """Tolerance 2%: the cpu target's bound (tests/test_cpu_ground_truth.py); measured exact (0 B apart) when
    written, after the engine's out-of-place sum of the eight lm_head weight gradients (trace/emulate/inplace_grad_sum.py)."""
    kw = dict(seq_len=S, batch_size=B, precision=precision, loss="chunked-ce")
    predicted = analyze(LLAMA, target="cpu", **kw).steady_state_peak.bytes
    measured = max(it["peak_allocated"] for it in measure(LLAMA, device="cpu", **kw)["iterations"][1:])
    assert abs(predicted - measured) <= 0.02 * measured, (predicted, measured)
