"""``--strategy tp``: tensor parallelism with ``torch.distributed.tensor.parallel``, N = ``--nproc`` ranks.

The plan is the model's own: transformers declares which linear layers split how in the config's
``base_model_tp_plan`` (transformers 5.23, e.g. models/llama/configuration_llama.py ``LlamaConfig``:
``layers.*.self_attn.{q,k,v}_proj`` and ``layers.*.mlp.{gate,up}_proj`` ``"colwise"``, ``o_proj`` and
``down_proj`` ``"rowwise"``), which is Megatron's and torchtitan's layout for Llama. memgraph applies it
with PyTorch's own styles (torch 2.13 torch/distributed/tensor/parallel/style.py): ``ColwiseParallel()``
shards the weight's rows (dim 0: output features) and the bias, takes a replicated input and leaves the
output sharded on its last dim; ``RowwiseParallel()`` shards the weight's columns (dim 1), takes that sharded
input and all-reduces its partial output to a replicated one. Embeddings and the output head follow
torchtitan's Llama plan (torchtitan/models/llama3/infra/parallelize.py ``apply_tp``) without sequence or loss
parallelism: the input embedding ``RowwiseParallel(input_layouts=Replicate())`` (vocabulary rows sharded,
output all-reduced) and the head ``ColwiseParallel(output_layouts=Replicate())`` (vocabulary columns
sharded, logits all-gathered to every rank). Norms and any parameter outside the plan stay replicated.

``parallelize_module`` runs on a one-dimensional ``DeviceMesh`` over the fake process group, on meta: the
parameters become DTensors holding this rank's shard, and the collectives of the forward and backward
(functional all-reduce and all-gather, each allocating its output) are traced as the rank runs them.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from memgraph.errors import MemgraphError

# parallelize_module / distribute_tensor(src_data_rank=None): each rank takes its shard of its own full tensor, no
# scatter or broadcast from rank 0 (torch 2.13 torch/distributed/tensor/_api.py distribute_tensor). Every rank
# builds the same weights (same seed), so the values are those the scatter would send; only a setup-time
# transient differs: the scatter source's contiguous copy of every chunk (rank 0, freed before the first step).
# Under gloo that copy is held by the scatter's Work, and when a gloo worker thread drops the last reference
# (ProcessGroupGloo::runLoop's workInProgress_[i].reset(), after AsyncWork::execute has restored the thread's
# state) the free happens outside the profiler and never reaches the measured figures: rank 0 of a gloo TP
# measurement then read 16,384 to 24,576 bytes high, varying between runs (measure/distributed.py).
SRC_DATA_RANK = None
PLAN_ATTRIBUTE = "base_model_tp_plan"  # transformers' PretrainedConfig attribute
STYLES = ("colwise", "rowwise")  # the plan values applied; others (packed, MoE, gather) are refused


def tp_plan(model: nn.Module, sequence_parallel: bool = False) -> dict[str, object]:
    """``parallelize_module``'s plan for ``model``: module path pattern -> ParallelStyle."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    config = getattr(model, "config", None)
    plan = getattr(config, PLAN_ATTRIBUTE, None) if config is not None else None
    base = getattr(model, "base_model_prefix", "")
    if not plan or not hasattr(model, base):
        raise MemgraphError(f"--strategy tp needs the model's tensor-parallel plan ({type(model).__name__} has no "
                            f"config.{PLAN_ATTRIBUTE}, as transformers' Llama-style models have): use "
                            "--strategy fsdp or ddp for this model")
    unsupported = sorted({style for style in plan.values() if style not in STYLES})
    if unsupported:
        raise MemgraphError(f"--strategy tp: {type(model).__name__}'s plan uses {', '.join(unsupported)}, which memgraph "
                            f"does not apply yet (only {' and '.join(STYLES)}): use --strategy fsdp for this model")
    styles = {"colwise": ColwiseParallel, "rowwise": RowwiseParallel}
    out = {f"{base}.{pattern}": styles[style]() for pattern, style in plan.items()}
    embeddings = model.get_input_embeddings()
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = {id(m): name for name, m in model.named_modules()}
    tied = head is not None and head.weight is getattr(embeddings, "weight", None)
    if tied:  # one weight cannot be sharded on vocabulary rows for both: both stay replicated
        if sequence_parallel:
            raise MemgraphError(f"--sequence-parallel: {type(model).__name__} ties its embedding and head, which stay "
                                "replicated, so the sequence cannot be split after the embedding: drop --sequence-parallel")
        return out
    if isinstance(embeddings, nn.Embedding) and id(embeddings) in names:
        out[names[id(embeddings)]] = RowwiseParallel(input_layouts=Replicate())
    if isinstance(head, nn.Linear) and id(head) in names:
        out[names[id(head)]] = ColwiseParallel(output_layouts=Replicate())
    if sequence_parallel:
        out.update(sequence_parallel_plan(model, base, plan, head_name=names.get(id(head))))
    return out


