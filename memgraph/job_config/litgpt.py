"""LitGPT's YAML (Lightning-AI/litgpt config_hub/finetune/; ``litgpt finetune_lora --config file``).

- ``checkpoint_dir`` (``checkpoints/<org>/<name>``, as ``litgpt download`` writes it): the folder if it holds a
  transformers config.json here, else its last two parts as the Hub id; memgraph traces transformers' class of
  that model, not LitGPT's ``GPT`` (same weights; LitGPT fuses q, k and v in one linear);
- ``precision``: ``bf16-true`` -> ``bf16``, ``bf16-mixed``, ``32-true`` -> ``fp32``, ``16-true`` -> ``fp16``,
  ``16-mixed`` -> ``fp16-mixed``; ``quantize``: ``bnb.nf4`` -> ``nf4``, ``bnb.nf4-dq`` -> ``4bit``, ``bnb.int8`` ->
  ``8bit``;
- ``lora_r``, ``lora_alpha``, ``lora_dropout`` and ``lora_query``/``key``/``value``/``projection``/``mlp``/``head``
  (transformers' q_proj, k_proj, v_proj, o_proj, gate/up/down_proj, lm_head); LitGPT's adapters are in the model's
  dtype (``--lora-dtype model``) and it does not run PEFT's k-bit preparation;
- ``train.micro_batch_size`` -> ``--batch-size``; ``train.global_batch_size / (micro_batch_size x devices)`` ->
  ``--grad-accum``; ``train.max_seq_length`` -> ``--seq-len``; ``devices`` > 1 -> FSDP over them (LitGPT's
  finetune scripts use ``FSDPStrategy`` then); ``optimizer`` (``torch.optim.AdamW``, PyTorch's default
  implementation).
"""

from __future__ import annotations

from pathlib import Path

from memgraph.job_config import common
from memgraph.job_config.mapping import JobConfig

FORMAT = "LitGPT"
PRECISION = {"bf16-true": "bf16", "bf16-mixed": "bf16-mixed", "32-true": "fp32", "32": "fp32", "16-true": "fp16",
             "16-mixed": "fp16-mixed"}
QUANTIZE = {"bnb.nf4": "nf4", "bnb.nf4-dq": "4bit", "bnb.fp4": "nf4", "bnb.fp4-dq": "4bit", "bnb.int8": "8bit"}
TARGETS = (("lora_query", ("q_proj",)), ("lora_key", ("k_proj",)), ("lora_value", ("v_proj",)),
           ("lora_projection", ("o_proj",)), ("lora_mlp", ("gate_proj", "up_proj", "down_proj")),
           ("lora_head", ("lm_head",)))


def read(doc: dict, text: str, file) -> JobConfig:
    job = JobConfig()
    where = str(file)
    _model(job, doc.get("checkpoint_dir"))
    # litgpt/finetune/lora.py fit(): `logits = model(input_ids)`, `loss = ...`, `fabric.backward(loss / accum)`:
    # the names are rebound only when the next micro-batch's forward returns, so its outputs live through the step
    job.take("(LitGPT's training loop)", "finetune/lora.py", "loop", "plain", "logits held until the next forward")
    train = doc.get("train") if isinstance(doc.get("train"), dict) else {}
    micro = common.positive(train, "micro_batch_size", where)
    if micro is not None:
        job.take("train.micro_batch_size", micro, "batch_size", micro)
    devices = doc.get("devices", 1)
    devices = devices if isinstance(devices, int) and devices > 0 else 1
    total = common.positive(train, "global_batch_size", where)
    if micro and total and total // (micro * devices) > 1:
        job.take("train.global_batch_size", total, "grad_accum", total // (micro * devices),
                 f"{total} / ({micro} x {devices} devices)")
    length = common.positive(train, "max_seq_length", where)
    if length is not None:
        job.take("train.max_seq_length", length, "seq_len", length,
                 "samples padded to the longest in the batch: the longest allowed is assumed")
    precision = doc.get("precision")
    if precision is not None:
        mapped = PRECISION.get(str(precision))
        if mapped is None:
            job.ignore("precision", precision, "not a precision memgraph models")
        else:
            job.take("precision", precision, "precision", mapped)
    if devices > 1:
        job.take("devices", devices, "strategy", "fsdp", "LitGPT's FSDPStrategy")
        job.take("devices", devices, "nproc", devices)
    lora = isinstance(doc.get("lora_r"), int)
    if lora:
        job.take("lora_r", doc["lora_r"], "lora_rank", doc["lora_r"])
        if doc.get("lora_alpha") is not None:
            job.take("lora_alpha", doc["lora_alpha"], "lora_alpha", common.number(doc["lora_alpha"], "lora_alpha", int))
        if doc.get("lora_dropout"):
            job.take("lora_dropout", doc["lora_dropout"], "lora_dropout", common.number(doc["lora_dropout"], "lora_dropout"))
        names = [n for key, modules in TARGETS if common.truthy(doc.get(key)) for n in modules]
        if names:
            job.take("lora_query/key/value/projection/mlp/head", ",".join(names), "lora_targets", ",".join(names))
        if PRECISION.get(str(precision)) in ("bf16", "fp16"):
            job.take("precision", precision, "lora_dtype", "model", "LitGPT's adapters are in the model's dtype")
    quantize = doc.get("quantize")
    if quantize:
        mapped = QUANTIZE.get(str(quantize))
        if mapped is None or not lora:
            job.ignore("quantize", quantize, "memgraph models bitsandbytes quantisation under LoRA only")
        else:
            job.take("quantize", quantize, "quantize", mapped)
            job.take("quantize", quantize, "no_kbit_preparation", True, "LitGPT does not run PEFT's preparation")
    opt = doc.get("optimizer")
    name = opt.get("class_path") if isinstance(opt, dict) else opt
    if name:
        short = str(name).rsplit(".", 1)[-1]
        if short in ("AdamW", "Adam"):
            job.take("optimizer", name, "optimizer", short.lower())
            job.take("optimizer", name, "optimizer_impl", "foreach", "PyTorch's default on CUDA")
        elif short == "SGD":
            job.take("optimizer", name, "optimizer", "sgd")
        else:
            job.ignore("optimizer", name, "an optimizer memgraph does not model")
    return job


def _model(job: JobConfig, folder) -> None:
    if not isinstance(folder, str) or not folder.strip():
        return
    path = Path(folder)
    if (path / "config.json").is_file():
        job.model, job.model_key = str(path), "checkpoint_dir"
    elif len(path.parts) >= 2:
        job.model, job.model_key = "/".join(path.parts[-2:]), "checkpoint_dir"
