"""torchtune recipe YAML (pytorch/torchtune recipes/configs/; ``tune run <recipe> --config <file>``).

- the model: the Hub id of the ``tune download <id>`` line every recipe carries in its header comment (the
  checkpoint it fine-tunes), else ``checkpointer.checkpoint_dir`` when that folder exists here;
- ``batch_size``, ``gradient_accumulation_steps``; ``tokenizer.max_seq_len`` -> ``--seq-len`` (null: the
  dataset's own lengths; pass ``--seq-len``); ``dataset.packed`` fills every row to it;
- ``dtype: bf16`` -> ``--precision bf16`` (torchtune trains in pure bfloat16; its LoRA adapters are made in the
  model's dtype: ``--lora-dtype model``), ``fp32`` -> ``fp32``;
- ``model._component_`` ``lora_*`` / ``qlora_*`` with ``lora_rank``, ``lora_alpha``, ``lora_dropout``,
  ``lora_attn_modules`` (q_proj, k_proj, v_proj, output_proj -> o_proj), ``apply_lora_to_mlp`` (w1, w2, w3 ->
  gate_proj, down_proj, up_proj) and ``apply_lora_to_output`` (lm_head), in transformers' module names;
  ``qlora_*`` stores the base as torchao NF4 (blocks of 64, scalers double-quantised in blocks of 256): traced as
  ``--quantize 4bit``;
- ``enable_activation_checkpointing`` (torchtune wraps each layer non-reentrant), ``enable_activation_offloading``,
  ``optimizer_in_bwd``, ``optimizer._component_`` (``fused``), ``loss._component_`` (chunked output losses ->
  ``--loss chunked-ce``);
- ``compile`` -> ``--compile --compile-blocks`` (each layer compiled on its own), with ``--compile-loss`` for a
  chunked loss; every torchtune job runs with ``--no-kv-cache`` (its models build no cache in training).
"""

from __future__ import annotations

import re
from pathlib import Path

from memgraph.job_config import common
from memgraph.job_config.mapping import JobConfig

FORMAT = "torchtune recipe"
TUNE_DOWNLOAD = re.compile(r"tune download\s+([A-Za-z0-9][\w.-]*/[\w.-]+)")
ATTN_NAMES = {"q_proj": "q_proj", "k_proj": "k_proj", "v_proj": "v_proj", "output_proj": "o_proj"}
OPTIMIZERS = {"torch.optim.AdamW": "adamw", "torch.optim.Adam": "adam", "torch.optim.SGD": "sgd",
              "bitsandbytes.optim.PagedAdamW8bit": "paged-adamw8bit", "bitsandbytes.optim.AdamW8bit": "adamw8bit",
              "bitsandbytes.optim.Adam8bit": "adam8bit"}
CHUNKED_LOSSES = ("CEWithChunkedOutputLoss", "LinearCrossEntropyLoss")


def read(doc: dict, text: str, file) -> JobConfig:
    job = JobConfig()
    where = str(file)
    _model(job, doc, text)
    batch = common.take_int(job, doc, "batch_size", "batch_size", where) or 1
    common.take_int(job, doc, "gradient_accumulation_steps", "grad_accum", where)
    tokenizer = doc.get("tokenizer") or {}
    length = common.positive(tokenizer, "max_seq_len", where) if isinstance(tokenizer, dict) else None
    packed = isinstance(doc.get("dataset"), dict) and common.truthy(doc["dataset"].get("packed"))
    if length is None:
        job.ignore("tokenizer.max_seq_len", None, "the dataset's own lengths: pass --seq-len")
    common.take_packing(job, batch, length, "tokenizer.max_seq_len", packing=packed, flatten=False,
                        how="torchtune's PackedDataset")
    dtype = str(doc.get("dtype", "fp32")).lower()
    if dtype in ("bf16", "bfloat16"):
        job.take("dtype", doc["dtype"], "precision", "bf16", "pure bfloat16 training")
    elif dtype in ("fp32", "float32"):
        job.take("dtype", doc.get("dtype", "fp32"), "precision", "fp32")
    else:
        job.ignore("dtype", doc.get("dtype"), "not a dtype torchtune trains in")
    _lora(job, doc.get("model") or {}, dtype)
    if doc.get("enable_activation_checkpointing") is not None:
        on = common.truthy(doc["enable_activation_checkpointing"])
        job.take("enable_activation_checkpointing", doc["enable_activation_checkpointing"], "gradient_checkpointing", on)
        if on:
            job.take("enable_activation_checkpointing", doc["enable_activation_checkpointing"], "checkpoint_impl",
                     "non-reentrant", "torchtune's checkpoint_wrapper")
    if common.truthy(doc.get("enable_activation_offloading")):
        job.take("enable_activation_offloading", True, "activation_offload", True,
                 "torchtune's OffloadActivations, traced as save_on_cpu")
    if common.truthy(doc.get("optimizer_in_bwd")):
        job.take("optimizer_in_bwd", True, "optimizer_in_backward", True)
    _optimizer(job, doc.get("optimizer") or {})
    loss = (doc.get("loss") or {}).get("_component_", "") if isinstance(doc.get("loss"), dict) else ""
    if loss.rsplit(".", 1)[-1] in CHUNKED_LOSSES:
        job.take("loss._component_", loss, "loss", "chunked-ce",
                 "the output projection and cross-entropy in 8 chunks, each upcast on its own")
    job.take("model._component_", (doc.get("model") or {}).get("_component_", "(absent)")
             if isinstance(doc.get("model"), dict) else "(absent)", "no_kv_cache", True,
             "torchtune's decoders keep no key/value cache in training")
    if common.truthy(doc.get("compile")):
        # torchtune/training/_compile.py: compile_model compiles each TransformerSelfAttentionLayer on its own (the
        # embedding, final norm and output projection eager), compile_loss the loss module (of a chunked loss only
        # compute_cross_entropy; a transformers model's own loss is inside its eager forward here)
        common.take_compile(job, "compile", doc["compile"], blocks=True, loss=job.options.get("loss") == "chunked-ce",
                            how="torchtune's compile_model and compile_loss")
    return job


