"""Hugging Face ``TrainingArguments.optim`` names (transformers 5.23 training_args.py ``OptimizerNames``; axolotl and
LLaMA-Factory pass the same names through) as memgraph's ``--optimizer`` / ``--optimizer-impl``.

``adamw_torch`` builds ``torch.optim.AdamW(params, **kwargs)`` without ``fused``/``foreach``, so PyTorch's default
(foreach on CUDA) runs; ``adamw_torch_fused`` passes ``fused=True`` (trainer_optimizer.py ``_get_adamw_torch``).
"""

from __future__ import annotations

from memgraph.job_config.mapping import JobConfig

OPTIM = {
    "adamw_torch": ("adamw", "foreach"),
    "adamw_torch_fused": ("adamw", "fused"),
    "adamw_hf": ("adamw", "for-loop"),
    "adafactor": ("adafactor", None),
    "adamw_bnb_8bit": ("adamw8bit", None),
    "adamw_8bit": ("adamw8bit", None),
    "paged_adamw_8bit": ("paged-adamw8bit", None),
    "sgd": ("sgd", None),
    "lion_32bit": ("lion", None),
}


def take_optim(job: JobConfig, key: str, name) -> None:
    """``key: name`` (a Trainer optim name) into the job's optimizer options, or an ignored line."""
    if name is None:
        return
    known = OPTIM.get(str(name).lower())
    if known is None:
        job.ignore(key, name, "an optimizer memgraph does not model; pass --optimizer with the nearest one")
        return
    optimizer, impl = known
    job.take(key, name, "optimizer", optimizer)
    if impl is not None:
        job.take(key, name, "optimizer_impl", impl)
