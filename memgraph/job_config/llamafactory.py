"""LLaMA-Factory's YAML (hiyouga/LLaMA-Factory, ``llamafactory-cli train config.yaml``; defaults from
src/llamafactory/hparams/: model_args.py, data_args.py, finetuning_args.py, and HF Seq2SeqTrainingArguments).

- ``model_name_or_path`` -> the model; ``per_device_train_batch_size`` (HF default 8); ``gradient_accumulation_steps``;
- ``cutoff_len`` (default 2048) -> ``--seq-len``; ``packing`` / ``neat_packing`` fill every row to it;
- ``finetuning_type`` (default ``lora``): ``lora`` with ``lora_rank`` (default 8), ``lora_alpha`` (default
  ``lora_rank * 2``), ``lora_dropout`` (default 0), ``lora_target`` (default ``all`` -> ``all-linear``);
  ``quantization_bit`` 4 -> ``--quantize 4bit`` (``double_quantization`` default true), 8 -> ``8bit``;
- ``bf16``: the model is loaded in bfloat16 (``compute_dtype``); full fine-tuning casts the trainable parameters
  to float32 unless ``pure_bf16`` (``bf16-mixed``), LoRA keeps the base in bfloat16 (``bf16``);
- gradient checkpointing is ON unless ``disable_gradient_checkpointing``, reentrant unless ``use_reentrant_gc:
  false`` (model/model_utils/checkpointing.py); ``flash_attn`` ``fa2``/``sdpa``/``disabled``; ``optim``;
  ``deepspeed`` (a path).
"""

from __future__ import annotations

from memgraph.job_config import common
from memgraph.job_config.mapping import JobConfig
from memgraph.job_config.trainer import TRAINER_BATCH_DEFAULT as BATCH_DEFAULT  # LLaMA-Factory runs the HF Trainer
from memgraph.job_config.trainer_optim import take_optim

FORMAT = "LLaMA-Factory"
CUTOFF_DEFAULT = 2048
ATTN = {"fa2": "flash_attention_2", "sdpa": "sdpa", "disabled": "eager"}


def read(doc: dict, text: str, file) -> JobConfig:
    job = JobConfig()
    where = str(file)
    common.take_model(job, doc, ("model_name_or_path",))
    batch = common.positive(doc, "per_device_train_batch_size", where)
    if batch is None:
        batch = BATCH_DEFAULT
        job.take("per_device_train_batch_size (absent)", batch, "batch_size", batch, "HF TrainingArguments' default")
    else:
        job.take("per_device_train_batch_size", batch, "batch_size", batch)
    common.take_int(job, doc, "gradient_accumulation_steps", "grad_accum", where)
    cutoff = common.positive(doc, "cutoff_len", where)
    key = "cutoff_len"
    if cutoff is None:
        cutoff, key = CUTOFF_DEFAULT, "cutoff_len (absent, LLaMA-Factory's default)"
    packed = common.truthy(doc.get("packing")) or common.truthy(doc.get("neat_packing"))
    common.take_packing(job, batch, cutoff, key, packing=packed, flatten=False, how="LLaMA-Factory's packing")
    kind = str(doc.get("finetuning_type", "lora")).lower()
    quantized = False
    if kind == "lora":
        rank = common.positive(doc, "lora_rank", where) or 8
        job.take("lora_rank", rank, "lora_rank", rank, "" if "lora_rank" in doc else "LLaMA-Factory's default")
        alpha = doc.get("lora_alpha") or rank * 2
        job.take("lora_alpha", alpha, "lora_alpha", alpha, "" if doc.get("lora_alpha") else "default: lora_rank * 2")
        if doc.get("lora_dropout"):
            job.take("lora_dropout", doc["lora_dropout"], "lora_dropout", common.number(doc["lora_dropout"], "lora_dropout"))
        target = doc.get("lora_target", "all")
        if isinstance(target, str) and "," in target:
            target = [t.strip() for t in target.split(",")]
        common.take_lora_targets(job, "lora_target", target)
        bits = doc.get("quantization_bit")
        method = str(doc.get("quantization_method", "bnb")).lower()
        if bits is not None and method != "bnb":
            job.ignore("quantization_method", method, "only bitsandbytes quantisation is modelled")
        elif bits == 4:
            double = common.truthy(doc.get("double_quantization", True))
            job.take("quantization_bit", 4, "quantize", "4bit" if double else "nf4")
            quantized = True
        elif bits == 8:
            job.take("quantization_bit", 8, "quantize", "8bit")
            quantized = True
        elif bits is not None:
            job.ignore("quantization_bit", bits, "only 4 and 8 bits (bitsandbytes) are modelled")
    elif kind != "full":
        job.ignore("finetuning_type", kind, "only lora and full fine-tuning are modelled")
    if common.truthy(doc.get("bf16")) or common.truthy(doc.get("pure_bf16")):
        full_mixed = kind == "full" and not common.truthy(doc.get("pure_bf16"))
        job.take("bf16", doc.get("bf16", doc.get("pure_bf16")), "precision", "bf16-mixed" if full_mixed else "bf16",
                 "trainable parameters cast to float32, bf16 autocast" if full_mixed else "the model in bfloat16")
    elif common.truthy(doc.get("fp16")):
        job.take("fp16", doc["fp16"], "precision", "fp16-mixed" if kind == "full" else "fp16")
    elif quantized:
        job.options["precision"] = "bf16"
        job.taken.append("(no bf16 given) -> --precision bf16 (a quantised model computes in a 16-bit dtype)")
    if common.truthy(doc.get("disable_gradient_checkpointing")):
        job.take("disable_gradient_checkpointing", True, "gradient_checkpointing", False)
    else:
        job.take("disable_gradient_checkpointing (absent)" if "disable_gradient_checkpointing" not in doc
                 else "disable_gradient_checkpointing", False, "gradient_checkpointing", True,
                 "LLaMA-Factory checkpoints by default")
        reentrant = common.truthy(doc.get("use_reentrant_gc", True))
        job.take("use_reentrant_gc" + ("" if "use_reentrant_gc" in doc else " (absent, default true)"), reentrant,
                 "checkpoint_impl", "reentrant" if reentrant else "non-reentrant")
    attn = doc.get("flash_attn")
    if attn is not None and str(attn) != "auto":
        if str(attn) in ATTN:
            job.take("flash_attn", attn, "attn_implementation", ATTN[str(attn)])
        else:
            job.ignore("flash_attn", attn, "not an attention memgraph traces")
    take_optim(job, "optim", doc.get("optim"))
    common.take_deepspeed(job, "deepspeed", doc.get("deepspeed"))
    for key in ("enable_liger_kernel", "use_unsloth", "use_unsloth_gc", "offload_folder"):
        if common.truthy(doc.get(key)):
            job.ignore(key, doc[key], "not modelled: the prediction is without it")
    return job
