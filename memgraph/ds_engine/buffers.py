"""The buffers DeepSpeed's ZeRO optimizers keep, by name: the report's list and the recorder's roles.

Read from DeepSpeed 0.19.8: deepspeed/runtime/zero/stage_1_and_2.py ``DeepSpeedZeroOptimizer`` (ZeRO-1/2),
zero/stage3.py ``DeepSpeedZeroOptimizer_Stage3`` and runtime/bf16_optimizer.py ``BF16_Optimizer`` (bf16 with
ZeRO-1 and fp32 gradient accumulation, engine.py ``_do_optimizer_sanity_check``). An attribute a later version
renames is missing from the list (no bytes are invented); the traced figures do not depend on this module.
"""

from __future__ import annotations

import torch

from memgraph.trace.record.event_log import Role
from memgraph.units import human_bytes

# attribute -> (what it is, its role in memgraph's categories, or None: left as traced)
BUFFERS = {
    # ZeRO-1/2 (stage_1_and_2.py)
    "bit16_groups_flat": ("16-bit flat parameter groups (the model's weights are views of them, padded to a "
                          "multiple of the world size)", None),
    "single_partition_of_fp32_groups": ("fp32 master weights of this rank's partition", Role.OPTIMIZER_STATE),
    "ipg_buffer": ("contiguous gradient bucket(s): reduce_bucket_size elements each, two with overlap_comm",
                   Role.GRADIENT),
    "grads_in_partition": ("ZeRO-2 contiguous gradient partition", Role.GRADIENT),
    "temp_grad_buffer_for_cpu_offload": ("16-bit staging buffer of the largest parameter's gradient "
                                         "(offload_optimizer)", None),
    # BF16_Optimizer (bf16_optimizer.py)
    "bf16_groups_flat": ("bf16 flat parameter groups (the model's weights are views of them)", None),
    "fp32_groups_flat_partition": ("fp32 master weights of this rank's partition", Role.OPTIMIZER_STATE),
    "fp32_groups_gradients_flat": ("fp32 gradient-accumulation buffer of every parameter, on every rank",
                                   Role.GRADIENT),
    # ZeRO-3 (stage3.py)
    "lp_param_buffer": ("16-bit parameter partitions, defragmented into one buffer", None),
    "fp32_partitioned_groups_flat": ("fp32 master weights of this rank's partition", Role.OPTIMIZER_STATE),
    "grad_partitions_flat_buffer": ("fp32/16-bit gradient partitions of this rank", Role.GRADIENT),
    "param_groups_fp16_flat_cpu_memory": ("16-bit parameter partitions of this rank (offload_param)", None),
    # IPGBucketZ3.buffer per communication dtype: torch.empty(reduce_bucket_size) with contiguous_gradients (left
    # as traced: naming its role would move bytes between categories of existing reports)
    "ipg_buckets": ("reduce bucket: reduce_bucket_size elements per communication dtype", None),
}


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    if isinstance(getattr(value, "buffer", None), torch.Tensor):  # ZeRO-3's IPGBucketZ3
        return [value.buffer]
    return []


def _unique_storage_bytes(tensors: list[torch.Tensor]) -> int:
    seen, total = set(), 0
    for t in tensors:
        key = (t.device.type, id(t.untyped_storage()))
        if key not in seen and t.untyped_storage().nbytes() > 0:
            seen.add(key)
            total += t.untyped_storage().nbytes()
    return total


def inventory(engine, is_host=lambda t: False) -> list[tuple[str, str, int]]:
    """(attribute, what it is, bytes) of each buffer this rank's DeepSpeed optimizer holds now; ``is_host(t)``: the
    tensor is host memory (optimizer offload, ds_engine/offload.py), said in the row."""
    optimizer = getattr(engine, "optimizer", None)
    rows = []
    for name, (what, _) in BUFFERS.items():
        tensors = _tensors(getattr(optimizer, name, None))
        nbytes = _unique_storage_bytes(tensors)
        if nbytes:
            host = ", in host memory" if all(is_host(t) for t in tensors) else ""
            rows.append((name.rsplit("__", 1)[-1], what + host, nbytes))
    persistent = [p for p in getattr(engine.module, "parameters", lambda: [])() if getattr(p, "ds_persist", False)]
    if persistent:
        rows.append(("ds_persist parameters", f"{len(persistent)} parameters below "
                     "stage3_param_persistence_threshold kept whole on every rank",
                     sum(p.ds_numel * p.element_size() for p in persistent)))
    return rows


def buffer_notes(engine, is_host=lambda t: False) -> list[str]:
    rows = inventory(engine, is_host)
    if not rows:
        return []
    return ["DeepSpeed buffers of this rank at the end of the run: "
            + "; ".join(f"{name} {human_bytes(nbytes)} ({what})" for name, what, nbytes in rows)]


def mark_roles(recorder, engine) -> None:
    """Name the DeepSpeed buffers that are gradients or optimizer state for the recorder (by their role)."""
    optimizer = getattr(engine, "optimizer", None)
    for name, (_, role) in BUFFERS.items():
        if role is None:
            continue
        for t in _tensors(getattr(optimizer, name, None)):
            if t.untyped_storage().nbytes() > 0 and recorder.tracks(t):
                recorder.mark_role(t, role, "DeepSpeed")


__all__ = ["BUFFERS", "buffer_notes", "inventory", "mark_roles"]
