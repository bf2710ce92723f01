"""--compile on a two-layer MLP whose partition is worked out by hand.

Model (tests/fixtures/compile_nets.py): x[B, D0] -> Linear(D0, D1, bias=False) -> h * sigmoid(h) ->
Linear(D1, D2, bias=False), loss = out.sum(), fp32, B, D0, D1, D2 = 4, 16, 32, 8.

Forward values, each [B, D1] float32 = 4 * 32 * 4 = 512 B: h = x @ W1^T, s = sigmoid(h), a = h * s.
Eager autograd saves (default_partition saves what the backward reads): sigmoid's output s (sigmoid_backward),
mul's inputs h and s, and the second matmul's input a (for W2's gradient): h, s, a = 1536 B (x, W1, W2 are the
graph's inputs, alive anyway, not counted).
PyTorch's min-cut partitioner keeps h and a and recomputes s = sigmoid(h) in backward (a pointwise op, cheaper
to recompute than to keep): 1024 B saved. a stays saved: recomputing it would need s, and a feeds a matmul.
"""

import re

import pytest

from memgraph.api import analyze
from tests.fixtures.compile_nets import B, D1

ACT = B * D1 * 4  # 512 B: h, s or a
EAGER_SAVED = 3 * ACT  # h, s, a = 1536
COMPILED_SAVED = 2 * ACT  # h, a = 1024; s recomputed
MLP = "tests.fixtures.compile_nets:silu_mlp"


def _saved(notes: list[str]) -> tuple[int, int]:
    line = next(n for n in notes if n.startswith("compiled:"))
    m = re.search(r"saved activations: eager [^(]*\(([\d,]+) B\), compiled [^(]*\(([\d,]+) B\)", line)
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


@pytest.mark.slow  # Inductor's C++ codegen and compiler: about 8 CPU s; the cuda target below checks the partition fast
def test_min_cut_recomputes_the_sigmoid_cpu_target():
    r = analyze(MLP, inputs=("x=float32[4,16]",), optimizer="sgd", target="cpu", compile=True)
    assert _saved(r.notes) == (EAGER_SAVED, COMPILED_SAVED) == (1536, 1024)
    assert "1 graph, 0 graph breaks" in r.notes[[n.startswith("compiled:") for n in r.notes].index(True)]


def test_min_cut_recomputes_the_sigmoid_cuda_target():
    """The cuda target partitions the same joint graph (Inductor's decompositions and joint-graph passes)."""
    r = analyze(MLP, inputs=("x=float32[4,16]",), optimizer="sgd", target="cuda", compile=True)
    assert _saved(r.notes) == (EAGER_SAVED, COMPILED_SAVED) == (1536, 1024)
    assert "1 graph, 0 graph breaks" in r.notes[[n.startswith("compiled:") for n in r.notes].index(True)]
    assert any(u["name"].startswith("Inductor's CUDA fusion") for u in r.unknowns)


def test_graph_break_is_named_with_its_count():
    """A Logger call between two linears (tests/fixtures/compile_nets.py logging_mlp), the graph break transformers'
    warning_once makes in tiny GPT-2 (test_compile_meta_gradients.py, --full): Dynamo compiles the first linear and
    the second as two graphs, one break, its reason on one line."""
    r = analyze("tests.fixtures.compile_nets:logging_mlp", inputs=("x=float32[4,16]",), optimizer="sgd",
                target="cuda", compile=True)
    assert "2 graphs, 1 graph breaks" in next(n for n in r.notes if n.startswith("compiled:"))
    breaks = [n for n in r.notes if n.startswith("graph break")]
    assert len(breaks) == 1 and breaks[0].startswith("graph break (1x): logging.Logger method not supported"), breaks
    assert "\n" not in breaks[0] and ".debug, args: [ConstantVariable(str: 'between the linears')]" in breaks[0]


def test_reduce_overhead_is_refused_in_one_line():
    from memgraph.errors import MemgraphError

    with pytest.raises(MemgraphError, match="reduce-overhead: CUDA graphs keep their own memory pool"):
        analyze(MLP, inputs=("x=float32[4,16]",), compile=True, compile_mode="reduce-overhead")
    with pytest.raises(MemgraphError, match="--activation-memory-budget is a torch.compile option"):
        analyze(MLP, inputs=("x=float32[4,16]",), activation_memory_budget=0.5)


# Inductor's CUDA code for the same step (memgraph/compiled/inductor_cuda.py), worked out by hand: 4 x 32 fp32 is
# 512 B, 4 x 8 is 128 B, W2's gradient [8, 32] 1024 B, W1's [32, 16] 2048 B.
# forward: buf0 = h (mm), buf1 = a = h * sigmoid(h) (one fused Triton kernel: s is never a buffer), buf2 = out
#   (mm): 512 + 512 + 128 = 1152 B, all three returned (h and a saved, out the output)
# backward: buf0 = dW2 = tangent^T @ a (1024), buf1 = da = tangent @ W2 (512), dh = da * (s + h s (1 - s)) with s
#   recomputed, in one fused kernel written into buf1 (Inductor's in-place reuse: "buf2 = buf1; del buf1  # reuse"),
#   buf3 = dW1 = dh^T @ x (2048): 1024 + 512 + 2048 = 3584 B
FUSED_FORWARD = 512 + 512 + 128  # 1152
FUSED_BACKWARD = 1024 + 512 + 2048  # 3584
# the forward graph run node by node (graphs.unfused_peak): h, s, a alive together at mul (s's last use):
# 3 x 512 = 1536 B; the backward's unfused peak exceeds its fused one by less (checked: the unknown names the forward)
UNFUSED_FORWARD = 3 * 512  # 1536


def test_inductor_cuda_buffers_by_hand():
    r = analyze(MLP, inputs=("x=float32[4,16]",), optimizer="sgd", target="cuda", compile=True)
    line = next(n for n in r.notes if n.startswith("compiled:"))
    assert "Inductor's CUDA code" in line
    per_step = FUSED_FORWARD + FUSED_BACKWARD  # 4736
    assert f"Inductor's code allocated 4.62 KiB ({per_step:,} B) per step (6 buffers)" in line, line
    fusion = next(u for u in r.unknowns if u["name"].startswith("Inductor's CUDA fusion"))
    assert (fusion["expected_bytes"], fusion["upper_bytes"]) == (FUSED_FORWARD, UNFUSED_FORWARD) == (1152, 1536)
    # steady-state peak: in the backward at dW1's allocation, every block rounded up to the caching allocator's
    # 512 B minimum (c10/cuda/CUDACachingAllocator.cpp kMinBlockSize): cuBLAS + cuBLASLt workspaces of the main
    # and autograd threads 2 x (32 MiB + 1 MiB) = 69,206,016; W1, W2 2048 + 1024; x 512; dW2, dW1 1024 + 2048;
    # out, loss, ones_like (the loss's gradient) and dh: 4 x 512; h and a are freed (the wrapper's del) before dW1
    workspaces = 2 * (32 * 2**20 + 2**20)
    assert r.steady_state_peak.bytes == workspaces + 3072 + 512 + 3072 + 4 * 512 == 69_214_720