def _model(job: JobConfig, doc: dict, text: str) -> None:
    checkpointer = doc.get("checkpointer") if isinstance(doc.get("checkpointer"), dict) else {}
    folder = checkpointer.get("checkpoint_dir")
    if isinstance(folder, str) and (Path(folder) / "config.json").is_file():
        job.model, job.model_key = folder, "checkpointer.checkpoint_dir"
        return
    m = TUNE_DOWNLOAD.search(text)
    if m:
        job.model, job.model_key = m.group(1), "tune download (the recipe's header)"


def _lora(job: JobConfig, model: dict, dtype: str) -> None:
    component = str(model.get("_component_", ""))
    name = component.rsplit(".", 1)[-1]
    if not (name.startswith("lora_") or name.startswith("qlora_")):
        return
    rank = model.get("lora_rank")
    if isinstance(rank, int) and rank > 0:
        job.take("model.lora_rank", rank, "lora_rank", rank)
    if model.get("lora_alpha") is not None:
        job.take("model.lora_alpha", model["lora_alpha"], "lora_alpha", common.number(model["lora_alpha"], "model.lora_alpha", int))
    if model.get("lora_dropout"):
        job.take("model.lora_dropout", model["lora_dropout"], "lora_dropout", common.number(model["lora_dropout"], "model.lora_dropout"))
    targets = [ATTN_NAMES.get(m, m) for m in model.get("lora_attn_modules") or []]
    if common.truthy(model.get("apply_lora_to_mlp")):
        targets += ["gate_proj", "up_proj", "down_proj"]
    if common.truthy(model.get("apply_lora_to_output")):
        targets.append("lm_head")
    if targets:
        job.take("model.lora_attn_modules/apply_lora_to_mlp", ",".join(targets), "lora_targets", ",".join(targets),
                 "transformers' module names")
    if dtype in ("bf16", "bfloat16"):
        job.take("dtype", dtype, "lora_dtype", "model", "torchtune makes the adapters in the model's dtype")
    if name.startswith("qlora_"):
        job.take("model._component_", component, "quantize", "4bit",
                 "torchao NF4, blocks of 64, double-quantised scalers: traced as bitsandbytes' NF4")
        job.take("model._component_", component, "no_kbit_preparation", True,
                 "torchtune does not run PEFT's prepare_model_for_kbit_training")


def _optimizer(job: JobConfig, opt: dict) -> None:
    component = opt.get("_component_") if isinstance(opt, dict) else None
    if not component:
        return
    mapped = OPTIMIZERS.get(component)
    if mapped is None:
        job.ignore("optimizer._component_", component, "an optimizer memgraph does not model")
        return
    job.take("optimizer._component_", component, "optimizer", mapped)
    if mapped in ("adamw", "adam"):
        impl = "fused" if common.truthy(opt.get("fused")) else "foreach"
        job.take("optimizer.fused", opt.get("fused", False), "optimizer_impl", impl)
