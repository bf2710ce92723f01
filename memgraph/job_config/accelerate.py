"""accelerate's config YAML (``accelerate config`` / ``accelerate launch --config_file``; accelerate 1.15
commands/config/config_args.py ``ClusterConfig``): the world size, the distributed type with its FSDP or DeepSpeed
plugin, and the mixed precision. It names no model: pass one beside ``--config``.

- ``num_processes``: the total number of processes over all machines -> ``--nproc``;
- ``distributed_type``: ``MULTI_GPU`` -> ``ddp``; ``FSDP`` with ``fsdp_version`` 1 (accelerate's default) ->
  ``fsdp1`` (FSDP1 FullyShardedDataParallel) with ``fsdp_sharding_strategy`` (``FULL_SHARD``/1, ``SHARD_GRAD_OP``/2,
  ``NO_SHARD``/3, ``HYBRID_SHARD``/4 over ``num_machines`` nodes), ``fsdp_backward_prefetch`` (absent:
  accelerate's ``NO_PREFETCH``) and ``fsdp_use_orig_params`` (absent: False); FSDP2 (``fsdp_version: 2``) ->
  ``fsdp`` with ``fsdp_reshard_after_forward``;
  ``DEEPSPEED`` -> the ``deepspeed`` option with ``deepspeed_config_file``;
- ``mixed_precision``: ``bf16`` -> ``bf16-mixed``, ``fp16`` -> ``fp16-mixed``, ``no`` -> ``fp32``; under FSDP,
  accelerate's plugin then sets FSDP1's MixedPrecision or FSDP2's MixedPrecisionPolicy (model_spec/framework_defaults.py);
- ``fsdp_activation_checkpointing`` -> ``--gradient-checkpointing``.
"""

from __future__ import annotations

from memgraph.job_config import common
from memgraph.job_config.mapping import JobConfig
from memgraph.model_spec.options import FSDP1_SHARDING

FORMAT = "accelerate config"
# accelerate 1.15 utils/constants.py FSDP_SHARDING_STRATEGY (the 1-based index also accepted) and
# an absent fsdp_backward_prefetch is None in FullyShardedDataParallelPlugin (NO_PREFETCH)
SHARDING = {"1": "FULL_SHARD", "2": "SHARD_GRAD_OP", "3": "NO_SHARD", "4": "HYBRID_SHARD",
            **{name: name for name in FSDP1_SHARDING}}
PRECISION = {"bf16": "bf16-mixed", "fp16": "fp16-mixed", "no": "fp32"}


def read(doc: dict, text: str, file) -> JobConfig:
    job = JobConfig()
    where = str(file)
    kind = str(doc.get("distributed_type", "NO")).upper()
    nproc = common.positive(doc, "num_processes", where)
    strategy = None
    if kind == "MULTI_GPU":
        strategy = "ddp"
        job.take("distributed_type", kind, "strategy", "ddp", "DistributedDataParallel")
    elif kind == "FSDP":
        strategy = _fsdp(job, doc.get("fsdp_config") or {}, doc)
    elif kind == "DEEPSPEED":
        ds = doc.get("deepspeed_config") or {}
        path = ds.get("deepspeed_config_file") if isinstance(ds, dict) else None
        if path:
            common.take_deepspeed(job, "deepspeed_config.deepspeed_config_file", path)
            strategy = "deepspeed" if "deepspeed" in job.options else None
        else:
            job.ignore("deepspeed_config", {k: v for k, v in ds.items()} if isinstance(ds, dict) else ds,
                       "an inline DeepSpeed plugin: write it as ds_config.json and pass --deepspeed")
    elif kind not in ("NO", "MULTI_CPU"):
        job.ignore("distributed_type", kind, "not a GPU strategy memgraph models")
    if nproc is not None and nproc > 1:
        if strategy is not None:
            job.take("num_processes", nproc, "nproc", nproc)
        else:
            job.ignore("num_processes", nproc, "no strategy memgraph models was taken: one GPU is analysed")
    precision = doc.get("mixed_precision")
    if precision is not None:
        mapped = PRECISION.get(str(precision).lower())
        if mapped is None:
            job.ignore("mixed_precision", precision, "not modelled (fp8); pass --precision")
        else:
            job.take("mixed_precision", precision, "precision", mapped)
    return job


