"""``--strategy fsdp1``: torch's FSDP1 ``FullyShardedDataParallel`` (flat parameters), per rank.

The model is wrapped the way accelerate's FSDP plugin (``fsdp_version: 1``, ``TRANSFORMER_BASED_WRAP``) and
llama-cookbook do: ``FullyShardedDataParallel(model, auto_wrap_policy=transformer_auto_wrap_policy(
transformer_layer_cls=<the model's _no_split_modules classes>), ...)``, so every transformer block is one FSDP unit
and the root unit holds what is left (embeddings, final norm, head). torch 2.13 (torch/distributed/fsdp/_flat_param.py)
flattens each unit's parameters into one ``FlatParameter``, pads it to a multiple of the world size and keeps this
rank's chunk; for forward and backward the unit's padded flat parameter is all-gathered into ``_full_param_padded``
(freed again by resizing its storage, after forward for FULL_SHARD and HYBRID_SHARD, after backward for
SHARD_GRAD_OP); gradients are reduce-scattered from the unsharded gradient into the padded shard.

On meta over the fake process group (trace) the model stays on meta (``private_api.fsdp1_on_meta``); on the real
gloo run (memgraph/measure/distributed.py) it is a CPU module with ``device_id=cpu``.

Not modelled: ``limit_all_gathers=False`` (torch's default True: the CPU thread waits once two all-gathers are in
flight; the trace runs the collectives in program order, which that limiter keeps the GPU close to),
``CPUOffload`` and ``sync_module_states`` (a broadcast at wrap time, before the step).
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.nn as nn

from memgraph.model_spec.options import TrainingOptions
from memgraph.notes import Note

# accelerate 1.15 utils/dataclasses.py FullyShardedDataParallelPlugin.set_mixed_precision for fsdp_version 1 and
# mixed_precision bf16: MixedPrecision(param_dtype, reduce_dtype, buffer_dtype) all bfloat16; llama-cookbook's
# policies/mixed_precision.py ``bfSixteen`` is the same
MIXED_PRECISION = dict(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16, buffer_dtype=torch.bfloat16)

# the name of a storage FSDP1's FlatParamHandle re-allocates by resizing (the padded unsharded flat parameter, its
# bfloat16 shard with mixed precision)
FSDP1_ALLOC_STORAGE = "FSDP1 _alloc_storage (gathered flat parameter or low-precision shard)"


def wrap_fsdp1(model: nn.Module, opts: TrainingOptions, units: list[tuple[str, nn.Module]], rule: str,
               mesh=None) -> tuple[nn.Module, list[str], str]:
    """``model`` wrapped by FSDP1 as ``opts`` says; the names of the units below the root and the rule that chose
    them. ``units`` and ``rule``: FSDP2's units of the model (distributed.py ``fsdp_units``), whose classes the
    policy wraps. ``mesh``: the (replicate, shard) DeviceMesh of HYBRID_SHARD, else None (the default process group)."""
    from torch.distributed.fsdp import BackwardPrefetch, FullyShardedDataParallel, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import lambda_auto_wrap_policy, transformer_auto_wrap_policy

    classes = {type(m) for _, m in units}
    trainable = {p.requires_grad for p in model.parameters()}
    if len(trainable) == 2 and not opts.fsdp1_use_orig_params:
        # FSDP1 refuses a FlatParameter of mixed requires_grad without use_orig_params; PEFT 0.21.2's
        # fsdp_auto_wrap_policy (peft/utils/other.py, after llama-recipes' policies/wrapping.py) wraps every leaf
        # module whose weight trains (the LoRA A/B) as its own unit, or'ed with the transformer block classes
        blocks = tuple(classes)

        def peft_policy(m: nn.Module) -> bool:
            weight = getattr(m, "weight", None)
            leaf_trains = not any(True for _ in m.children()) and weight is not None and weight.requires_grad
            return leaf_trains or isinstance(m, blocks)

        policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=peft_policy)
        rule = "PEFT's fsdp_auto_wrap_policy (each trainable leaf module, or " + rule + ")"
        units = [(name, m) for name, m in model.named_modules() if name and peft_policy(m)]
    elif rule.startswith("the model's _no_split_modules"):
        policy = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls=classes)
        rule = "transformer_auto_wrap_policy on " + rule.removeprefix("the model's _no_split_modules: ")
    else:
        chosen = {id(m) for _, m in units}
        policy = functools.partial(lambda_auto_wrap_policy, lambda_fn=lambda m: id(m) in chosen)
        rule = "lambda_auto_wrap_policy on " + rule
    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    prefetch = opts.fsdp1_backward_prefetch
    with warnings.catch_warnings():  # device_id meta has no index: FSDP1 warns and takes the meta handle's device
        warnings.filterwarnings("ignore", message="FSDP got the argument `device_id`")
        warnings.filterwarnings("ignore", message="The `NO_SHARD` sharding strategy is deprecated")  # the user's choice
        wrapped = FullyShardedDataParallel(
            model, auto_wrap_policy=policy, sharding_strategy=ShardingStrategy[opts.fsdp1_sharding],
            device_mesh=mesh, device_id=device, use_orig_params=opts.fsdp1_use_orig_params,
            mixed_precision=MixedPrecision(**MIXED_PRECISION) if opts.fsdp_mixed_precision else None,
            backward_prefetch=None if prefetch == "NONE" else BackwardPrefetch[prefetch], limit_all_gathers=True)
    return wrapped, [name for name, _ in units], rule


def fsdp1_notes(opts: TrainingOptions, units: list[str], rule: str, rank: int) -> list:
    """The report's lines on the FSDP1 run."""
    sharding = opts.fsdp1_sharding
    kept = {"FULL_SHARD": "freed after forward and gathered again for backward",
            "HYBRID_SHARD": "freed after forward and gathered again for backward",
            "SHARD_GRAD_OP": "kept from forward to the end of backward",
            "NO_SHARD": "never sharded (every rank holds the whole model; gradients all-reduced)"}[sharding]
    hybrid = (f"; HYBRID_SHARD: sharded over the {opts.nproc // opts.nnodes} GPUs of a node, replicated across "
              f"{opts.nnodes} nodes" if sharding == "HYBRID_SHARD" else "")
    notes = [Note("FSDP1: FullyShardedDataParallel({sharding}) with {rule} ({units} units) and the root; each unit's "
                  "parameters are one FlatParameter padded to a multiple of the world size, of which rank {rank} keeps "
                  "its chunk with the gradient and optimizer state; the unit's flat parameter is all-gathered for its "
                  "forward and backward and {kept}{hybrid}; use_orig_params={orig}, backward_prefetch={prefetch}, "
                  "limit_all_gathers=True (at most two all-gathers in flight; the trace runs them in program order)",
                  per_layer=("units",), sharding=sharding, rule=rule, units=len(units), rank=rank, kept=kept,
                  hybrid=hybrid, orig=opts.fsdp1_use_orig_params, prefetch=opts.fsdp1_backward_prefetch)]
    if opts.fsdp_mixed_precision:
        notes.append("FSDP1 MixedPrecision(param_dtype, reduce_dtype, buffer_dtype all bfloat16; accelerate 1.15's "
                     "FSDP1 plugin for mixed_precision bf16, llama-cookbook's bfSixteen) instead of autocast: float32 "
                     "flat shards, each unit's shard cast to a bfloat16 copy before its all-gather")
    return notes


__all__ = ["FSDP1_ALLOC_STORAGE", "MIXED_PRECISION", "fsdp1_notes", "wrap_fsdp1"]
