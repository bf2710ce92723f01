"""``--compile``: the memory of a ``torch.compile``d training step, from the graphs PyTorch itself makes.

The route (README "Compiled training steps"): the model is wrapped in ``torch.compile`` with a memgraph backend
and the training step runs on ``meta`` under the recorder, as an eager trace does. Dynamo captures the model's
graphs (graph breaks run eagerly between them, named in the report), AOTAutograd traces the joint forward and
backward and PyTorch's partitioner (``min_cut_rematerialization_partition``; the knapsack variant with
``--activation-memory-budget``) splits it; what the compiled graphs allocate and save is what the recorder sees
when they run:

* cpu target: Inductor's C++ backend compiles each graph for the CPU (fake CPU tensors; its fusion, buffer reuse
  and partitioner as in a real CPU run) and its generated wrapper runs on meta: every buffer it allocates is a
  meta tensor, the C++ kernels are stubs (memgraph/compiled/inductor_cpu.py). Exact against the real compiled
  step on the CPU (tests/test_compile_ground_truth.py);
* cuda target: AOTAutograd on meta, then Inductor's partition step and its CUDA lowering, fusion and buffer reuse
  on fake CUDA tensors (Triton kernels generated, never compiled), its wrapper run on meta
  (memgraph/compiled/inductor_cuda.py); no fusion at all is the upper end, a bounded unknown.

The eager parts (the loss unless inside the model, the optimizer step, zero_grad, the loop) are traced as today.
"""

from memgraph.compiled.step import CompiledStep, compile_for_real, compile_step_for_real

__all__ = ["CompiledStep", "compile_for_real", "compile_step_for_real"]
