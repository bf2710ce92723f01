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
    """The cuda target partitions the same joint graph (Inductor's decompositions) without Inductor's fusion."""
    r = analyze(MLP, inputs=("x=float32[4,16]",), optimizer="sgd", target="cuda", compile=True)
    assert _saved(r.notes) == (EAGER_SAVED, COMPILED_SAVED) == (1536, 1024)
    assert "1 graph, 0 graph breaks" in r.notes[[n.startswith("compiled:") for n in r.notes].index(True)]
    assert any(u["name"].startswith("Inductor's CUDA fusion") for u in r.unknowns)


def test_reduce_overhead_is_refused_in_one_line():
    from memgraph.errors import MemgraphError

    with pytest.raises(MemgraphError, match="reduce-overhead: CUDA graphs keep their own memory pool"):
        analyze(MLP, inputs=("x=float32[4,16]",), compile=True, compile_mode="reduce-overhead")
    with pytest.raises(MemgraphError, match="--activation-memory-budget is a torch.compile option"):
        analyze(MLP, inputs=("x=float32[4,16]",), activation_memory_budget=0.5)
