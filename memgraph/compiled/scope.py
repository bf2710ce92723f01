"""What ``--compile`` compiles besides the model: the loss (``--compile-loss``) and the optimizer step
(``--compile-optimizer``), as the training frameworks write it.

- torchtune (github pytorch/torchtune, torchtune/training/_compile.py ``compile_loss``): with ``compile: True`` its
  recipes compile the model's layers and the loss module; for its chunked cross-entropy (``--loss chunked-ce``) only
  ``compute_cross_entropy``, one chunk's upcast and cross-entropy (model_spec/losses.py chunk_cross_entropy), not the
  chunking;
- torchtitan (github pytorch/torchtitan, torchtitan/components/loss.py ``build_cross_entropy_loss``): with compile on,
  ``torch.compile(loss_fn)``, the whole loss function;
- PyTorch's compiled optimizer recipe (docs "(beta) Compiling the optimizer with torch.compile"):
  ``torch.compile(opt.step)``.
- The Hugging Face Trainer (``torch_compile``) compiles the model only; a transformers model computes its loss from
  its labels inside the compiled forward already, so ``--compile-loss`` changes nothing there.
"""

from __future__ import annotations

from typing import Callable

from memgraph.errors import MemgraphError

# The optimizer implementations whose compiled step memgraph models. Dynamo (torch 2.13) does not trace the fused
# kernels (its graph break: "Skip calling `torch.compiler.disable()`d function _fused_adam"): the step breaks there
# and the fused kernel runs eagerly, as in the real compiled step (tiny-llama, AdamW, cpu target: 3,274,652 B predicted and
# measured). The foreach and for-loop steps are traced by Dynamo into a graph whose optimizer state is lifted into it
# as attributes (Dynamo's OptimizerVariable): on meta those stay meta tensors while the backend compiles with fake
# CPU or CUDA ones (FakeTensorDeviceMismatchError on the cpu target, "Cannot copy out of meta tensor" on the cuda
# target): not modelled yet.
COMPILED_OPTIMIZER_IMPLS = ("fused", "none")


def compile_scope(step, compile_fn: Callable) -> None:
    """``step``'s loss function and optimizer ``step`` replaced by ``compile_fn(fn)`` where the options say so."""
    opts = step.options
    if opts.compile_optimizer and step.optimizer_impl not in COMPILED_OPTIMIZER_IMPLS:
        raise MemgraphError(f"--compile-optimizer with the {step.optimizer_impl} optimizer implementation is not "
                            "modelled (Dynamo lifts its state into the graph, memgraph/compiled/scope.py): pass "
                            "--optimizer-impl fused, or drop --compile-optimizer")
    if opts.compile_loss:
        parts = getattr(step.compute_loss, "parts", None)  # --loss chunked-ce: torchtune compiles the chunk's CE only
        if parts:
            parts["cross_entropy"] = compile_fn(parts["cross_entropy"])
        else:
            step.compute_loss = compile_fn(step.compute_loss)
    if opts.compile_optimizer and step.optimizer is not None:
        step.optimizer.step = compile_fn(step.optimizer.step)
