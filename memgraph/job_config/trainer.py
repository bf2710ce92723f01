"""Hugging Face ``TrainingArguments`` / TRL ``SFTConfig`` with TRL's ``ModelConfig`` (JSON or YAML: ``trl sft
--config``, alignment-handbook recipes, ``TrainingArguments.to_json_string``).

Sources: transformers 5.23 training_args.py (``per_device_train_batch_size`` default 8, ``bf16``/``fp16``,
``gradient_checkpointing(_kwargs)``, ``optim``, ``fsdp``/``fsdp_config``, ``deepspeed``); TRL's ``SFTConfig``
(``max_length``, formerly ``max_seq_length``; ``packing``; ``padding_free``) and ``ModelConfig`` (``torch_dtype``,
``attn_implementation``, ``use_peft``, ``lora_r`` 16, ``lora_alpha`` 32, ``lora_dropout`` 0.05,
``lora_target_modules``, ``load_in_4bit``/``load_in_8bit``, ``use_bnb_nested_quant`` False).
"""

from __future__ import annotations

from memgraph.job_config import common
from memgraph.job_config.mapping import JobConfig
from memgraph.job_config.trainer_optim import take_optim

FORMAT = "Hugging Face TrainingArguments / TRL SFTConfig"
TRAINER_BATCH_DEFAULT = 8  # transformers 5.23 TrainingArguments.per_device_train_batch_size
TRL_LORA_DEFAULTS = {"lora_r": 16, "lora_alpha": 32, "lora_dropout": 0.05}  # TRL ModelConfig


def read(doc: dict, text: str, file) -> JobConfig:
    job = JobConfig()
    where = str(file)
    common.take_model(job, doc, ("model_name_or_path",))
    batch = common.positive(doc, "per_device_train_batch_size", where)
    if batch is None:
        job.take("per_device_train_batch_size (absent)", TRAINER_BATCH_DEFAULT, "batch_size", TRAINER_BATCH_DEFAULT,
                 "TrainingArguments' default")
        batch = TRAINER_BATCH_DEFAULT
    else:
        job.take("per_device_train_batch_size", batch, "batch_size", batch)
    common.take_int(job, doc, "gradient_accumulation_steps", "grad_accum", where)
    quantize = _quantisation(job, doc)
    common.take_precision_hf(job, doc, quantized=quantize is not None)
    common.take_checkpointing(job, doc, ("gradient_checkpointing", "activation_checkpointing"),
                              ("gradient_checkpointing_kwargs", "activation_checkpointing_kwargs"))
    take_optim(job, "optim", doc.get("optim"))
    common.take_attention(job, "attn_implementation", doc.get("attn_implementation"))
    length_key = next((k for k in ("max_length", "max_seq_length") if doc.get(k) is not None), None)
    length = common.positive(doc, length_key, where) if length_key else None
    if length_key is None:
        job.ignore("max_length", None, "absent: TRL's SFTConfig would truncate at 1024 tokens, TrainingArguments has "
                   "no length; --seq-len or the model's default is used")
    common.take_packing(job, batch, length, length_key, packing=doc.get("packing"),
                        padding_free=doc.get("padding_free"), how="TRL's SFTTrainer")
    _peft(job, doc, quantize)
    common.take_fsdp_trainer(job, doc)
    common.take_deepspeed(job, "deepspeed", doc.get("deepspeed"))
    common.take_compile_trainer(job, doc)
    for key, why in (("use_liger_kernel", "Liger's fused kernels (fused linear cross-entropy) are not modelled"),
                     ("per_device_eval_batch_size", "evaluation steps are not modelled"),
                     ("completion_only_loss", "no memory effect: the same shapes, labels masked"),
                     ("assistant_only_loss", "no memory effect: the same shapes, labels masked")):
        if doc.get(key) not in (None, False):
            job.ignore(key, doc[key], why)
    return job


def _quantisation(job: JobConfig, doc: dict) -> str | None:
    if doc.get("load_in_4bit"):
        nested = bool(doc.get("use_bnb_nested_quant", False))
        q = "4bit" if nested else "nf4"
        job.take("load_in_4bit", True, "quantize", q,
                 "NF4 with double quantisation" if nested else "NF4, use_bnb_nested_quant false (TRL's default)")
        return q
    if doc.get("load_in_8bit"):
        job.take("load_in_8bit", True, "quantize", "8bit")
        return "8bit"
    return None


def _peft(job: JobConfig, doc: dict, quantize: str | None) -> None:
    if not doc.get("use_peft"):
        if quantize is not None:
            job.ignore("use_peft", doc.get("use_peft"), "a quantised model trains through LoRA only: set use_peft")
        return
    rank = doc.get("lora_r", TRL_LORA_DEFAULTS["lora_r"])
    job.take("lora_r", rank, "lora_rank", rank, "" if "lora_r" in doc else "TRL ModelConfig's default")
    alpha = doc.get("lora_alpha", TRL_LORA_DEFAULTS["lora_alpha"])
    job.take("lora_alpha", alpha, "lora_alpha", alpha, "" if "lora_alpha" in doc else "TRL ModelConfig's default")
    dropout = doc.get("lora_dropout", TRL_LORA_DEFAULTS["lora_dropout"])
    job.take("lora_dropout", dropout, "lora_dropout", common.number(dropout, "lora_dropout"),
             "" if "lora_dropout" in doc else "TRL ModelConfig's default")
    common.take_lora_targets(job, "lora_target_modules", doc.get("lora_target_modules"))
