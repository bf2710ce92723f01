"""The user's ds_config.json, read as written and with Hugging Face's ``"auto"`` values resolved.

The resolution is transformers' own code (transformers 5.23 transformers/integrations/deepspeed.py
``HfTrainerDeepSpeedConfig``): ``trainer_config_process`` fills the batch, accumulation, clipping, optimizer,
scheduler and precision keys from ``TrainingArguments``, ``trainer_config_finalize`` the hidden-size keys from the
model's config (``reduce_bucket_size`` = hidden², ZeRO-3 ``stage3_prefetch_bucket_size`` = int(0.9 hidden²),
``stage3_param_persistence_threshold`` = 10 hidden) and the scheduler's step counts. memgraph passes the
``TrainingArguments`` a Trainer run with memgraph's options would have: ``per_device_train_batch_size`` =
``--batch-size``, ``gradient_accumulation_steps`` = ``--grad-accum``, world size = ``--nproc``, ``bf16`` for the
bf16 precisions, ``fp16`` for the fp16 ones, and ``TrainingArguments``' defaults for what memgraph has no option
for (:data:`TRAINING_ARGUMENTS_DEFAULTS`). A value written in the file that disagrees with those is transformers'
mismatch error, shown as one line.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions

# transformers 5.23 transformers/training_args.py TrainingArguments field defaults, for the keys
# trainer_config_process reads that memgraph has no option for
TRAINING_ARGUMENTS_DEFAULTS = {"learning_rate": 5e-5, "adam_beta1": 0.9, "adam_beta2": 0.999, "adam_epsilon": 1e-8,
                               "weight_decay": 0.0, "max_grad_norm": 1.0, "warmup_steps": 0}
NVME = "nvme"


@dataclass
class DeepSpeedConfig:
    """The config as DeepSpeed receives it, and what was resolved."""

    path: str
    written: dict  # as read from the file
    config: dict  # "auto" values resolved
    resolved: list[tuple[str, object, str]] = field(default_factory=list)  # (dotted key, value, from what)

    @property
    def zero(self) -> dict:
        return self.config.get("zero_optimization", {}) or {}

    @property
    def stage(self) -> int:
        return int(self.zero.get("stage", 0))


def read_config(path: str) -> dict:
    """The JSON object in ``path``, or one line saying what is wrong with the file."""
    p = Path(path)
    if not p.is_file():
        raise MemgraphError(f"--deepspeed {path}: no such file: pass the path of your ds_config.json")
    try:
        config = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise MemgraphError(f"--deepspeed {path}: not JSON ({e}): pass a DeepSpeed config file") from None
    if not isinstance(config, dict):
        raise MemgraphError(f"--deepspeed {path}: a DeepSpeed config is a JSON object, not {type(config).__name__}")
    _refuse_nvme(path, config)
    return config


def _refuse_nvme(path: str, config: dict) -> None:
    zero = config.get("zero_optimization") or {}
    for key in ("offload_optimizer", "offload_param"):
        if str((zero.get(key) or {}).get("device", "")).lower() == NVME:
            raise MemgraphError(f"--deepspeed {path}: zero_optimization.{key}.device nvme is not modelled (NVMe "
                                "offload moves state through files and AIO buffers): use device cpu or none")


def resolve(path: str, opts: TrainingOptions, model_config, iterations: int) -> DeepSpeedConfig:
    """``path``'s config with its ``"auto"`` values filled by transformers' HfTrainerDeepSpeedConfig (see the module
    docstring) for a run with ``opts`` of a model whose config is ``model_config``."""
    from transformers.integrations import deepspeed as hf_ds

    written = read_config(path)
    hf = hf_ds.HfTrainerDeepSpeedConfig(copy.deepcopy(written))
    try:
        hf.trainer_config_process(_training_arguments(opts))
        hf.trainer_config_finalize(_training_arguments(opts), SimpleNamespace(config=model_config), iterations)
    except ValueError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip().startswith("-")]
        raise MemgraphError(f"--deepspeed {path}: values that disagree with memgraph's options "
                            f"({'; '.join(lines) or str(e).splitlines()[0]}): write \"auto\" or the same value") from None
    finally:
        hf_ds.unset_hf_deepspeed_config()  # transformers' global: ZeRO-3 model construction must not see it
    config = hf.config
    return DeepSpeedConfig(path, written, config, _resolved(written, config))


def _training_arguments(opts: TrainingOptions) -> SimpleNamespace:
    """What trainer_config_process/finalize read of ``TrainingArguments``, for a Trainer run with ``opts``."""
    d = TRAINING_ARGUMENTS_DEFAULTS
    return SimpleNamespace(
        world_size=opts.nproc, per_device_train_batch_size=opts.batch_size,
        gradient_accumulation_steps=opts.grad_accum, max_grad_norm=d["max_grad_norm"],
        learning_rate=d["learning_rate"], adam_beta1=d["adam_beta1"], adam_beta2=d["adam_beta2"],
        adam_epsilon=d["adam_epsilon"], weight_decay=d["weight_decay"], save_on_each_node=False,
        fp16=opts.precision in ("fp16-mixed", "fp16"), fp16_full_eval=False,
        bf16=opts.precision in ("bf16-mixed", "bf16"), bf16_full_eval=False,
        get_warmup_steps=lambda steps: d["warmup_steps"])


def _resolved(written, config, prefix: str = "") -> list[tuple[str, object, str]]:
    """The keys that were ``"auto"`` in ``written``, with their values in ``config`` and where they come from."""
    out = []
    for key, value in written.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            out += _resolved(value, config.get(key, {}), dotted + ".")
        elif value == "auto":
            out.append((dotted, config.get(key), _SOURCES.get(dotted, "transformers' TrainingArguments default")))
    return out


_SOURCES = {
    "train_micro_batch_size_per_gpu": "--batch-size",
    "gradient_accumulation_steps": "--grad-accum",
    "train_batch_size": "--nproc x --batch-size x --grad-accum",
    "fp16.enabled": "--precision",
    "bf16.enabled": "--precision",
    "zero_optimization.reduce_bucket_size": "hidden_size²",
    "zero_optimization.stage3_prefetch_bucket_size": "int(0.9 hidden_size²)",
    "zero_optimization.stage3_param_persistence_threshold": "10 x hidden_size",
    "scheduler.params.total_num_steps": "--iterations",
}


def describe(cfg: DeepSpeedConfig) -> str:
    """One note: the config's name, stage and each resolved value."""
    resolved = "; ".join(f"{k} = {v!r} ({src})" for k, v, src in cfg.resolved)
    return (f"DeepSpeed config {cfg.path}: ZeRO stage {cfg.stage}"
            + (f"; \"auto\" resolved as transformers' Trainer does: {resolved}" if resolved else "; no \"auto\" values"))


__all__ = ["DeepSpeedConfig", "TRAINING_ARGUMENTS_DEFAULTS", "describe", "read_config", "resolve"]
