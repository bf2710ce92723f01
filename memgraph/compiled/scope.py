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

import contextlib
from typing import Callable

from memgraph.errors import MemgraphError
from memgraph.private_api import compile_internals, require

# The optimizers whose compiled step memgraph models: PyTorch's own, each implementation. Dynamo (torch 2.13) does
# not trace the fused kernels (its graph break: "Skip calling `torch.compiler.disable()`d function _fused_adam"): the
# step breaks there and the fused kernel runs eagerly, as in the real compiled step. The foreach and for-loop steps
# are traced by Dynamo into one graph, the optimizer's state an attribute of it (Dynamo's OptimizerVariable), lifted
# into the graph's inputs by memgraph's backends (memgraph/compiled/lifted.py lift_tensor_attributes); the state
# itself is made while Dynamo traces the first call, by the optimizer's own ``_init_group``, which Dynamo runs
# eagerly (torch 2.13 torch/_dynamo/variables/optimizer.py ``OptimizerVariable.call_method``) with the trace's
# dispatch modes off: :func:`_init_group_recorded`. Tiny Llama, AdamW, batch 1, seq 32, cpu target: 3,274,652 B
# predicted and measured with each implementation. The others run a meta stand-in for their step (Adafactor's
# scalar reads, Lion written out, bitsandbytes' 8-bit state emulated: model_spec/optimizers.py), which is not what
# Dynamo would trace on the device.
COMPILED_OPTIMIZERS = ("sgd", "sgd-momentum", "sgd-nesterov", "adam", "adamw")


def compile_scope(step, compile_fn: Callable, recorder_modes: list | None = None) -> None:
    """``step``'s loss function and optimizer ``step`` replaced by ``compile_fn(fn)`` where the options say so;
    ``recorder_modes``: in the trace, the trace's dispatch modes (:func:`_init_group_recorded`); None in a real run."""
    opts = step.options
    if opts.compile_optimizer and opts.optimizer not in COMPILED_OPTIMIZERS + ("none",):
        raise MemgraphError(f"--compile-optimizer with --optimizer {opts.optimizer} is not modelled (memgraph runs a "
                            "meta stand-in for its step, not what Dynamo traces on the device): use "
                            f"--optimizer {', '.join(COMPILED_OPTIMIZERS)}, or drop --compile-optimizer")
    if opts.compile_loss:
        parts = getattr(step.compute_loss, "parts", None)  # --loss chunked-ce: torchtune compiles the chunk's CE only
        if parts:
            parts["cross_entropy"] = compile_fn(parts["cross_entropy"])
        else:
            step.compute_loss = compile_fn(step.compute_loss)
    if opts.compile_optimizer and step.optimizer is not None:
        if recorder_modes is not None:
            require("compiled_optimizer")
            if opts.target == "cuda":
                _capturable_as_on_gpu(step.optimizer)
            _init_group_recorded(step.optimizer, recorder_modes)
        step.optimizer.step = compile_fn(step.optimizer.step)


def _capturable_as_on_gpu(optimizer) -> None:
    """``capturable`` on, as Dynamo sets it when it traces a compiled step whose parameters are all on a GPU and
    whose state is not made yet (torch 2.13 torch/_dynamo/variables/optimizer.py ``_set_capturable``): ``step``
    is then a device tensor of the parameter's device, updated in the graph (on meta: on the trace's device, seen
    by the recorder), not a CPU tensor the compiled graph's output would be copied into."""
    for group in optimizer.param_groups:
        if "capturable" in group and all(p not in optimizer.state for p in group["params"]):
            group["capturable"] = True


def _init_group_recorded(optimizer, recorder_modes: list) -> None:
    """``optimizer._init_group`` (the lazy creation of its state: ``exp_avg``, ``exp_avg_sq``, ``step``) run with
    the trace's dispatch modes back on the stack: Dynamo runs it eagerly while it traces the compiled step's first
    call, where the real step allocates the state, and with every dispatch mode off (torch 2.13 convert_frame), so
    the recorder would not see those storages born. ``recorder_modes``: the trace's modes, filled by each
    compiled call (compiled/step.py _CompiledCall)."""
    init_group = getattr(optimizer, "_init_group", None)
    if init_group is None:  # an optimizer without one: Dynamo traces its step normally
        return

    def recorded(*args, **kwargs):
        on = set(map(id, compile_internals().dispatch_modes()))
        with contextlib.ExitStack() as stack:
            for mode in recorder_modes:
                if id(mode) not in on:
                    stack.enter_context(mode)
            return init_group(*args, **kwargs)

    optimizer._init_group = recorded
