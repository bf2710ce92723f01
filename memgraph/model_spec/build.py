"""Build the model a spec names, on a device, in training mode, with the requested parameters trainable."""

from __future__ import annotations

from dataclasses import replace

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.lora import apply_finetuning
from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
from memgraph.model_spec.sources import ModelSpec
from memgraph.model_spec.stages import apply_stage
from memgraph.model_spec.trainable import apply_trainable
from memgraph.private_api import default_attention


def resolve_attention(spec: ModelSpec, requested: str) -> str:
    """``--attn`` as transformers applies it: ``auto`` is what transformers picks for the model class when no
    ``attn_implementation`` is given (:func:`memgraph.private_api.default_attention`: ``sdpa`` where the class
    supports it, else ``eager``). ``module:function`` models keep ``auto`` (they take no such argument)."""
    if requested != "auto" or spec.model_class is None:
        return requested
    import transformers

    cls = getattr(transformers, spec.model_class, None)
    return "eager" if cls is None else default_attention(cls)  # a missing class fails in build with its message


def build_model(spec: ModelSpec, opts: TrainingOptions, device: str, checkpoint_context_fn=None) -> torch.nn.Module:
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
        with torch.device(device):
            model = spec.build(build_opts, dtype)
    except MemgraphError:
        raise
    except Exception as e:
        raise MemgraphError(f"building {spec.name} failed: {type(e).__name__}: {e}") from e
    if any(p.device.type != torch.device(device).type for p in model.parameters()):
        model = model.to(device)
    model.train()
    apply_stage(model, opts.stage)
    apply_trainable(model, opts.train, opts.freeze)
    if opts.gradient_checkpointing:
        if not getattr(model, "supports_gradient_checkpointing", False):
            raise MemgraphError(f"{spec.name} does not support gradient checkpointing: drop --gradient-checkpointing")
        kwargs = {"use_reentrant": False}
        if checkpoint_context_fn is not None:  # a meta trace: the recompute in backward re-enters its emulations
            kwargs["context_fn"] = checkpoint_context_fn
        if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x; the old name warns
            model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    return apply_finetuning(model, opts)  # LoRA / QLoRA (model_spec/lora.py); after checkpointing, as PEFT expects
