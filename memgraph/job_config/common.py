"""Field mappings more than one format shares (Trainer-derived fields, LoRA targets, packing, FSDP, DeepSpeed)."""

from __future__ import annotations

import json

from memgraph.errors import MemgraphError
from memgraph.job_config.mapping import JobConfig, has_option, positive  # noqa: F401  (positive: re-exported)
from memgraph.model_spec.options import FSDP1_SHARDING, compile_refusal

ATTENTION = {"flash_attention_2": "flash_attention_2", "sdpa": "sdpa", "eager": "eager"}


def take_model(job: JobConfig, doc: dict, keys: tuple[str, ...]) -> None:
    for key in keys:
        value = doc.get(key)
        if isinstance(value, str) and value.strip():
            job.model, job.model_key = value.strip(), key
            return


def take_int(job: JobConfig, doc: dict, key: str, option: str, where: str) -> int | None:
    value = positive(doc, key, where)
    if value is not None:
        job.take(key, value, option, value)
    return value


def number(value, key: str, kind=float):
    """``value`` as a float (or ``kind``), or a one-line error naming the field."""
    if isinstance(value, bool):
        raise MemgraphError(f"--config: {key} {value!r} is not a number: fix the file")
    try:
        out = kind(value)
    except (TypeError, ValueError, OverflowError):
        raise MemgraphError(f"--config: {key} {value!r} is not a number: fix the file") from None
    if kind is int and out != value:
        raise MemgraphError(f"--config: {key} {value!r} is not a whole number: fix the file")
    return out


