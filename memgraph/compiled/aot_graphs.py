"""AOTAutograd on meta for the cuda target: Dynamo's graph through AOTAutograd with Inductor's decomposition table and
PyTorch's partitioner (GraphStats.partition), under the trace's forward emulation (CUDA autocast, the target's SDPA
kernel: memgraph/trace/autocast_emulation.py, sdpa_kernels.py), so the casts and the attention kernel are nodes of the
graphs, as when Dynamo traces a real ``torch.autocast("cuda")``. With a compiler (inductor_cuda.InductorCudaCompiler)
Inductor's partition step and CUDA code make the graphs' buffers; without one each graph runs node by node on meta
(every node's output a buffer, freed after its last use: the unfused upper end).
"""

from __future__ import annotations

import contextlib

import torch
from functorch.compile import aot_module_simplified, make_boxed_func

from memgraph.compiled.graphs import GraphStats
from memgraph.compiled.inductor_cpu import no_compile_caches
from memgraph.errors import MemgraphError
from memgraph.private_api import (compile_internals, compile_log_text_skipped, composite_ops_decompose_on_meta,
                                  outputs_fakified_first)


# Dynamo's DDPOptimizer splits a DDP model's graph at DDP's buckets (the first 1 MiB of parameters, then 25 MiB each,
# torch 2.13 torch/_dynamo/backends/distributed.py) and compiles each piece with AOTAutograd returning the forward's
# output values on the first call; on the cuda target those are the fake CUDA tensors Inductor compiled for, which the
# meta trace cannot run on (a CPU build aborts on a CUDA device guard).
DDP_SPLIT_ON_CUDA = ("--compile --strategy ddp on the cuda target: Dynamo's DDPOptimizer splits this model's graph at "
                     "DDP's gradient buckets (more than 1 MiB of parameters), which memgraph models on the cpu target "
                     "only: use --target cpu, or drop --compile")


class GraphsOnMeta:
    def __init__(self, stats: GraphStats, budget: float | None, forward_context=None, compiler=None):
        self.stats, self.budget = stats, budget
        self.forward_context = forward_context  # zero-argument factory of the trace's forward emulation
        # the partitioned graphs' compilers: Inductor for CUDA (inductor_cuda.InductorCudaCompiler), else as is
        self.fw_compiler = compiler.forward if compiler is not None else _as_is
        self.bw_compiler = compiler.backward if compiler is not None else _as_is
        self.inference_compiler = compiler.inference if compiler is not None else _as_is
        self.inductor = compiler

    def context(self) -> contextlib.ExitStack:
        """The settings of every compile of the trace: the knapsack budget if set; with Inductor, one compile thread
        (no worker pool) and no on-disk caches (its code here has stub kernels), as the cpu target's; no log text."""
        api = compile_internals()
        stack = contextlib.ExitStack()
        stack.enter_context(compile_log_text_skipped())
        if self.budget is not None:
            stack.enter_context(api.functorch_config.patch(activation_memory_budget=self.budget))
        # A checkpointed region's random ops on a CUDA device: the partitioner's graph-safe RNG functionalization
        # (torch 2.13 torch/_functorch/partitioners.py apply_graphsafe_rng_functionalization) makes each pair's state
        # a clone of the CUDA generator, which a CPU build of torch does not have (torch.cuda.default_generators is
        # empty: IndexError). Off, the partitioner saves the state with run_and_save_rng_state and replays it with
        # run_with_rng_state, the route it takes on the CPU (memgraph/compiled/rng_state.py records both). Device
        # memory is the same: the graph-safe states are generators (seed and offset on the host), the saved state
        # of torch.cuda.get_rng_state is a 16-byte host tensor.
        stack.enter_context(api.functorch_config.patch(graphsafe_rng_functionalization=False))
        if self.inductor is not None:
            stack.enter_context(no_compile_caches())
            stack.enter_context(api.inductor_config.patch(compile_threads=1))
        return stack

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        emulation = self.forward_context() if self.forward_context is not None else contextlib.nullcontext()
        with emulation, composite_ops_decompose_on_meta():  # else nll_loss & co. get no gradient on meta
            # keep_inference_input_mutations: a graph without autograd (a compiled optimizer step) mutates its inputs
            # in the graph, as Inductor's compile_fx asks AOTAutograd to (torch 2.13 torch/_inductor/compile_fx.py),
            # so Inductor writes the state in place; without it each mutated input came back as a new buffer
            return aot_module_simplified(gm, example_inputs, fw_compiler=self.fw_compiler,
                                         bw_compiler=self.bw_compiler, inference_compiler=self._inference,
                                         partition_fn=self._partition, decompositions=compile_internals().decompositions(),
                                         keep_inference_input_mutations=True)

    def _inference(self, gm: torch.fx.GraphModule, example_inputs):
        """A graph without autograd (a compiled optimizer step): counted, then compiled as a forward."""
        self.stats.inference(gm)
        return self.inference_compiler(gm, example_inputs)

    def _partition(self, joint, joint_inputs, **kwargs):
        if self.inductor is not None:  # Inductor's joint-graph passes first (on the graph made CUDA), as its own
            if outputs_fakified_first():  # DDPOptimizer's subgraphs (compiled/strategies.py): their first call
                raise MemgraphError(DDP_SPLIT_ON_CUDA)  # returns the forward's CUDA output values (not modelled)
            return self.inductor.partition(joint, joint_inputs, self._partitioned, **kwargs)  # partition step does
        return self._partitioned(joint, joint_inputs, **kwargs)

    def _partitioned(self, joint, joint_inputs, **kwargs):
        return self.stats.partition(joint, joint_inputs, self.budget, **kwargs)


def _as_is(gm: torch.fx.GraphModule, _example_inputs):
    """The graph itself, called with a list of inputs (AOTAutograd's boxed calling convention)."""
    return make_boxed_func(gm.forward)