def _fsdp1(job: JobConfig, cfg: dict, doc: dict) -> str | None:
    """FSDP1 (``fsdp_version`` 1 or absent): ``--strategy fsdp1`` and its knobs."""
    given = str(cfg.get("fsdp_sharding_strategy", "FULL_SHARD")).upper()
    sharding = SHARDING.get(given)
    if sharding is None:
        job.ignore("fsdp_config.fsdp_sharding_strategy", given, "not a sharding strategy memgraph models")
        return None
    version = cfg.get("fsdp_version", "1, accelerate's default")
    job.take("distributed_type", "FSDP", "strategy", "fsdp1",
             f"fsdp_version {version}: FSDP1 FullyShardedDataParallel, flat parameters")
    machines = doc.get("num_machines")
    if sharding == "HYBRID_SHARD" and not (isinstance(machines, int) and machines > 1):
        job.ignore("fsdp_config.fsdp_sharding_strategy", given, "HYBRID_SHARD on one machine shards over its GPUs: "
                   "FULL_SHARD is traced (num_machines sets the node count)")
    elif sharding != "FULL_SHARD":
        job.take("fsdp_config.fsdp_sharding_strategy", given, "fsdp1_sharding", sharding)
        if sharding == "HYBRID_SHARD":
            job.take("num_machines", machines, "nnodes", machines)
    prefetch = str(cfg.get("fsdp_backward_prefetch", "NO_PREFETCH")).upper()
    if prefetch not in common.FSDP1_PREFETCH:
        job.ignore("fsdp_config.fsdp_backward_prefetch", prefetch, "not a BackwardPrefetch: BACKWARD_PRE is traced")
    elif common.FSDP1_PREFETCH[prefetch] != "BACKWARD_PRE":
        job.take("fsdp_config.fsdp_backward_prefetch", cfg.get("fsdp_backward_prefetch", "absent"),
                 "fsdp1_backward_prefetch", common.FSDP1_PREFETCH[prefetch], "accelerate's default" if
                 "fsdp_backward_prefetch" not in cfg else "")
    if common.truthy(cfg.get("fsdp_use_orig_params", False)):
        job.take("fsdp_config.fsdp_use_orig_params", cfg["fsdp_use_orig_params"], "fsdp1_use_orig_params", True)
    return "fsdp1"


def _fsdp(job: JobConfig, cfg: dict, doc: dict) -> str | None:
    if not isinstance(cfg, dict):
        cfg = {}
    version = str(cfg.get("fsdp_version", 1))
    if version == "2":
        reshard = cfg.get("fsdp_reshard_after_forward", True)
        strategy = "fsdp"
        job.take("distributed_type", "FSDP", "strategy", "fsdp", "FSDP2 fully_shard per transformer block")
        if not common.truthy(reshard):
            job.take("fsdp_config.fsdp_reshard_after_forward", reshard, "no_reshard_after_forward", True)
    else:
        strategy = _fsdp1(job, cfg, doc)
        if strategy is None:
            return None
    if cfg.get("fsdp_activation_checkpointing") is not None:
        job.take("fsdp_config.fsdp_activation_checkpointing", cfg["fsdp_activation_checkpointing"],
                 "gradient_checkpointing", common.truthy(cfg["fsdp_activation_checkpointing"]))
    if common.truthy(cfg.get("fsdp_offload_params", False)):
        job.ignore("fsdp_config.fsdp_offload_params", True, "CPU offload is not modelled: the prediction keeps "
                   "parameters on the GPU")
    return strategy
