"""Graph-break notes: Dynamo's multi-line reason as one readable line (memgraph/compiled/graph_breaks.py)."""

from memgraph.compiled.graph_breaks import CONTEXT_CHARS, one_line

# The reason torch 2.13.0's Dynamo gave for tiny GPT-2's graph break (transformers 5.23 logs a warning in the
# forward), copied from torch._dynamo.utils.counters["graph_break"] after `analyze tiny-gpt2.json --compile`.
CONTEXT = ("method: <Logger transformers.modeling_utils (ERROR)>.warning_once, args: [ConstantVariable(str: "
           "'`loss_type=None` was set in the config but it is unrecognized. Using the default loss: "
           "`ForCausalLMLoss`.')], kwargs: {}")
GPT2_REASON = (
    "logging.Logger method not supported for non-export cases\n"
    "  Explanation: logging.Logger methods are not supported for non-export cases.\n"
    "  Hint: Add the logging method to `torch._dynamo.config.ignore_logging_functions`.\n\n"
    f"  Developer debug context: {CONTEXT}\n\n"
    " For more details about this graph break, please visit: "
    "https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0291.html")


def test_reason_is_one_line_with_summary_hint_context_and_url():
    line = one_line(GPT2_REASON)
    assert "\n" not in line
    assert line == ("logging.Logger method not supported for non-export cases"
                    "; hint: Add the logging method to `torch._dynamo.config.ignore_logging_functions`"
                    f"; context: {CONTEXT[:CONTEXT_CHARS]}..."
                    "; https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0291.html")
    assert len(CONTEXT) > CONTEXT_CHARS  # 217 characters: cut at 160


def test_single_line_reason_unchanged():
    assert one_line("call_function UserDefinedObjectVariable") == "call_function UserDefinedObjectVariable"