def truthy(value) -> bool:
    """YAML/JSON booleans as the frameworks read them (axolotl's ``bf16: auto`` means on where supported)."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "auto", "yes", "1")
    return bool(value)


def take_precision_hf(job: JobConfig, doc: dict, quantized: bool, dtype_keys=("torch_dtype", "dtype")) -> None:
    """``torch_dtype`` (the weights' dtype, transformers' ``from_pretrained``) and the Trainer's ``bf16``/``fp16``
    (autocast): bfloat16 weights train as ``bf16``; float32 weights with ``bf16: true`` as ``bf16-mixed``."""
    dtype_key = next((k for k in dtype_keys if doc.get(k) is not None), None)
    dtype = str(doc.get(dtype_key)).lower() if dtype_key else None
    if dtype in ("bfloat16", "bf16"):
        job.take(dtype_key, doc[dtype_key], "precision", "bf16",
                 "bfloat16 weights; the Trainer's bf16 autocast over them is not modelled apart")
    elif dtype in ("float16", "fp16"):
        job.take(dtype_key, doc[dtype_key], "precision", "fp16", "float16 weights")
    elif truthy(doc.get("bf16")):
        if quantized:  # QLoRA computes in bfloat16 (bnb_4bit_compute_dtype): memgraph's bf16 QLoRA
            job.take("bf16", doc["bf16"], "precision", "bf16", "a quantised model computes in bfloat16")
        else:
            job.take("bf16", doc["bf16"], "precision", "bf16-mixed", "float32 weights under bf16 autocast")
    elif truthy(doc.get("fp16")):
        job.take("fp16", doc["fp16"], "precision", "fp16-mixed", "float32 weights, fp16 autocast + GradScaler")
    if dtype is not None and dtype not in ("bfloat16", "bf16", "float16", "fp16", "float32", "fp32"):
        job.ignore(dtype_key, doc[dtype_key], "the checkpoint's own dtype is not known offline; pass --precision")


def take_checkpointing(job: JobConfig, doc: dict, keys: tuple[str, ...], kwargs_keys: tuple[str, ...]) -> None:
    key = next((k for k in keys if doc.get(k) is not None), None)
    if key is None:
        return
    on = truthy(doc[key])
    job.take(key, doc[key], "gradient_checkpointing", on)
    if not on:
        return
    kw_key = next((k for k in kwargs_keys if doc.get(k) is not None), None)
    kwargs = doc.get(kw_key) if kw_key else None
    if isinstance(kwargs, str) and kwargs.strip().startswith("{"):  # the Trainer reads a JSON string too
        try:
            kwargs = json.loads(kwargs)
        except json.JSONDecodeError:
            raise MemgraphError(f"--config: {kw_key} {kwargs!r} is not a JSON object: fix the file") from None
    if isinstance(kwargs, dict) and "use_reentrant" in kwargs:
        reentrant = truthy(kwargs["use_reentrant"])
        job.take(f"{kw_key}.use_reentrant", kwargs["use_reentrant"], "checkpoint_impl",
                 "reentrant" if reentrant else "non-reentrant")


def take_attention(job: JobConfig, key: str, value) -> None:
    if value is None:
        return
    mapped = ATTENTION.get(str(value))
    if mapped is None:
        job.ignore(key, value, "an attention implementation memgraph does not trace; pass --attn")
    else:
        job.take(key, value, "attn_implementation", mapped)


def take_lora_targets(job: JobConfig, key: str, value) -> None:
    if value in (None, [], ""):
        return
    if isinstance(value, str):
        names = "all-linear" if value.strip() in ("all-linear", "all") else value.strip()
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        names = ",".join(v.strip() for v in value)
    else:
        raise MemgraphError(f"--config: {key} {value!r} is not a list of module names: fix the file")
    job.take(key, value, "lora_targets", names)


def take_packing(job: JobConfig, batch: int, length: int | None, length_key: str | None, *, packing=None,
                 padding_free=None, flatten: bool = True, how: str = "") -> None:
    """Tokens per step: ``length`` per sample, padded to the longest (the longest possible is assumed) or packed
    full; padding-free collators (``flatten``) concatenate the batch into one row of ``batch x length`` tokens."""
    if length is None:
        return
    packed, free = truthy(packing), truthy(padding_free)
    if (packed or free) and flatten:
        which = "padding_free" if free else "packing"
        job.take(length_key, length, "seq_len", batch * length,
                 f"{which}: {how} concatenates the {batch} samples of a step into one row of {batch} x {length} "
                 "tokens with position_ids")
        job.options["batch_size"] = 1
        job.taken.append(f"{which} true -> --batch-size 1 (the one padding-free row)")
    elif packed:
        job.take(length_key, length, "seq_len", length, f"packing: {how} fills every row to {length} tokens")
    else:
        job.take(length_key, length, "seq_len", length,
                 "samples padded to the longest in the batch: the longest allowed is assumed")


# accelerate 1.15 utils/constants.py FSDP_BACKWARD_PREFETCH names -> --fsdp1-backward-prefetch
FSDP1_PREFETCH = {"BACKWARD_PRE": "BACKWARD_PRE", "BACKWARD_POST": "BACKWARD_POST", "NO_PREFETCH": "NONE"}
FSDP_OPTIONS = {"full_shard": "fsdp", "shard_grad_op": "zero2", "hybrid_shard": "fsdp"}


def take_fsdp_trainer(job: JobConfig, doc: dict) -> None:
    """``TrainingArguments.fsdp`` (``"full_shard auto_wrap"`` or a list) and ``fsdp_config``."""
    value = doc.get("fsdp")
    if value in (None, "", False, []):
        return
    words = value.split() if isinstance(value, str) else [str(v) for v in value] if isinstance(value, list) else []
    cfg = doc.get("fsdp_config") or {}
    cfg = {k.removeprefix("fsdp_"): v for k, v in cfg.items()} if isinstance(cfg, dict) else {}
    if str(cfg.get("version", 2)) == "1":
        _take_fsdp1_trainer(job, value, words, cfg)
        return
    strategy = next((FSDP_OPTIONS[w] for w in words if w in FSDP_OPTIONS), "fsdp" if value is True else None)
    if strategy is None:
        job.ignore("fsdp", value, "no sharding strategy memgraph models (full_shard, shard_grad_op)")
        return
    job.take("fsdp", value, "strategy", strategy, "FSDP2 fully_shard per transformer block")
    if "offload" in words:
        job.ignore("fsdp offload", True, "CPU offload of parameters is not modelled: the prediction is without it")
    if "hybrid_shard" in words:
        job.ignore("fsdp hybrid_shard", True, "the node count is not in the file: pass --nnodes")
    if cfg:  # the Trainer strips the fsdp_ prefix the same way
        if cfg.get("activation_checkpointing") is not None:
            job.take("fsdp_config.activation_checkpointing", cfg["activation_checkpointing"],
                     "gradient_checkpointing", truthy(cfg["activation_checkpointing"]))
        if cfg.get("reshard_after_forward") is not None and not truthy(cfg["reshard_after_forward"]) \
                and strategy == "fsdp":
            job.take("fsdp_config.reshard_after_forward", cfg["reshard_after_forward"], "no_reshard_after_forward", True)


def _take_fsdp1_trainer(job: JobConfig, value, words: list[str], cfg: dict) -> None:
    """``fsdp_config.version`` 1: FSDP1, as transformers 5.23 training_args.py ``_process_fsdp_args`` hands it to
    accelerate: the sharding strategy from the ``fsdp`` words (or ``reshard_after_forward``), ``backward_prefetch``
    default ``NO_PREFETCH``, ``use_orig_params`` default true."""
    sharding = next((w.upper() for w in words if w.upper() in FSDP1_SHARDING),
                    str(cfg.get("reshard_after_forward", "full_shard")).upper())
    if sharding not in FSDP1_SHARDING:
        job.ignore("fsdp", value, "no FSDP1 sharding strategy memgraph models")
        return
    job.take("fsdp_config.version", cfg["version"], "strategy", "fsdp1", "FSDP1 FullyShardedDataParallel, flat parameters")
    if sharding == "HYBRID_SHARD":
        job.ignore("fsdp hybrid_shard", True, "the node count is not in the file: FULL_SHARD is traced")
    elif sharding != "FULL_SHARD":
        job.take("fsdp", value, "fsdp1_sharding", sharding)
    prefetch = str(cfg.get("backward_prefetch", "NO_PREFETCH")).upper()
    mapped = FSDP1_PREFETCH.get(prefetch)
    if mapped is None:
        job.ignore("fsdp_config.backward_prefetch", prefetch, "not a BackwardPrefetch: BACKWARD_PRE is traced")
    elif mapped != "BACKWARD_PRE":
        job.take("fsdp_config.backward_prefetch", cfg.get("backward_prefetch", "absent"), "fsdp1_backward_prefetch",
                 mapped, "" if "backward_prefetch" in cfg else "the Trainer's default NO_PREFETCH")
    if truthy(cfg.get("use_orig_params", True)):
        job.take("fsdp_config.use_orig_params", cfg.get("use_orig_params", "absent"), "fsdp1_use_orig_params", True,
                 "" if "use_orig_params" in cfg else "the Trainer's default true")
    if "offload" in words or truthy(cfg.get("cpu_offload", False)):
        job.ignore("fsdp offload", True, "CPU offload of parameters is not modelled: the prediction is without it")
    if cfg.get("activation_checkpointing") is not None:
        job.take("fsdp_config.activation_checkpointing", cfg["activation_checkpointing"],
                 "gradient_checkpointing", truthy(cfg["activation_checkpointing"]))


def take_deepspeed(job: JobConfig, key: str, value) -> None:
    """A DeepSpeed config path: the ``deepspeed`` option (the DeepSpeed engine is modelled there)."""
    if value in (None, "", False):
        return
    if isinstance(value, dict):
        job.ignore(key, "{...}", "an inline DeepSpeed config: save it as ds_config.json and pass --deepspeed")
    elif has_option("deepspeed"):
        job.take(key, value, "deepspeed", str(value))
    else:
        job.ignore(key, value, "DeepSpeed's engine is not in this memgraph: the prediction is without it")


# torch.compile(mode=...) values of a config and what memgraph models of each (torch 2.13 torch/_inductor/__init__.py
# list_mode_options: "reduce-overhead" and "max-autotune" set triton.cudagraphs, whose private memory pool memgraph
# does not model)
COMPILE_MODES = {None: "default", "default": "default", "max-autotune-no-cudagraphs": "max-autotune-no-cudagraphs"}
CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def take_compile(job: JobConfig, key: str, value, *, mode=None, blocks: bool = False, loss: bool = False,
                 how: str = "") -> None:
    """A config's request for torch.compile, taken as ``--compile`` (``mode``: ``torch.compile``'s; ``blocks``: each
    repeated block compiled on its own, ``--compile-blocks``; ``loss``: ``--compile-loss``) unless memgraph does not
    model that compile with the file's other options: then ignored, saying why."""
    if mode in CUDA_GRAPH_MODES:
        job.ignore(key, value, f"torch.compile mode {mode} captures CUDA graphs, whose private memory pool is not "
                               "modelled: the prediction is without torch.compile")
        return
    if mode not in COMPILE_MODES:
        job.ignore(key, value, f"torch.compile mode {mode!r} is not one memgraph models: the prediction is without "
                               "torch.compile")
        return
    wanted = {"compile": True, "compile_mode": COMPILE_MODES[mode], "compile_blocks": blocks, "compile_loss": loss}
    refused = compile_refusal({**job.options, **wanted})
    if refused:
        job.ignore(key, value, f"{refused.split(':')[0]}; the prediction is without torch.compile")
        return
    job.take(key, value, "compile", True, how)
    if COMPILE_MODES[mode] != "default":
        job.take(key, value, "compile_mode", COMPILE_MODES[mode])
    if blocks:
        job.take(key, value, "compile_blocks", True, "each transformer layer compiled on its own")
    if loss:
        job.take(key, value, "compile_loss", True)


