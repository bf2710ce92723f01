"""What the partitioner decided, per compiled graph: bytes saved for backward, eager and compiled.

AOTAutograd hands the partitioner the joint forward+backward graph. The tensors saved for backward are the
backward graph's placeholders that are not tangents (each with ``meta["val"]``, a fake tensor). The eager figure
is the same joint graph split by ``default_partition``, which saves what eager autograd saves (PyTorch 2.13,
torch/_functorch/partitioners.py: it keeps every forward value the backward reads); the compiled figure is the
split actually used, ``min_cut_rematerialization_partition`` (recomputes cheap ops instead of saving them).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
from functorch.compile import default_partition, min_cut_rematerialization_partition


def _meta_to(value, device: torch.device):
    """``value`` (an FX node's args or kwargs) with every ``meta`` device in it made ``device``."""
    if (isinstance(value, torch.device) and value.type == "meta") or value == "meta":
        return device
    if isinstance(value, (tuple, list)):
        return type(value)(_meta_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _meta_to(v, device) for k, v in value.items()}
    return value


def graph_on(gm: torch.fx.GraphModule, device: torch.device) -> torch.fx.GraphModule:
    """``gm`` with every ``device="meta"`` argument made ``device`` (``torch.arange(..., device=x.device)`` and the
    like, traced on meta): Inductor compiles it for that device."""
    for node in gm.graph.nodes:
        node.args, node.kwargs = _meta_to(node.args, device), _meta_to(node.kwargs, device)
    gm.recompile()
    return gm


def generated_call(call):
    """The ``call`` of the Python module Inductor generated, from the callable its compiled graph runs: Inductor
    wraps it where an input it mutates must be checked for alignment (torch 2.13 torch/_inductor/utils.py
    ``align_inputs_from_check_idxs``: a closure over the module's ``call`` as ``model``), as in a compiled
    optimizer step; the module's globals are what memgraph swaps to run it on meta."""
    while call.__globals__.get("__name__", "").startswith("torch.") and "model" in call.__code__.co_freevars:
        call = call.__closure__[call.__code__.co_freevars.index("model")].cell_contents
    return call


def tensor_bytes(value) -> int:
    """Bytes of a (fake) tensor's elements (a symbolic size by its hint); 0 for anything else (SymInts, None)."""
    if not isinstance(value, torch.Tensor):
        return 0
    n = value.numel() * value.element_size()
    if isinstance(n, torch.SymInt):  # the generator state a checkpointed region saves (compiled/rng_state.py) is
        from torch.fx.experimental.symbolic_shapes import optimization_hint  # sized by its real one (in __all__)

        return optimization_hint(n)
    return n


def saved_bytes(backward: torch.fx.GraphModule, joint: torch.fx.GraphModule) -> int:
    """Bytes of the activations the backward graph reads from forward: its placeholders that are not tangents,
    less those that are (views of) the graph's inputs (``primals_*``: parameters and batch, alive anyway); a
    saved view of an activation counts its base once."""
    nodes = {n.name: n for n in joint.graph.nodes}
    roots = {}
    for p in backward.graph.nodes:
        if p.op != "placeholder" or p.name.startswith("tangents") or p.name not in nodes:
            continue
        root = _view_root(nodes[p.name])
        if root.op != "placeholder":
            roots[root.name] = tensor_bytes(root.meta.get("val"))
    return sum(roots.values())


def _view_root(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose storage ``node`` shares, through view ops (``OpOverload.is_view``)."""
    while (node.op == "call_function" and getattr(node.target, "is_view", False) and node.args
           and isinstance(node.args[0], torch.fx.Node)):
        node = node.args[0]
    return node


def output_bytes(graph: torch.fx.GraphModule) -> int:
    """Bytes of every op node's tensor outputs: what the graph allocates if each node is its own buffer
    (views count, as their base is counted once more: an upper figure)."""
    total = 0
    for n in graph.graph.nodes:
        if n.op == "call_function":
            val = n.meta.get("val")
            for v in val if isinstance(val, (tuple, list)) else (val,):
                total += tensor_bytes(v)
    return total


@dataclass
class Partition:
    """One compiled graph: bytes saved for backward by each partitioner, node counts, unfused bytes."""

    call: int  # which call of the compiled model compiled it
    eager_saved: int  # default_partition
    compiled_saved: int  # the partition used
    forward_nodes: int
    backward_nodes: int
    unfused_bytes: int  # forward + backward node outputs, each node a buffer


@dataclass
class GraphStats:
    """The graphs the backend compiled in one trace."""

    call: int = 0  # calls of the compiled model so far (the caller counts)
    partitions: list[Partition] = field(default_factory=list)

    def step(self) -> list[Partition]:
        """The graphs of one step: those compiled by the last call that compiled any (Dynamo recompiles the same
        graphs when a guard fails; the first iteration's serve the later ones, private_api
        dynamo_guards_see_dispatch_modes)."""
        if not self.partitions:
            return []
        last = self.partitions[-1].call
        return [p for p in self.partitions if p.call == last]

    def total(self, name: str) -> int:
        return sum(getattr(p, name) for p in self.step())

    def partition(self, joint: torch.fx.GraphModule, joint_inputs, budget: float | None, **kwargs):
        """Partition ``joint`` as PyTorch's min-cut partitioner does (its knapsack variant when ``budget`` is set,
        through ``torch._functorch.config.activation_memory_budget``, set by the caller) and count both splits."""
        kwargs.pop("compiler", None)
        _, eager_bw = default_partition(joint, joint_inputs, **kwargs)  # reads the joint graph, builds new ones
        eager = saved_bytes(eager_bw, joint)
        fw, bw = min_cut_rematerialization_partition(joint, joint_inputs, compiler="inductor", **kwargs)
        self.partitions.append(Partition(self.call, eager, saved_bytes(bw, joint), _op_nodes(fw), _op_nodes(bw),
                                         output_bytes(fw) + output_bytes(bw)))
        return fw, bw

    def inference(self, graph: torch.fx.GraphModule) -> None:
        """Count a graph compiled without autograd (a compiled optimizer step): nothing saved for a backward."""
        self.partitions.append(Partition(self.call, 0, 0, _op_nodes(graph), 0, output_bytes(graph)))


def _op_nodes(g: torch.fx.GraphModule) -> int:
    return sum(1 for n in g.graph.nodes if n.op == "call_function")



def unfused_peak(graph: torch.fx.GraphModule) -> int:
    """The most bytes ``graph``'s own values hold at once when each op node is its own buffer (the graph run node by
    node, as FX codegen runs it: a value is freed after its last use, a view keeps its base alive, the outputs stay).
    The graph's inputs are not counted."""
    nodes = list(graph.graph.nodes)
    order = {n: i for i, n in enumerate(nodes)}
    end = len(nodes)
    roots, last = {}, {}
    for n in nodes:
        if n.op != "call_function":
            continue
        root = n
        while root.op == "call_function" and (root.target is operator.getitem or getattr(root.target, "is_view", False)) \
                and root.args and isinstance(root.args[0], torch.fx.Node):
            root = root.args[0]  # a view, or one output of a multi-output node (counted with the node)
        if root.op != "call_function":
            continue  # a view of an input: no storage of the graph's own
        roots[n] = root
        if root is n:
            last.setdefault(n, order[n])
    for n in nodes:
        for user in n.users:
            if n in roots:
                root = roots[n]
                last[root] = max(last.get(root, order[root]), end if user.op == "output" else order[user])
    sizes = {root: sum(tensor_bytes(v) for v in (root.meta.get("val") if isinstance(root.meta.get("val"), (tuple, list))
                                                  else (root.meta.get("val"),)))
             for root in last}
    delta = [0] * (end + 2)
    for root, stop in last.items():
        delta[order[root]] += sizes[root]
        delta[stop + 1] -= sizes[root]
    live = peak = 0
    for d in delta:
        live += d
        peak = max(peak, live)
    return peak
