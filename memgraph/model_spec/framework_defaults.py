"""The defaults the user's framework applies, made explicit in the options and stated on the ``assumed:`` line.

Each rule names the framework, version and place it comes from. ``framework_defaults`` is idempotent (a resolved
set of options resolves to itself), as ``memgraph fit`` resolves once and every analysis again.

- **precision**: ``fp32`` unless asked: Hugging Face ``TrainingArguments`` defaults to ``bf16=False``,
  ``fp16=False`` (transformers 5.23 training_args.py), i.e. float32 weights and no autocast.
- **FSDP mixed precision** (sharded strategies with ``--precision bf16-mixed``): accelerate 1.15
  (utils/dataclasses.py ``FullyShardedDataParallelPlugin.set_mixed_precision``, called by
  ``Accelerator.__init__`` for ``mixed_precision: bf16``, which the Trainer passes for ``bf16=True``) sets
  FSDP2's ``MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=bfloat16, output_dtype=bfloat16)``, so each
  block's weights are gathered and used in bfloat16 and autocast finds nothing to cast: the option
  ``fsdp_mixed_precision`` (whose policy reduces in float32: the reduce-scatter's float32 copy of one block's
  gradients is the difference, stated). ``--fsdp-autocast`` keeps the old assumption (autocast over the gathered
  float32 weights: a plain FSDP2 script without a policy).
- **k-bit preparation** (``--quantize`` with LoRA): PEFT 0.21.2 ``prepare_model_for_kbit_training``
  (peft/utils/other.py), which QLoRA recipes call before ``get_peft_model`` (TRL's SFTTrainer does for a model
  loaded in 4/8 bit): ``use_gradient_checkpointing=True`` by default, with ``gradient_checkpointing_kwargs={}``,
  which reaches ``torch.utils.checkpoint`` without ``use_reentrant``, so torch 2.13 (utils/checkpoint.py) warns
  and runs the reentrant variant; ``enable_input_require_grads()`` (``use_reentrant`` not in the kwargs); and
  every float16/bfloat16 parameter that is not a ``Params4bit`` cast to float32 (norms, embeddings, ``lm_head``;
  memgraph/model_spec/kbit_preparation.py). Checkpointing the user turned on keeps the user's variant.
  ``--no-kbit-preparation``: none of it (the model as ``get_peft_model`` alone leaves it).
- **gradient checkpointing variant**: the Trainer's ``gradient_checkpointing_kwargs`` default ``None`` becomes
  ``{"use_reentrant": False}`` in transformers 5.23 (modeling_utils.py ``_activation_checkpointing_enable``).
"""

from __future__ import annotations

from dataclasses import replace

from memgraph.model_spec.options import FSDP_STRATEGIES, TrainingOptions

SHARDED = FSDP_STRATEGIES + ("fsdp+tp", "fsdp1")
KBIT_PREPARATION = ("PEFT 0.21.2 prepare_model_for_kbit_training: {checkpointing}, input embeddings' output "
                    "requires grad, non-quantised bf16/fp16 parameters upcast to float32 (--no-kbit-preparation skips it)")
KBIT_CHECKPOINTING = ("gradient checkpointing on, use_reentrant=True (its gradient_checkpointing_kwargs={} leaves "
                      "torch 2.13's default)")
FSDP_POLICY = ("FSDP2 MixedPrecisionPolicy(param_dtype=bfloat16) for bf16-mixed, as accelerate 1.15's FSDP plugin "
               "sets for mixed_precision bf16 (it reduces in bfloat16, memgraph's policy in float32); "
               "--fsdp-autocast: autocast over float32 weights instead")
FSDP1_POLICY = ("FSDP1 MixedPrecision(param_dtype, reduce_dtype, buffer_dtype bfloat16) for bf16-mixed, as accelerate "
                "1.15's FSDP plugin sets for fsdp_version 1 and mixed_precision bf16; --fsdp-autocast: autocast over "
                "float32 weights instead")


def uses_kbit_preparation(opts: TrainingOptions) -> bool:
    """Whether PEFT's k-bit preparation is assumed for these (resolved or given) options."""
    return opts.quantize is not None and opts.lora_rank is not None and not opts.no_kbit_preparation


def upcasts_unquantised(opts: TrainingOptions) -> bool:
    """Whether the preparation's float32 upcast is traced: not with ``flash_attention_2``, whose kernel takes 16-bit
    q/k/v only (transformers' flash-attention integration casts float32 q/k/v back to the weights' dtype, which the
    forced flash SDPA kernel memgraph traces for it does not), so there the upcast is stated as not modelled."""
    return uses_kbit_preparation(opts) and opts.attn_implementation != "flash_attention_2"


def framework_defaults(opts: TrainingOptions, hf: bool = True,
                       checkpoint_dtype: str | None = None) -> tuple[TrainingOptions, list[str]]:
    """``opts`` with the frameworks' defaults applied, and one phrase per default assumed; ``hf``: a transformers
    model (the Trainer's defaults), else a ``module:function`` model's own loop; ``checkpoint_dtype``: the config's
    ``dtype``, which ``from_pretrained``'s default ``dtype="auto"`` loads the weights in (transformers 5.23
    modeling_utils.py ``PreTrainedModel.from_pretrained``)."""
    said = []
    if opts.precision == "fp32":
        why = "TrainingArguments bf16=False, fp16=False" if hf else "no autocast"
        if hf and checkpoint_dtype in ("bfloat16", "float16"):
            why += (f"; float32 weights, where from_pretrained's default dtype='auto' loads this checkpoint's "
                    f"{checkpoint_dtype}: --precision {'bf16' if checkpoint_dtype == 'bfloat16' else 'fp16'} for that")
        said.append(f"precision fp32 ({why})")
    else:
        said.append(f"precision {opts.precision}")
    if opts.strategy in SHARDED and opts.precision == "bf16-mixed" and not opts.fsdp_autocast:
        if not opts.fsdp_mixed_precision:
            opts = replace(opts, fsdp_mixed_precision=True)
        said.append(FSDP1_POLICY if opts.strategy == "fsdp1" else FSDP_POLICY)
    if uses_kbit_preparation(opts):
        checkpointing = KBIT_CHECKPOINTING
        if not opts.gradient_checkpointing:
            opts = replace(opts, gradient_checkpointing=True, checkpoint_impl="reentrant")
        elif opts.checkpoint_impl != "reentrant":  # the user's (the Trainer's) checkpointing replaces PEFT's
            checkpointing = "gradient checkpointing use_reentrant=False as given"
        phrase = KBIT_PREPARATION.format(checkpointing=checkpointing)
        if not upcasts_unquantised(opts):
            phrase = phrase.replace("non-quantised bf16/fp16 parameters upcast to float32",
                                    "its float32 upcast of non-quantised parameters not modelled with flash_attention_2")
        said.append(phrase)
    if opts.gradient_checkpointing and not uses_kbit_preparation(opts):
        impl = "use_reentrant=True" if opts.checkpoint_impl == "reentrant" else "use_reentrant=False"
        why = ""
        if opts.checkpoint_impl == "non-reentrant":  # --checkpoint-impl's default, the Trainer's
            why = " (transformers 5.23's default gradient_checkpointing_kwargs)"
        every = f", every {opts.checkpoint_every} layers" if opts.checkpoint_every != 1 else ""
        said.append(f"gradient checkpointing {impl}{why}{every}")
    return opts, said
