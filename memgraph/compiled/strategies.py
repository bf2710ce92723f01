"""``--compile`` with ``--strategy``: what the frameworks compile when the model is wrapped for several GPUs.

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

from memgraph.model_spec.options import FSDP_STRATEGIES


def fsdp_compiled_units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The ``fully_shard`` units under the root (``FSDPModule``, public: torch.distributed.fsdp), the blocks a
    per-block compile compiles."""
    from torch.distributed.fsdp import FSDPModule

    return [m for name, m in model.named_modules() if name and isinstance(m, FSDPModule)]


def compile_per_unit(step, compile_unit: Callable[[torch.nn.Module], None]) -> bool:
    """With an FSDP2 strategy, ``compile_unit(unit)`` on each fully_shard unit of ``step.model`` and True; else
    False (the caller compiles the runner whole)."""
    if step.options.strategy not in FSDP_STRATEGIES:
        return False
    for unit in fsdp_compiled_units(step.model):
        compile_unit(unit)
    return True
