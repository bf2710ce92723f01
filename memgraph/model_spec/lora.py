"""LoRA adapters through the real PEFT library (``--lora-rank``, ``--lora-alpha``, ``--lora-targets``,
``--lora-dropout``, ``--dora``).

The model is wrapped with ``peft.get_peft_model`` (PEFT 0.21.2, peft/mapping_func.py) on whatever device it
was built on, meta included: PEFT creates each adapter's ``lora_A``/``lora_B`` ``nn.Linear`` on the base
layer's device (peft/tuners/lora/layer.py ``LoraLayer.update_layer`` -> ``_move_adapter_to_device_of_base_layer``),
initialises ``lora_A`` with ``nn.init.kaiming_uniform_`` and ``lora_B`` with zeros (``reset_lora_parameters``),
which are no-ops on meta, and then, what changes memory:

- every parameter but the adapters' is frozen (peft/tuners/tuners_utils.py ``_mark_only_adapters_as_trainable``);
- adapters of a float16/bfloat16 model are upcast to float32 (peft_model.py ``PeftModel.__init__`` ->
  ``cast_adapter_dtype``, ``autocast_adapter_dtype=True`` by default), and each adapted layer casts its input
  to the adapter's dtype before the adapter matmuls (lora/layer.py ``Linear.forward`` -> ``_cast_input_dtype``);
  ``--lora-dtype model`` passes ``autocast_adapter_dtype=False``: the adapters keep the model's dtype (LitGPT's
  bf16-true LoRA), and the dropout output and adapter matmuls are in that dtype;
- with gradient checkpointing on, PEFT makes the embedding output require grad
  (``PeftModel._prepare_model_for_gradient_checkpointing`` -> ``enable_input_require_grads``), so the
  checkpointed blocks have an input to differentiate; hence LoRA is applied after checkpointing is enabled.

What is returned is the adapted transformers model (``PeftModel.get_base_model()``), not the ``PeftModel``
wrapper: for LoRA, ``PeftModelForCausalLM.forward`` only calls it (peft_model.py), and the module paths stay the
model's own (``model.layers.0.self_attn.q_proj.lora_A.default``) instead of gaining ``base_model.model.``.
"""

from __future__ import annotations

import warnings

import torch

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions
from memgraph.notes import Note

ALL_LINEAR = "all-linear"  # PEFT's preset (peft/tuners/tuners_utils.py INCLUDE_LINEAR_LAYERS_SHORTHAND)


def lora_config(opts: TrainingOptions):
    """The ``peft.LoraConfig`` the options ask for; what is not given keeps PEFT's default."""
    import peft

    kwargs = {"r": opts.lora_rank}
    if opts.lora_alpha is not None:
        kwargs["lora_alpha"] = opts.lora_alpha
    if opts.lora_dropout is not None:
        kwargs["lora_dropout"] = opts.lora_dropout
    if opts.lora_targets:
        names = [n.strip() for n in opts.lora_targets.split(",") if n.strip()]
        kwargs["target_modules"] = ALL_LINEAR if names == [ALL_LINEAR] else names
    if opts.dora:
        kwargs["use_dora"] = True
    return peft.LoraConfig(**kwargs)


def apply_lora(model: torch.nn.Module, opts: TrainingOptions) -> torch.nn.Module:
    """``model`` with PEFT's LoRA adapters injected and everything else frozen (``opts.lora_rank`` None: as is)."""
    if opts.lora_rank is None:
        return model
    import peft

    config = lora_config(opts)
    try:
        with warnings.catch_warnings():  # PEFT 0.21 reads transformers 5's deprecated is_gradient_checkpointing
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            wrapped = peft.get_peft_model(model, config, autocast_adapter_dtype=opts.lora_dtype != "model")
    except ValueError as e:  # unknown model type without --lora-targets, or a target matching no module
        raise MemgraphError(f"LoRA: {e} (pass --lora-targets all-linear or module names such as q_proj,v_proj)") from None
    return wrapped.get_base_model()


def adapter_parameter_names(model: torch.nn.Module) -> list[str]:
    """Names of the LoRA parameters (``lora_A``, ``lora_B``, DoRA's ``lora_magnitude_vector``)."""
    return [n for n, _ in model.named_parameters() if ".lora_" in n]


def apply_finetuning(model: torch.nn.Module, opts: TrainingOptions) -> torch.nn.Module:
    """LoRA adapters (:func:`apply_lora`), then the frozen base linear weights stored as bitsandbytes stores them
    (``--quantize``, :mod:`memgraph.model_spec.quantize`)."""
    model = apply_lora(model, opts)
    if opts.quantize is not None:
        from memgraph.model_spec.quantize import quantize_base_linears

        quantize_base_linears(model, opts)
        from memgraph.model_spec.framework_defaults import upcasts_unquantised

        if upcasts_unquantised(opts):  # PEFT's prepare_model_for_kbit_training (model_spec/kbit_preparation.py)
            from memgraph.model_spec.kbit_preparation import upcast_unquantised

            upcast_unquantised(model)
    return model


def finetuning_notes(model: torch.nn.Module, optimizer) -> list[str]:
    """What the trace notes say about the adapters, the quantised base and an emulated optimizer."""
    from memgraph.model_spec.quantize import quantize_notes

    notes = []
    adapters = adapter_parameter_names(model)
    if adapters:
        count = sum(p.numel() for n, p in model.named_parameters() if ".lora_" in n)
        notes.append(Note("LoRA: {tensors} adapter tensors ({parameters:,} parameters) from PEFT's get_peft_model; "
                          "every other parameter frozen; {dtypes}", per_layer=("tensors", "parameters"),
                          tensors=len(adapters), parameters=count, dtypes=_adapter_dtype_note(model)))
    notes += quantize_notes(model)
    if hasattr(optimizer, "describe"):
        notes.append(optimizer.describe())
    return notes


def _adapter_dtype_note(model: torch.nn.Module) -> str:
    dtypes = {p.dtype for n, p in model.named_parameters() if ".lora_" in n}
    if dtypes == {torch.float32}:
        return "bf16/fp16 adapters upcast to float32 as PEFT does (autocast_adapter_dtype=True)"
    return f"adapters in {', '.join(sorted(str(d).removeprefix('torch.') for d in dtypes))} (autocast_adapter_dtype=False)"
