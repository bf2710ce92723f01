"""--compile on the cuda target runs AOTAutograd on meta tensors (memgraph/compiled/aot_graphs.py). torch registers
Python Meta kernels for ops that decompose (CompositeImplicitAutograd: aten::nll_loss and 108 others); under the Python
dispatcher AOTAutograd traces with, those sent the ops on meta to autograd's not-implemented fallback, which gives
them no gradient, so a compiled loss had no backward (private_api.composite_ops_decompose_on_meta). These tests
fail without it: the gradient of the logits was None, and GPT-2, whose loss Dynamo compiles as a graph of its own
after a graph break, stopped with "its loss does not depend on any trainable parameter"."""

import pytest
import torch
import torch.nn.functional as F

from memgraph.api import analyze
from memgraph.compiled.aot_graphs import GraphsOnMeta
from memgraph.compiled.graphs import GraphStats

V = 1000  # classes


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend=GraphsOnMeta(GraphStats(), None))


def test_a_compiled_cross_entropy_gives_its_input_a_gradient_on_meta():
    logits = torch.empty(2, 16, V, device="meta", requires_grad=True)
    labels = torch.empty(2, 16, dtype=torch.long, device="meta")
    loss = _compiled(lambda x, y: F.cross_entropy(x.view(-1, V), y.reshape(-1)))(logits, labels)
    loss.backward()
    assert logits.grad is not None and logits.grad.shape == (2, 16, V)


@pytest.mark.slow  # about 5 CPU s; test_compile_by_hand.py::test_graph_break_is_named_with_its_count checks the
# graph-break path (two graphs, the Logger-method reason as one line) on a two-linear net in about 1 s
def test_gpt2_compiles_on_the_cuda_target():
    r = analyze("tests/configs/tiny-gpt2.json", seq_len=32, batch_size=1, compile=True)
    line = next(n for n in r.notes if n.startswith("compiled:"))
    assert "2 graphs, 2 graph breaks" in line  # the model, then its loss after transformers' logger call
    assert any(n.startswith("graph break (2x): logging.Logger method") for n in r.notes)
