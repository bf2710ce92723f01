"""A compiled optimizer step's state, lifted from the graph's attributes into its inputs.

Dynamo traces a compiled optimizer step (``torch.compile(opt.step)`` over the foreach or for-loop implementation)
with the optimizer's state as attributes of the graph (torch 2.13 torch/_dynamo/variables/optimizer.py
``OptimizerVariable``: ``exp_avg`` and the like, static addresses), which AOTAutograd lifts into inputs itself
(aot_module_simplified: the module's parameters and buffers first). On meta those are meta tensors while memgraph's
cpu backend (inductor_cpu.py) compiles with fake CPU inputs; as placeholders they get fake inputs of the target
device like every other input, and the compiled code is called with the meta tensors themselves
(private_api ``compiled_optimizer`` guards the Dynamo sources this moves).
"""

from __future__ import annotations

import torch


def lift_tensor_attributes(gm: torch.fx.GraphModule) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """``gm`` with each tensor it reads through ``get_attr`` made a placeholder after its own (on a copy of the
    graph: Dynamo reads its own graph's placeholders after the backend returns), and those tensors."""
    if not _tensor_attributes(gm):
        return gm, []
    gm = _copy(gm)  # Dynamo reads its own graph's placeholders after the backend returns
    attrs = _tensor_attributes(gm)  # the copy's nodes
    last = list(gm.graph.find_nodes(op="placeholder"))[-1:]
    values = []
    for node in attrs:
        values.append(_attribute(gm, node.target))
        with gm.graph.inserting_after(last[0]) if last else gm.graph.inserting_before(next(iter(gm.graph.nodes))):
            placeholder = gm.graph.placeholder(f"lifted_{node.name}")
        placeholder.meta.update(node.meta)
        # the attribute's Dynamo source moves to the placeholder, as AOTAutograd reads one per input (torch 2.13
        # _aot_autograd/frontend_utils.py _try_get_metadata_from_dynamo), and the attribute leaves the module
        placeholder._dynamo_source = getattr(gm, "_param_name_to_source", {}).pop(node.target, None)
        _drop_attribute(gm, node.target)
        node.replace_all_uses_with(placeholder)
        gm.graph.erase_node(node)
        last = [placeholder]
    gm.recompile()
    return gm, values


def _tensor_attributes(gm: torch.fx.GraphModule) -> list[torch.fx.Node]:
    """``gm``'s ``get_attr`` nodes that read a tensor."""
    return [n for n in gm.graph.nodes if n.op == "get_attr" and isinstance(_attribute(gm, n.target), torch.Tensor)]


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    """A new GraphModule over a copy of ``gm``'s graph (nodes' meta shallow-copied, Dynamo's sources of the
    placeholders and of the attributes kept), its attributes the same objects."""
    graph, nodes = torch.fx.Graph(), {}
    graph.output(graph.graph_copy(gm.graph, nodes))
    for old, new in nodes.items():
        if hasattr(old, "_dynamo_source"):
            new._dynamo_source = old._dynamo_source
    out = torch.fx.GraphModule(gm, graph)
    out.meta = dict(gm.meta)
    if hasattr(gm, "_param_name_to_source"):
        out._param_name_to_source = dict(gm._param_name_to_source)
    return out


def _drop_attribute(gm: torch.fx.GraphModule, target: str) -> None:
    owner, _, name = target.rpartition(".")
    module = gm.get_submodule(owner) if owner else gm
    for table in (module._parameters, module._buffers):
        table.pop(name, None)
    module.__dict__.pop(name, None)


def _attribute(gm: torch.fx.GraphModule, target: str):
    value = gm
    for part in target.split("."):
        value = getattr(value, part, None)
    return value


class WithLifted:
    """What Dynamo calls in place of a compiled graph whose tensor attributes were lifted: ``compiled`` called with
    the lifted tensors after the graph's own inputs."""

    def __init__(self, compiled, lifted: list[torch.Tensor]):
        self._compiled, self._lifted = compiled, lifted

    def __call__(self, *args):
        return self._compiled(*args, *self._lifted)
