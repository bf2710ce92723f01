"""Build the model a spec names, on a device, in training mode, with the requested parameters trainable."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import replace

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.checkpointing import enable_checkpointing
from memgraph.model_spec.lora import apply_finetuning
from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.model_spec.stages import apply_stage
from memgraph.model_spec.trainable import apply_trainable
from memgraph.private_api import default_attention, forget_attention_choice


def resolve_attention(spec: ModelSpec, requested: str) -> str:
    """``--attn`` as transformers applies it: ``auto`` is what transformers picks for the model class when no
    ``attn_implementation`` is given (:func:`memgraph.private_api.default_attention`: ``sdpa`` where the class
    supports it, else ``eager``). ``module:function`` models keep ``auto`` (they take no such argument)."""
    if requested != "auto" or spec.model_class is None:
        return requested
    import transformers

    cls = getattr(transformers, spec.model_class, None)
    return "eager" if cls is None else default_attention(cls)  # a missing class fails in build with its message


# PreTrainedModel._sdpa_can_dispatch's refusal (modeling_utils.py, transformers 5.23) when a class that takes
# attn_implementation="sdpa" holds a sub-model that has none
SDPA_REFUSED = "does not support an attention implementation through torch.nn.functional.scaled_dot_product_attention"


def build_model(spec: ModelSpec, opts: TrainingOptions, device: str, checkpoint_context_fn=None,
                constructor_values=None) -> torch.nn.Module:
    """Build ``spec`` on ``device`` in training mode with the requested parameters trainable.

    On ``meta``, ``flash_attention_2`` is built as ``sdpa`` and the trace forces PyTorch's flash SDPA
    kernel (the flash-attn package is not needed, and cannot run on meta): PyTorch's flash backend is
    the FlashAttention-2 kernel, and it saves the same tensors for backward (q, k, v, output, float32
    logsumexp, RNG state), GQA included; transformers takes the same path up to the kernel for
    mask-less batches (memgraph's batches carry no attention mask).
    """
    dtype = PRECISION_DTYPE[opts.precision]
    meta = torch.device(device).type == "meta"
    build_opts = replace(opts, attn_implementation=resolve_attention(spec, opts.attn_implementation))
    if meta and build_opts.attn_implementation == "flash_attention_2":
        build_opts = replace(opts, attn_implementation="sdpa")
    try:
        try:
            model = _construct(spec, build_opts, dtype, device, constructor_values)
        except ValueError as e:
            if build_opts.attn_implementation != "sdpa" or SDPA_REFUSED not in str(e):
                raise
            # a composite whose sub-model has no SDPA (VibeVoice-ASR's acoustic tokenizer): sdpa (auto's choice,
            # resolve_attention) as transformers' own default (no attn_implementation) builds it: per sub-model,
            # sdpa where supported, else eager
            if getattr(spec, "config", None) is not None:
                forget_attention_choice(spec.config)  # the refused build left sdpa on every sub-config
            default = copy.copy(opts)  # None is no --attn choice: set past TrainingOptions' check
            object.__setattr__(default, "attn_implementation", None)
            model = _construct(spec, default, dtype, device, constructor_values)
    except MemgraphError:
        raise
    except Exception as e:
        raise MemgraphError(f"building {spec.name} failed: {type(e).__name__}: {e}") from e
    if any(p.device.type != torch.device(device).type for p in model.parameters()):
        model = model.to(device)
    model.train()
    if opts.no_kv_cache:
        no_kv_cache(model)
    apply_stage(model, opts.stage)
    apply_trainable(model, opts.train, opts.freeze)
    if opts.gradient_checkpointing:  # a meta trace's context_fn: the recompute re-enters its emulations
        enable_checkpointing(model, opts, spec.name, checkpoint_context_fn)  # model_spec/checkpointing.py
    return apply_finetuning(model, opts)  # LoRA / QLoRA (model_spec/lora.py); after checkpointing, as PEFT expects


def no_kv_cache(model: torch.nn.Module) -> None:
    """``--no-kv-cache``: ``use_cache`` false on every config the model's modules hold (a composite's sub-configs
    too). transformers 5.23 reads it as the forward's default (utils/generic.py ``merge_with_config_defaults``), and
    a decoder builds its ``DynamicCache`` only when it is true (e.g. models/llama/modeling_llama.py LlamaModel)."""
    for module in model.modules():
        config = getattr(module, "config", None)
        if config is not None and getattr(config, "use_cache", None):
            config.use_cache = False


def _construct(spec: ModelSpec, opts: TrainingOptions, dtype: torch.dtype, device: str, constructor_values=None):
    """``spec.build`` under ``torch.device(device)``; on meta, inside ``constructor_values()`` when given.

    Some constructors compute with tensors and read the result back (torchvision's RegNet:
    ``BlockParams.from_init_params`` turns ``torch.arange``/``log``/``round``/``pow`` of its width parameters
    into Python ints with ``.tolist()``). On meta that has no values ("Cannot copy out of meta tensor"). The
    tracer passes a context (:class:`memgraph.trace.shadow_values.ShadowValues`) in which integer factories and
    the small computations on them carry real values, so such a constructor runs as it does on the CPU while the
    weights stay on meta (never materialised); other constructors are unaffected.
    """
    context = constructor_values() if constructor_values is not None and torch.device(device).type == "meta" \
        else contextlib.nullcontext()
    with torch.device(device), context:
        return spec.build(opts, dtype)

