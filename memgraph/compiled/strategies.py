"""``--compile`` with ``--strategy`` (what the frameworks compile when the model is wrapped for several GPUs), and
``--compile-blocks`` (the same per-block compile on one device: torchtune's ``compile_model``, PyTorch's regional
compilation recipe).

- ``ddp``: the DDP-wrapped model compiled whole, ``torch.compile(DistributedDataParallel(model))`` (PyTorch's DDP
  notes, "DistributedDataParallel and torch.compile"); Dynamo itself then splits the graph at DDP's bucket
  boundaries for any backend (torch 2.13 torch/_dynamo/backends/distributed.py ``DDPOptimizer``, applied in
  torch/_dynamo/eval_frame.py while ``torch._dynamo.config.optimize_ddp`` is its default "ddp_optimizer", with the
  DDP module's ``bucket_bytes_cap``), so each bucket's all-reduce can start after its graph's backward. DDP's C++
  Reducer and its hooks run eagerly as without compile. Nothing here: the caller compiles the runner.
- FSDP2 (``fsdp``): each ``fully_shard`` unit (each transformer block) compiled on its own, the root's own modules
  (embedding, final norm, head) eager: torchtune (github pytorch/torchtune, torchtune/training/_compile.py
  ``compile_model``: ``m.compile(backend=...)`` on every TransformerSelfAttentionLayer, before ``shard_model``) and
  torchtitan (torchtitan/models/llama3/infra/parallelize.py ``apply_compile``: ``torch.compile`` of each
  transformer block, before ``apply_fsdp``) do this. FSDP2's forward/backward hooks are
  ``torch._dynamo.disable``d (torch 2.13 torch/distributed/fsdp/_fully_shard/_fsdp_state.py ``_dynamo_disable``),
  so the all-gathers, reshards and reduce-scatters run eagerly around each compiled block, as in the real run.
"""

from __future__ import annotations

from typing import Callable

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import FSDP_STRATEGIES


def fsdp_compiled_units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The ``fully_shard`` units under the root (``FSDPModule``, public: torch.distributed.fsdp), the blocks a
    per-block compile compiles."""
    from torch.distributed.fsdp import FSDPModule

    return [m for name, m in model.named_modules() if name and isinstance(m, FSDPModule)]


def compile_per_unit(step, compile_unit: Callable[[torch.nn.Module], None]) -> bool:
    """With an FSDP2 strategy, ``compile_unit(unit)`` on each fully_shard unit of ``step.model`` and True; with
    ``--compile-blocks`` on one device, on each block FSDP would wrap (the classes of the model's
    ``_no_split_modules``: torchtune's ``compile_model`` compiles each of its transformer layers so) and True; else
    False (the caller compiles the runner whole)."""
    if step.options.strategy in FSDP_STRATEGIES:
        units = fsdp_compiled_units(step.model)
    elif step.options.compile_blocks:
        units = compiled_blocks(step.model)
    else:
        return False
    for unit in units:
        compile_unit(unit)
    return True


def compile_in_engine(step, compile_engine: Callable[[object], None]) -> bool:
    """With ``--deepspeed``, ``compile_engine(engine)`` registered to run right after ``deepspeed.initialize`` and
    True; else False. That is where accelerate compiles a DeepSpeed engine (accelerate 1.15 accelerator.py
    ``_prepare_deepspeed``, which the Trainer's ``torch_compile`` reaches: ``engine.compile(backend=...,
    compile_kwargs=...)``; deepspeed 0.19.8 runtime/engine.py ``DeepSpeedEngine.compile``: ``self.module.compile``),
    the engine's own forward and its hooks outside the compiled module's call."""
    if step.options.deepspeed is None:
        return False
    step.runner.compile_after_initialize(compile_engine)
    return True


def compiled_blocks(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The repeated blocks ``--compile-blocks`` compiles: the modules whose class the model names in
    ``_no_split_modules`` (through PEFT's wrappers, which pass the attribute on), outermost only."""
    from memgraph.trace.parallel.distributed import no_split_units

    blocks: list[torch.nn.Module] = []
    for _, module in no_split_units(model):  # FSDP's rule (fsdp_units), without its fallback to the root's children
        if not any(_within(module, b) for b in blocks):
            blocks.append(module)
    if not blocks:
        raise MemgraphError(f"--compile-blocks: {type(model).__name__} names no repeated blocks (_no_split_modules): "
                            "drop --compile-blocks to compile the model whole")
    return blocks


def _within(module: torch.nn.Module, block: torch.nn.Module) -> bool:
    return any(m is module for m in block.modules())