def sequence_parallel_plan(model: nn.Module, base: str, plan: dict[str, str], head_name: str | None) -> dict:
    """The plan entries sequence parallelism adds or replaces (torchtitan/models/llama3/infra/parallelize.py
    ``apply_tp``, with transformers' Llama module names): between the TP regions the activations are
    ``Shard(1)`` (this rank's 1/T of the sequence) and the norms run on them (``SequenceParallel``); the
    attention and the MLP gather the sequence on entry (``PrepareModuleInput`` Shard(1) -> Replicate: an
    all-gather) and ``o_proj``/``down_proj`` reduce-scatter their partial sums back to Shard(1)
    (``RowwiseParallel(output_layouts=Shard(1))``); the final norm is ``SequenceParallel`` and the head gathers
    the sequence (``ColwiseParallel(input_layouts=Shard(1))``).

    One difference from torchtitan, forced by transformers: torchtitan's embedding reduce-scatters to Shard(1),
    but transformers' ``LlamaModel.forward`` computes the positions and the causal mask from the embedding
    output's sequence length, which must be the whole sequence. So the embedding all-reduces as without
    sequence parallelism, and layer 0 takes its slice of the sequence (``PrepareModuleInput`` Replicate ->
    Shard(1): a local chunk, no communication)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, RowwiseParallel,
                                                   SequenceParallel)

    parents = {pattern.rsplit(".", 1)[0] for pattern in plan}
    attention = sorted(p for p in parents if p.endswith(".self_attn"))
    mlp = sorted(p for p in parents if p.endswith(".mlp"))
    layers = getattr(getattr(model, base), "layers", None)
    if len(attention) != 1 or len(mlp) != 1 or not isinstance(layers, nn.ModuleList) or head_name is None:
        raise MemgraphError(f"--sequence-parallel: {type(model).__name__}'s plan is not a Llama-style decoder "
                            "(layers.*.self_attn and layers.*.mlp with a separate head): drop --sequence-parallel")
    out: dict[str, object] = {}
    for pattern, style in plan.items():  # the row-wise outputs reduce-scatter to the sequence shard
        if style == "rowwise":
            out[f"{base}.{pattern}"] = RowwiseParallel(output_layouts=Shard(1))
    out[f"{base}.{attention[0]}"] = PrepareModuleInput(input_kwarg_layouts={"hidden_states": Shard(1)},
                                                       desired_input_kwarg_layouts={"hidden_states": Replicate()})
    out[f"{base}.{mlp[0]}"] = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
    layer = layers[0]
    for name, child in layer.named_children():  # the decoder layer's own norms
        if _is_norm(child):
            out[f"{base}.layers.*.{name}"] = SequenceParallel()
    norm = getattr(getattr(model, base), "norm", None)
    if _is_norm(norm):
        out[f"{base}.norm"] = SequenceParallel()
    out[f"{base}.layers.0"] = PrepareModuleInput(input_layouts=(Replicate(),), desired_input_layouts=(Shard(1),),
                                                 use_local_output=True)
    out[head_name] = ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())
    return out


def _is_norm(module) -> bool:
    """A normalisation over the last (feature) dim: per token, so it runs on a sequence shard."""
    return module is not None and type(module).__name__.endswith(("RMSNorm", "LayerNorm"))


def parallelize(model: nn.Module, mesh, sequence_parallel: bool = False) -> tuple[nn.Module, int, int]:
    """``model`` with the plan applied over the ranks of ``mesh`` (a 1-D ``DeviceMesh``: every rank for
    ``tp``, the ``tp`` dimension for ``fsdp+tp``); the number of plan entries and of the modules replicated
    as DTensors (:func:`replicate_the_rest`)."""
    from torch.distributed.tensor.parallel import parallelize_module

    plan = tp_plan(model, sequence_parallel)
    model = parallelize_module(model, mesh, plan, src_data_rank=SRC_DATA_RANK)
    return model, len(plan), replicate_the_rest(model, mesh)


def replicate_the_rest(model: nn.Module, mesh) -> int:
    """Every module that still holds plain parameters (norms; a tied embedding) gets them as ``Replicate()``
    DTensors, its tensor inputs made replicated DTensors and its outputs local again: torchtitan's
    ``NoParallel`` (torchtitan/distributed/tensor_parallel.py), with ``torch.distributed.tensor.distribute_module``.
    Without it a real run stops in the optimizer: torch 2.13's foreach and fused AdamW refuse a parameter list
    that mixes ``torch.Tensor`` and ``DTensor``. No memory moves: a replicated DTensor wraps the same tensor."""
    from torch.distributed.tensor import DTensor, Replicate, distribute_module, distribute_tensor

    def partition(name, module, device_mesh):
        if name:  # distribute_module walks the submodules too; only the module's own parameters
            return
        for pname, p in list(module.named_parameters(recurse=False)):
            if not isinstance(p, DTensor):
                module.register_parameter(pname, nn.Parameter(distribute_tensor(p, device_mesh, [Replicate()],
                                                                                src_data_rank=SRC_DATA_RANK),
                                                              requires_grad=p.requires_grad))

    def inputs(module, args, device_mesh):
        return tuple(DTensor.from_local(a, device_mesh, [Replicate()], run_check=False)
                     if isinstance(a, torch.Tensor) and not isinstance(a, DTensor) else a for a in args)

    def outputs(module, out, device_mesh):
        return out.to_local() if isinstance(out, DTensor) else out

    modules = [m for m in model.modules()
               if any(not isinstance(p, DTensor) for p in m.parameters(recurse=False))]
    for m in modules:
        distribute_module(m, mesh, partition, inputs, outputs)
    return len(modules)


__all__ = ["parallelize", "tp_plan"]
