"""axolotl's YAML (axolotl-ai-cloud/axolotl, ``axolotl train config.yml``; fields as in its examples/ and
src/axolotl/utils/schemas/config.py).

- ``base_model`` -> the model; ``micro_batch_size`` -> ``--batch-size``; ``gradient_accumulation_steps``;
- ``sequence_len`` -> ``--seq-len``: with ``sample_packing`` the multipack sampler fills every row to it, without
  it the batch is padded to its longest sample (the longest allowed is assumed);
- ``adapter: lora|qlora`` with ``lora_r``, ``lora_alpha``, ``lora_dropout``, ``lora_target_modules`` or
  ``lora_target_linear`` (-> ``all-linear``); ``load_in_4bit`` -> ``--quantize 4bit`` (axolotl's loader asks
  bitsandbytes for NF4 with double quantisation), ``load_in_8bit`` -> ``8bit``;
- ``bf16`` (``true``/``auto``) -> ``--precision bf16``: axolotl loads the weights in bfloat16
  (``torch_dtype``), ``fp16`` -> ``fp16``;
- ``gradient_checkpointing`` (+ ``gradient_checkpointing_kwargs.use_reentrant``), ``optimizer`` (Trainer names),
  ``flash_attention`` / ``sdp_attention`` / ``attn_implementation``, ``deepspeed`` (a path), ``fsdp`` /
  ``fsdp_config``.
"""

from __future__ import annotations

from memgraph.job_config import common
from memgraph.job_config.mapping import JobConfig
from memgraph.job_config.trainer_optim import take_optim

FORMAT = "axolotl"


def read(doc: dict, text: str, file) -> JobConfig:
    job = JobConfig()
    where = str(file)
    common.take_model(job, doc, ("base_model",))
    batch = common.take_int(job, doc, "micro_batch_size", "batch_size", where) or 1
    common.take_int(job, doc, "gradient_accumulation_steps", "grad_accum", where)
    length = common.positive(doc, "sequence_len", where)
    common.take_packing(job, batch, length, "sequence_len", packing=doc.get("sample_packing"), flatten=False,
                        how="axolotl's multipack sampler")
    adapter = str(doc.get("adapter") or "").lower()
    quantized = False
    if adapter in ("lora", "qlora"):
        rank = common.positive(doc, "lora_r", where)
        if rank is not None:
            job.take("lora_r", rank, "lora_rank", rank)
        if doc.get("lora_alpha") is not None:
            job.take("lora_alpha", doc["lora_alpha"], "lora_alpha", doc["lora_alpha"])
        if doc.get("lora_dropout") is not None:
            job.take("lora_dropout", doc["lora_dropout"], "lora_dropout", common.number(doc["lora_dropout"], "lora_dropout"))
        if common.truthy(doc.get("lora_target_linear")):
            job.take("lora_target_linear", True, "lora_targets", "all-linear")
        else:
            common.take_lora_targets(job, "lora_target_modules", doc.get("lora_target_modules"))
        if common.truthy(doc.get("load_in_4bit")) or adapter == "qlora":
            job.take("load_in_4bit" if doc.get("load_in_4bit") else "adapter", doc.get("load_in_4bit") or adapter,
                     "quantize", "4bit", "NF4 with double quantisation, as axolotl asks bitsandbytes")
            quantized = True
        elif common.truthy(doc.get("load_in_8bit")):
            job.take("load_in_8bit", True, "quantize", "8bit")
            quantized = True
        if quantized:  # src/axolotl/loaders/model.py: prepare_model_for_kbit_training, then norms and embeddings
            # cast back to the model's dtype for LoRA/QLoRA; checkpointing as the file says
            job.take("adapter", adapter, "no_kbit_preparation", True,
                     "axolotl checkpoints as gradient_checkpointing says and casts norms and embeddings back to "
                     "the model's dtype after PEFT's preparation")
    elif adapter:
        job.ignore("adapter", adapter, "only lora and qlora adapters are modelled")
    if common.truthy(doc.get("bf16")) or common.truthy(doc.get("bfloat16")):
        key = "bf16" if doc.get("bf16") is not None else "bfloat16"
        job.take(key, doc[key], "precision", "bf16", "axolotl loads the weights in bfloat16")
    elif common.truthy(doc.get("fp16")) or common.truthy(doc.get("float16")):
        key = "fp16" if doc.get("fp16") is not None else "float16"
        job.take(key, doc[key], "precision", "fp16", "axolotl loads the weights in float16")
    common.take_checkpointing(job, doc, ("gradient_checkpointing",), ("gradient_checkpointing_kwargs",))
    take_optim(job, "optimizer", doc.get("optimizer"))
    if common.truthy(doc.get("flash_attention")):
        job.take("flash_attention", True, "attn_implementation", "flash_attention_2")
    elif common.truthy(doc.get("sdp_attention")):
        job.take("sdp_attention", True, "attn_implementation", "sdpa")
    else:
        common.take_attention(job, "attn_implementation", doc.get("attn_implementation"))
    if doc.get("fsdp") or doc.get("fsdp_config"):
        common.take_fsdp_trainer(job, {"fsdp": doc.get("fsdp") or "full_shard", "fsdp_config": doc.get("fsdp_config")})
    common.take_deepspeed(job, "deepspeed", doc.get("deepspeed"))
    common.take_compile_trainer(job, doc)  # axolotl hands torch_compile(_backend, _mode) to TrainingArguments
    for key in ("liger_fused_linear_cross_entropy", "cut_cross_entropy", "unsloth_lora_mlp",
                "gradient_checkpointing_offload"):  # kernels and offloads that move memory, not modelled
        if common.truthy(doc.get(key)):
            job.ignore(key, doc[key], "not modelled: the prediction is without it")
    if quantized and "precision" not in job.options:
        job.options["precision"] = "bf16"
        job.taken.append("(no bf16 given) -> --precision bf16 (a quantised model computes in bfloat16 or float16)")
    return job
