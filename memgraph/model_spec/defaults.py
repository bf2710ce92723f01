"""The ``auto`` options, resolved per model to what a Hugging Face user runs today.

``analyze`` and ``measure`` both run the resolved options, and the report's header states each
one (``assumed: ...``), so a reader sees which loop the numbers describe:

- attention (``--attn auto``): what transformers builds the model class with when no
  ``attn_implementation`` is given: ``sdpa`` where supported, else ``eager`` (transformers 5.23,
  modeling_utils.py ``PreTrainedModel.get_correct_attn_implementation``; see
  :func:`memgraph.model_spec.build.resolve_attention`).
- loop (``--loop auto``): ``trainer`` for transformers models. Fine-tuning with transformers means
  the Trainer (its documentation's training path; TRL's SFTTrainer and the other TRL trainers
  subclass it and inherit ``training_step``), which keeps only the loss. ``module:function``
  models have no Trainer: ``plain``, the loop of benchmark scripts.
- optimizer implementation (``--optimizer-impl auto``): PyTorch's own default for the target
  (foreach on CUDA, for-loop on CPU; model_spec/optimizers.py), except AdamW under the ``trainer``
  loop, where it is the Trainer's default ``TrainingArguments.optim``: ``adamw_torch_fused`` with
  torch >= 2.8, else ``adamw_torch`` (transformers 5.23, training_args.py ``TrainingArguments``), which
  trainer_optimizer.py ``_get_adamw_torch`` builds as ``torch.optim.AdamW(fused=True)`` / ``AdamW()``.
  A plain loop calls ``torch.optim.AdamW(params)`` itself and gets PyTorch's default.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from memgraph.model_spec.build import resolve_attention
from memgraph.model_spec.framework_defaults import framework_defaults
from memgraph.model_spec.optimizers import resolve_impl
from memgraph.model_spec.options import BNB_8BIT_OPTIMIZERS, TrainingOptions
from memgraph.model_spec.sources import ModelSpec

# transformers 5.23 training_args.py: TrainingArguments.optim defaults to "adamw_torch_fused" when
# pytorch_utils.is_torch_greater_or_equal_than_2_8, else "adamw_torch".
TRAINER_FUSED_ADAMW_FROM_TORCH = (2, 8)


@dataclass(frozen=True)
class Resolved:
    options: TrainingOptions  # attention, loop and optimizer implementation made concrete
    optimizer_impl: str  # the implementation the step runs: foreach, for-loop, fused, or none (no optimizer)
    assumptions: list[str]  # one phrase per default, for the report header


def resolve_defaults(spec: ModelSpec, opts: TrainingOptions) -> Resolved:
    """``opts`` with every ``auto`` replaced by what it means for ``spec``, and the phrases that say so."""
    hf = spec.source != "callable"
    attn = resolve_attention(spec, opts.attn_implementation)
    loop = opts.loop if opts.loop != "auto" else ("trainer" if hf else "plain")
    impl_option, impl, impl_why = _optimizer_impl(opts, loop)
    resolved = replace(opts, attn_implementation=attn, loop=loop, optimizer_impl=impl_option)
    resolved, framework_said = framework_defaults(resolved, hf, _checkpoint_dtype(spec))  # precision, FSDP policy, PEFT k-bit preparation
    said = []
    if hf:
        why = f" (transformers' choice for {spec.model_class})" if opts.attn_implementation == "auto" else ""
        said.append(f"attention {attn}{why}")
    if opts.optimizer == "none":
        said.append("no optimizer (forward and backward only)")
    elif opts.optimizer in BNB_8BIT_OPTIMIZERS:  # bitsandbytes' step has no foreach/fused choice
        said.append(f"optimizer {opts.optimizer} (bitsandbytes' own 8-bit step)")
    else:
        said.append(f"optimizer {opts.optimizer} {impl}" + (f" ({impl_why})" if impl_why else ""))
    loop_why = {"trainer": "Hugging Face Trainer", "plain": "a module:function model's own loop"}[loop]
    said.append(f"loop {loop}" + (f" ({loop_why})" if opts.loop == "auto" else ""))
    said.append(f"zero_grad {opts.zero_grad.replace('-', '_')}")
    said += framework_said
    if not hf:
        said.append("loss " + {"auto": "the scalar output, else out.sum()", "sum": "out.sum()",
                               "cross-entropy": "F.cross_entropy(out, target)"}[opts.loss])
    elif opts.loss == "cross-entropy":  # a causal LM without its own loss (model_spec/losses.py)
        said.append("loss F.cross_entropy(logits.flatten(0, 1), labels.flatten()) in the logits' dtype")
    return Resolved(resolved, impl, said)


def _optimizer_impl(opts: TrainingOptions, loop: str) -> tuple[str, str, str]:
    """(the --optimizer-impl value to run, the implementation it is, why) for the resolved loop."""
    if opts.optimizer == "none":
        return opts.optimizer_impl, "none", ""
    if opts.optimizer_impl != "auto":
        return opts.optimizer_impl, opts.optimizer_impl, ""
    if loop == "trainer" and opts.optimizer == "adamw":
        if trainer_default_adamw_fused():
            return "fused", "fused", "Trainer default adamw_torch_fused"
        impl = resolve_impl("auto", opts.target)
        return impl, impl, "Trainer default adamw_torch: PyTorch's default"
    impl = resolve_impl("auto", opts.target)
    return impl, impl, f"PyTorch's default on {opts.target}"


def trainer_default_adamw_fused() -> bool:
    """Whether the installed torch makes ``TrainingArguments.optim`` default to ``adamw_torch_fused``."""
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    return version >= TRAINER_FUSED_ADAMW_FROM_TORCH


def _checkpoint_dtype(spec: ModelSpec) -> str | None:
    """The dtype a transformers config says its checkpoint is stored in (``dtype``, formerly ``torch_dtype``)."""
    config = spec.config
    if config is None:
        return None
    dtype = getattr(config, "dtype", None)  # transformers 5 reads a config's torch_dtype into dtype
    return str(dtype).removeprefix("torch.") if dtype is not None else None