def take_compile_trainer(job: JobConfig, doc: dict) -> None:
    """``TrainingArguments``' ``torch_compile``, ``torch_compile_backend``, ``torch_compile_mode``: either of the last
    two turns it on (transformers 5.23 training_args.py ``__post_init__``); the Trainer hands them to accelerate,
    which compiles the whole model (accelerate 1.15 ``Accelerator.prepare_model``: ``torch.compile(model,
    **dynamo_plugin.to_kwargs())``), its loss inside the forward."""
    backend, mode = doc.get("torch_compile_backend"), doc.get("torch_compile_mode")
    on = truthy(doc.get("torch_compile")) or backend is not None or mode is not None
    if not on:
        return
    key = next(k for k in ("torch_compile", "torch_compile_mode", "torch_compile_backend") if doc.get(k) is not None)
    if isinstance(doc.get("torch_compile"), str) and doc["torch_compile"].strip().lower() == "auto":
        job.ignore(key, doc[key], "auto: the framework decides from the installed torch; pass --compile to model it")
        return
    if backend not in (None, "inductor"):
        job.ignore(key, doc[key], f"backend {backend!r}: memgraph models Inductor only; the prediction is without "
                                  "torch.compile")
        return
    take_compile(job, key, doc[key], mode=mode, how="the Trainer compiles the whole model through accelerate")
