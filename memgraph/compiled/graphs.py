"""What the partitioner decided, per compiled graph: bytes saved for backward, eager and compiled.

AOTAutograd hands the partitioner the joint forward+backward graph. The tensors saved for backward are the
backward graph's placeholders that are not tangents (each with ``meta["val"]``, a fake tensor). The eager figure
is the same joint graph split by ``default_partition``, which saves what eager autograd saves (PyTorch 2.13,
torch/_functorch/partitioners.py: it keeps every forward value the backward reads); the compiled figure is the
split actually used, ``min_cut_rematerialization_partition`` (recomputes cheap ops instead of saving them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from functorch.compile import default_partition, min_cut_rematerialization_partition


def tensor_bytes(value) -> int:
    """Bytes of a (fake) tensor's elements; 0 for anything else (SymInts, None)."""
    if not isinstance(value, torch.Tensor):
        return 0
    return value.numel() * value.element_size()


def saved_bytes(backward: torch.fx.GraphModule) -> int:
    """Bytes the backward graph reads from forward: its non-tangent placeholders."""
    return sum(tensor_bytes(n.meta.get("val")) for n in backward.graph.nodes
               if n.op == "placeholder" and not n.name.startswith("tangents"))


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
class GraphStats:
    """Totals over every graph the backend compiled in one trace."""

    graphs: int = 0
    forward_nodes: int = 0
    backward_nodes: int = 0
    eager_saved: int = 0  # default_partition
    compiled_saved: int = 0  # the partition used
    unfused_bytes: int = 0  # forward + backward node outputs, each node a buffer
    partitions: list[tuple[int, int]] = field(default_factory=list)  # (eager, compiled) saved bytes per graph

    def partition(self, joint: torch.fx.GraphModule, joint_inputs, budget: float | None, **kwargs):
        """Partition ``joint`` as PyTorch's min-cut partitioner does (its knapsack variant when ``budget`` is set,
        through ``torch._functorch.config.activation_memory_budget``, set by the caller) and count both splits."""
        kwargs.pop("compiler", None)
        eager_fw, eager_bw = default_partition(joint, joint_inputs, **kwargs)  # reads the joint graph, builds new ones
        fw, bw = min_cut_rematerialization_partition(joint, joint_inputs, compiler="inductor", **kwargs)
        eager, compiled = saved_bytes(eager_bw), saved_bytes(bw)
        self.eager_saved += eager
        self.compiled_saved += compiled
        self.partitions.append((eager, compiled))
        self.forward_nodes += _op_nodes(fw)
        self.backward_nodes += _op_nodes(bw)
        self.unfused_bytes += output_bytes(fw) + output_bytes(bw)
        return fw, bw


def _op_nodes(g: torch.fx.GraphModule) -> int:
    return sum(1 for n in g.graph.nodes if n.op == "call_function")

