"""Multi-GPU training, per rank: PyTorch's own DDP and FSDP2 run on meta over the fake process group.

``--nproc N --strategy ddp|fsdp`` initialises ``torch.distributed`` with PyTorch's fake backend
(``dist.init_process_group("fake", rank=0, world_size=N)``: collectives return at once, moving no
data) and wraps the model the way a user does, so the trace holds what rank 0 allocates:

* ``ddp``: ``DistributedDataParallel(model, gradient_as_bucket_view=...)``. The C++ ``Reducer``
  allocates its gradient buckets with ``at::empty`` on the parameters' device, which reaches the
  recorder on meta. torch 2.13 puts every parameter in one bucket for the first iteration
  (torch/nn/parallel/distributed.py, ``_BucketCapacityConfig.compute_bucket_size_limits``: ``sys.maxsize``
  unless ``find_unused_parameters``) and rebuilds the buckets in the order gradients became ready at
  the second forward (``Reducer::rebuild_buckets``: first bucket capped at
  ``dist._DEFAULT_FIRST_BUCKET_BYTES`` = 1 MiB, the others at ``bucket_cap_mb`` = 25 MiB). The buckets'
  all-reduce runs as PyTorch's default hook does (:func:`fake_group_allreduce_hook`).
* ``fsdp``: FSDP2 ``fully_shard`` on every transformer block (the model's ``_no_split_modules``
  classes, as transformers' FSDP integration picks them; else each child of the root that holds
  parameters), then on the root. Parameters, gradients and optimizer state are DTensors holding
  this rank's padded shard; each block's parameters are all-gathered into one flat buffer
  (``_fsdp_collectives.foreach_all_gather``), copied out, and freed after forward
  (``reshard_after_forward``) or kept to backward; gradients are reduce-scattered from a full-size
  buffer (``foreach_reduce``). FSDP2 frees and re-allocates the gathered parameters by resizing
  their storages, which the recorder is told of (:meth:`DistributedRecorder.storage_freed`).

* ``fsdp1``: torch's FSDP1 ``FullyShardedDataParallel`` (flat parameters), memgraph/trace/parallel/fsdp1.py; its
  flat parameters' storage resizes are told to the recorder as FSDP2's are.

``zero2``/``zero3`` are ``fsdp`` with ``reshard_after_forward`` False/True (:data:`ZERO_MAPPING`); ``zero1`` is DDP
with ``ZeroRedundancyOptimizer``; ``tp`` is memgraph/trace/parallel/tensor_parallel.py.

Ranks run the same program; with even data they differ only in what they store: FSDP2's and DTensor's
shards where a dimension does not divide by the ranks, ZeRO-1's partitions. :meth:`DistributedRun.layout`
gives those shapes per rank, and ranks of equal layout are traced once (api.py ``add_rank_figures``).
"""

from __future__ import annotations

import inspect
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn

from memgraph.errors import MemgraphError
from memgraph.facts.nccl import nccl_buffers
from memgraph.facts.unknowns import BoundedUnknown
from memgraph.model_spec.options import FSDP_STRATEGIES, TP_STRATEGIES, TrainingOptions
from memgraph.notes import Note
from memgraph.private_api import clear_dtensor_sharding_cache, distributed_on_meta, fake_store, fsdp1_on_meta
from memgraph.trace.record.event_log import Origin, Role
from memgraph.trace.record.recorder import Recorder
from memgraph.units import human_bytes

DDP_BUCKET_MODULE = "DDP gradient bucket"  # the module path DDP's buckets are attributed to


def _local(t):
    """A DTensor's local shard (what this rank stores); any other tensor as it is."""
    to_local = getattr(t, "to_local", None)
    return to_local() if isinstance(t, torch.Tensor) and to_local is not None else t


def _WRAP_TENSOR_AUTOGRAD():
    """``torch.ops._c10d_functional._wrap_tensor_autograd.default`` (registered when torch.distributed's
    functional collectives are imported, which tensor parallelism does)."""
    import torch.distributed._functional_collectives  # noqa: F401  (registers the op)

    return torch.ops._c10d_functional._wrap_tensor_autograd.default


class DistributedRecorder(Recorder):
    """The recorder of a distributed run: DTensors and the rank-0 side of broadcasts.

    * A dispatch mode sees an op on DTensors first; returning NotImplemented hands it to DTensor's
      ``__torch_dispatch__``, whose ops on the local tensors then reach this mode (the DTensor-level op
      allocates nothing itself: its result wraps the local result).
    * Host tensors broadcast through the device (DDP's ``Reducer::sync_bucket_indices`` copies the
      bucket indices to the parameters' device, broadcasts them from rank 0 and copies them back) come
      back with the values rank 0 sent: a copy from meta into a CPU tensor is skipped, the CPU tensor
      already holds them.
    """

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        from torch.distributed.tensor import DTensor

        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented
        if func is _WRAP_TENSOR_AUTOGRAD():
            # torch 2.13 torch/distributed/_functional_collectives.py: the real op returns
            # AsyncCollectiveTensor(input), a wrapper on the input's storage; its fake kernel's
            # torch.empty_like would count a new allocation
            return super().__torch_dispatch__(torch.ops.aten.alias.default, types, (args[0],), {})
        if (func is torch.ops.aten.copy_.default and args[0].device.type == "cpu"
                and args[1].device.type == self.device_type):
            return args[0]
        return super().__torch_dispatch__(func, types, args, kwargs)

    def sid_of(self, t):
        return super().sid_of(_local(t))

    def register(self, t, origin, name, module="", op_index=-1):
        return super().register(_local(t), origin, name, module, op_index)

    def mark_role(self, t, role, module=None):
        super().mark_role(_local(t), role, module)

    def mark_saved(self, t):
        super().mark_saved(_local(t))

    alloc_storage_name = "FSDP2 alloc_storage (unsharded parameter)"  # FSDP1: fsdp1.py FSDP1_ALLOC_STORAGE

    def storage_freed(self, t: torch.Tensor) -> None:
        """FSDP2's ``free_storage`` is about to resize ``t``'s storage to 0 bytes: its block is freed."""
        key = id(t.untyped_storage())
        sid = self._sid_by_key.pop(key, None)
        if sid is not None:
            self._refs.pop(sid, None)  # the storage object lives on; its weakref must not free sid again
            self.log.free(sid)

    def storage_allocated(self, t: torch.Tensor) -> None:
        """FSDP2's ``alloc_storage`` resized ``t``'s storage back to its size: a new block."""
        if t.device.type == self.device_type:
            self.register(t, Origin.OP, self.alloc_storage_name, self._module())


class DistributedRun:
    """One trace's distributed setup: the fake process group, the wrapped model, its notes.

    Used as a context manager around the whole trace; with no ``--strategy`` it does nothing.
    """

    def __init__(self, opts: TrainingOptions, comm_hook: bool = True, rank: int = 0):
        """``comm_hook=False``: DDP keeps its C++ default all-reduce (a real process group, measure/distributed.py);
        the fake process group needs :func:`fake_group_allreduce_hook`. ``rank``: the rank the fake process group makes
        this process (the trace is that rank's)."""
        self.opts = opts
        self.rank = rank
        self.comm_hook = comm_hook
        self.strategy = opts.strategy
        self.nproc = opts.nproc
        self.recorder: Recorder | None = None
        self._patches = None
        self._units: list[str] = []
        self._partition_bytes: list[int] = []
        self._tp_entries = self._tp_replicated = 0

    @property
    def recorder_type(self) -> type[Recorder]:
        return DistributedRecorder if self.strategy is not None else Recorder

    def __enter__(self) -> DistributedRun:
        if self.strategy is None:
            return self
        if dist.is_initialized():
            raise MemgraphError("--strategy needs its own (fake) process group, but torch.distributed is already "
                                "initialised in this process: run memgraph in a process of its own")
        dist.init_process_group("fake", store=fake_store(), rank=self.rank, world_size=self.nproc)
        if self.strategy in TP_STRATEGIES:  # DTensor's cached shardings hold another rank's local shapes
            clear_dtensor_sharding_cache()
        try:
            patches = (fsdp1_on_meta if self.strategy == "fsdp1" else distributed_on_meta)(self._allocated, self._freed)
            patches.__enter__()
        except BaseException:
            dist.destroy_process_group()
            raise
        self._patches = patches
        return self

    def __exit__(self, *exc) -> None:
        if self.strategy is None:
            return
        try:
            self._patches.__exit__(*exc)
        finally:
            dist.destroy_process_group()

    def _allocated(self, t: torch.Tensor) -> None:
        if isinstance(self.recorder, DistributedRecorder):
            self.recorder.storage_allocated(t)

    def _freed(self, t: torch.Tensor) -> None:
        if isinstance(self.recorder, DistributedRecorder):
            self.recorder.storage_freed(t)

    def attach(self, recorder: Recorder) -> None:
        """The recorder of this trace (DDP's hook and FSDP2's storage resizes report to it)."""
        self.recorder = recorder
        if self.strategy == "fsdp1" and isinstance(recorder, DistributedRecorder):
            from memgraph.trace.parallel.fsdp1 import FSDP1_ALLOC_STORAGE

            recorder.alloc_storage_name = FSDP1_ALLOC_STORAGE

    # -- wrapping -------------------------------------------------------------------------------
    def wrap(self, model: nn.Module) -> nn.Module:
        """What the training loop calls: ``model`` itself, a DDP wrapper of it, or it sharded in place."""
        if self.strategy in ("ddp", "zero1"):
            return self._ddp(model)
        if self.strategy in FSDP_STRATEGIES:
            return self._fsdp(model, self.mesh())
        if self.strategy == "fsdp1":  # memgraph/trace/parallel/fsdp1.py
            from memgraph.trace.parallel.fsdp1 import wrap_fsdp1

            wrapped, self._units, self._unit_rule = wrap_fsdp1(model, self.opts, *fsdp_units(model),
                                                               mesh=self.mesh() if self.opts.nnodes > 1 else None)
            return wrapped
        if self.strategy in TP_STRATEGIES:
            from memgraph.trace.parallel.tensor_parallel import parallelize

            mesh = self.mesh()
            tp_mesh = mesh["tp"] if self.strategy == "fsdp+tp" else mesh
            model, self._tp_entries, self._tp_replicated = parallelize(model, tp_mesh, self.opts.sequence_parallel)
            return self._fsdp(model, mesh["dp"]) if self.strategy == "fsdp+tp" else model
        return model

    def mesh(self):
        """The ``DeviceMesh`` of the strategy, over the process group's ranks (``init_device_mesh``, row-major:
        rank r sits at (r // inner, r % inner)):

        * ``tp`` and ``fsdp``: one dimension of all N ranks;
        * ``fsdp+tp``: ``(dp, tp)`` of N / T x T ranks (torchtitan's layout: TP inside, over neighbouring ranks,
          the ones a node's NVLink joins), the TP plan on ``tp``, FSDP2 over ``dp``;
        * ``fsdp`` with ``--nnodes M``: ``(replicate, shard)`` of M x N / M (FSDP2's HSDP: ``fully_shard``
          on a 2-D mesh shards over the inner dimension and replicates over the outer,
          torch/distributed/fsdp/_fully_shard/_fully_shard.py)."""
        from torch.distributed.device_mesh import init_device_mesh

        if self.strategy == "fsdp+tp":
            t = self.opts.tp_size
            return init_device_mesh("cpu", (self.nproc // t, t), mesh_dim_names=("dp", "tp"))
        if self.opts.nnodes > 1:
            m = self.opts.nnodes
            return init_device_mesh("cpu", (m, self.nproc // m), mesh_dim_names=("replicate", "shard"))
        return init_device_mesh("cpu", (self.nproc,))

    def _ddp(self, model: nn.Module) -> nn.Module:
        from torch.nn.parallel import DistributedDataParallel

        ddp = DistributedDataParallel(model, gradient_as_bucket_view=self.opts.gradient_as_bucket_view)
        if self.comm_hook:
            ddp.register_comm_hook(self, fake_group_allreduce_hook)
        return ddp

    def _fsdp(self, model: nn.Module, mesh) -> nn.Module:
        from torch.distributed.fsdp import fully_shard

        from torch.distributed.fsdp import MixedPrecisionPolicy

        policy = MixedPrecisionPolicy()  # fully_shard's default: no casts
        if self.opts.fsdp_mixed_precision:
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        units, rule = fsdp_units(model)
        for name, unit in units:
            fully_shard(unit, mesh=mesh, reshard_after_forward=self.reshard_after_forward, mp_policy=policy)
        # the root: reshard_after_forward None = False for the root (fully_shard's docstring)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        self._units = [name for name, _ in units]
        self._unit_rule = rule
        return model

    @property
    def reshard_after_forward(self) -> bool:
        """``fully_shard(reshard_after_forward=...)`` of the units: False for ``zero2`` and
        ``--no-reshard-after-forward``, True for ``fsdp`` and ``zero3``."""
        return not (self.strategy == "zero2" or self.opts.no_reshard_after_forward)

    def shard_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """``zero1``: the same optimizer class and settings inside ``ZeroRedundancyOptimizer``, which gives
        each rank the parameters of its partition (torch 2.13 torch/distributed/optim/zero_redundancy_optimizer.py
        ``partition_parameters``: largest first, each to the rank with the fewest elements so far), steps only
        those and broadcasts them from their owner afterwards; other strategies: ``optimizer`` itself."""
        if self.strategy != "zero1":
            return optimizer
        with warnings.catch_warnings():  # torch 2.13's torch.distributed.optim imports torch.jit.script (deprecated)
            warnings.simplefilter("ignore", DeprecationWarning)
            from torch.distributed.optim import ZeroRedundancyOptimizer

        accepted = inspect.signature(type(optimizer).__init__).parameters
        settings = {k: v for k, v in optimizer.defaults.items() if k in accepted}
        params = [p for group in optimizer.param_groups for p in group["params"]]
        zero = ZeroRedundancyOptimizer(params, optimizer_class=type(optimizer), **settings)
        self._partition_bytes = [_nbytes(p for group in zero.optim.param_groups for p in group["params"]),
                                 _nbytes(params)]
        return zero

    def local_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """The optimizer whose ``state`` holds this rank's tensors (ZeroRedundancyOptimizer's ``optim``)."""
        return optimizer.optim if self.strategy == "zero1" else optimizer

    def layout(self, model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple:
        """What this rank stores, as shapes: every parameter's local shard (name, shape, dtype; FSDP2's and
        DTensor's shards differ between ranks where a dimension does not divide by the ranks), and for ``zero1``
        the parameters of this rank's ZeroRedundancyOptimizer partition. Two ranks with equal layouts run the
        same program on the same shapes (even data), so their traces are the same."""
        params = tuple((name, tuple(_local(p).shape), str(p.dtype)) for name, p in model.named_parameters())
        names = {id(p): name for name, p in model.named_parameters()}
        mine = ()
        if self.strategy == "zero1":
            mine = tuple(names.get(id(p), "") for group in optimizer.optim.param_groups for p in group["params"])
        return params, mine

    def rank_layouts(self) -> list[tuple] | None:
        """What only a traced step tells about the other ranks (DeepSpeed's, ds_engine/run.py); here nothing:
        :meth:`layout` of each rank, before any step, decides."""
        return None

    # -- report ---------------------------------------------------------------------------------
    def notes(self) -> list[str]:
        if self.strategy is None:
            return []
        head = (f"multi-GPU: {self.strategy} on {self.nproc} ranks; the figures are rank {self.rank}'s, traced with "
                "torch.distributed's own code on PyTorch's fake process group (collectives move no data). "
                "The per-rank table compares the ranks")
        if self.strategy in ("ddp", "zero1"):
            view = "views of the buckets" if self.opts.gradient_as_bucket_view else "copied into the buckets"
            notes = [head + ("." if self.strategy == "ddp" else ", except for ZeRO's partitions below."),
                     f"DDP: gradient buckets of the C++ Reducer (first bucket 1 MiB, then 25 MiB, rebuilt in "
                     f"gradient-ready order after iteration 1) counted as gradients; gradients are {view}"]
            if self.strategy == "zero1":
                mine, total = self._partition_bytes
                notes.append("ZeRO-1: ZeroRedundancyOptimizer steps only this rank's partition of the parameters, "
                             f"so its optimizer state is that partition's: rank {self.rank} holds {human_bytes(mine)} of "
                             f"{human_bytes(total)} of trainable parameters. Partitions are whole parameters, "
                             "largest first to the least-loaded rank, so other ranks' shares differ")
            return notes
        if self.strategy == "fsdp1":
            from memgraph.trace.parallel.fsdp1 import fsdp1_notes

            return [head + ".", *fsdp1_notes(self.opts, self._units, self._unit_rule, self.rank)]
        if self.strategy in TP_STRATEGIES:
            return [head + ".", *self._tp_notes()] + (self._fsdp_notes() if self.strategy == "fsdp+tp" else [])
        return [head + " (FSDP2 pads dim 0 to a multiple of the world size; rank 0 holds a full shard).",
                *ZERO_MAPPING.get(self.strategy, ()), *self._fsdp_notes()]

    def _tp_notes(self) -> list[str]:
        ranks = self.opts.tp_size if self.strategy == "fsdp+tp" else self.nproc
        notes = []
        if self.strategy == "fsdp+tp":
            t = self.opts.tp_size
            notes.append(f"fsdp+tp: a DeviceMesh (dp={self.nproc // t}, tp={t}) (torchtitan's layout: TP over "
                         "neighbouring ranks); the TP plan is applied on tp first, then FSDP2 fully_shard over dp "
                         "shards each TP shard again on dim 0")
        # typed (memgraph/notes.py): the modules outside the plan (a norm per layer) follow the depth
        notes.append(Note("tensor parallel: torch.distributed.tensor.parallel.parallelize_module over {ranks} ranks "
                          "with the model's base_model_tp_plan ({entries} entries: q/k/v/gate/up ColwiseParallel, "
                          "o/down RowwiseParallel), the input embedding RowwiseParallel and the head ColwiseParallel "
                          "with replicated logits (torchtitan's Llama plan, no loss parallelism); sharded parameters, "
                          "gradients and optimizer state are rank {rank}'s shards; "
                          + ("the {replicated} modules outside the plan hold replicated DTensors (torchtitan's "
                             "NoParallel)" if self._tp_replicated else "no module is left outside the plan")
                          + ("" if self.opts.sequence_parallel else "; no sequence parallelism (--sequence-parallel)"),
                          per_layer=("replicated",), ranks=ranks, entries=self._tp_entries, rank=self.rank,
                          replicated=self._tp_replicated))
        if self.opts.sequence_parallel:
            notes.append(f"sequence parallel: the norms SequenceParallel on 1/{ranks} of the sequence, attention and "
                         "MLP inputs all-gathered (PrepareModuleInput), o/down reduce-scattered (RowwiseParallel("
                         "output_layouts=Shard(1))), as torchtitan; unlike torchtitan the embedding output is "
                         "all-reduced to the whole sequence and layer 0 takes its slice, since transformers computes "
                         "positions and the mask from that output's length")
        return notes

    def _fsdp_notes(self) -> list[str]:
        reshard = "freed after forward" if self.reshard_after_forward else "kept from forward to backward"
        hybrid = []
        if self.opts.nnodes > 1:
            m = self.opts.nnodes
            hybrid = [f"HSDP: fully_shard on a (replicate={m}, shard={self.nproc // m}) DeviceMesh, {m} nodes of "
                      f"{self.nproc // m} GPUs: parameters, gradients and optimizer state sharded over the "
                      f"{self.nproc // m} GPUs of a node and replicated across nodes (gradients reduce-scattered "
                      "within the node, then all-reduced across nodes)"]
        return hybrid + [
            Note("FSDP2: fully_shard on {units} units ({rule}) and the root; parameters, gradients and optimizer "
                 "state are rank {rank}'s shards; each unit's parameters are all-gathered for its forward and "
                 "backward and {reshard}; gathered parameters count as activations or temporaries",
                 per_layer=("units",), units=len(self._units), rule=self._unit_rule, rank=self.rank,
                 reshard=reshard)] + (["FSDP2 MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32) instead "
                                   "of autocast: each unit's float32 shard is cast to bfloat16 before its all-gather"]
                                  if self.opts.fsdp_mixed_precision else [])

    def unknowns(self) -> list[BoundedUnknown]:
        return nccl_buffers(self.nproc) if self.strategy is not None else []


# DeepSpeed's ZeRO stages in PyTorch's own primitives (torch 2.13). ZeRO-3 is what FSDP was built after
# (torch/distributed/fsdp/fully_sharded_data_parallel.py, FullyShardedDataParallel's docstring: "the ZeRO
# Stage 3 from DeepSpeed"); ZeRO-2's counterpart is FSDP1's ShardingStrategy.SHARD_GRAD_OP, which FSDP2
# spells reshard_after_forward=False (torch/distributed/fsdp/api.py, ShardingStrategy's docstring).
ZERO_MAPPING = {
    "zero2": ["ZeRO-2 as FSDP2 fully_shard(reshard_after_forward=False), PyTorch's SHARD_GRAD_OP: gradients and "
              "optimizer state sharded; every unit's parameters stay unsharded from its forward until its "
              "backward ends, so the forward/backward peak holds the whole model as DeepSpeed ZeRO-2's replicas "
              "do. Unlike DeepSpeed, the parameters are sharded at rest (optimizer step, between iterations): there "
              "this rank holds 1/N of them where DeepSpeed ZeRO-2 keeps a full replica"],
    "zero3": ["ZeRO-3 as FSDP2 fully_shard(reshard_after_forward=True), PyTorch's FULL_SHARD: parameters, gradients "
              "and optimizer state sharded; each unit's parameters gathered for its forward and again for its "
              "backward (the same run as --strategy fsdp)"],
}


def distributed_run(opts: TrainingOptions, rank: int = 0, real: bool = False):
    """The multi-GPU setup of a trace (``real=False``) or of a rank of ``memgraph measure`` in an initialised process
    group (``real=True``): DeepSpeed's engine for ``--deepspeed`` (memgraph/ds_engine), else :class:`DistributedRun`."""
    if opts.deepspeed is not None:
        from memgraph.ds_engine.run import DeepSpeedRun

        return DeepSpeedRun(opts, DistributedRecorder, rank=rank, real=real)
    return DistributedRun(opts, comm_hook=not real, rank=rank)


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def no_split_units(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """The modules (below the root) whose class the model names in ``_no_split_modules``: its repeated blocks."""
    classes = set(getattr(model, "_no_split_modules", None) or ())
    return [(name, m) for name, m in model.named_modules() if name and type(m).__name__ in classes]


def fsdp_units(model: nn.Module) -> tuple[list[tuple[str, nn.Module]], str]:
    """The modules to ``fully_shard`` before the root, and the rule that chose them."""
    units = no_split_units(model)
    if units:
        return units, f"the model's _no_split_modules: {', '.join(sorted(set(model._no_split_modules)))}"
    units = [(name, m) for name, m in model.named_children() if any(True for _ in m.parameters())]
    return units, "each child of the root that holds parameters"


def fake_group_allreduce_hook(run: DistributedRun, bucket) -> torch.futures.Future[torch.Tensor]:
    """DDP's all-reduce of one bucket, as PyTorch's default does it, in place.

    torch 2.13 torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py ``allreduce_hook`` divides the
    bucket by the world size and all-reduces it in place, returning a future of the bucket; the Reducer's
    C++ default (``_AllReduceBySumCommHook``) does the same. The fake process group's futures carry no
    value, which both refuse, so this hook returns a completed future of the bucket itself. No memory
    differs: NCCL reduces in place.
    """
    buffer = bucket.buffer()
    if run.recorder is not None:
        run.recorder.mark_role(buffer, Role.GRADIENT, DDP_BUCKET_MODULE)
    buffer.div_(dist.get_world_size())
    dist.all_reduce(buffer)
    future = torch.futures.Future()
    future.set_result(buffer)
    return future


# DDP.register_comm_hook checks the return annotation as an object; this module's annotations are strings
fake_group_allreduce_hook.__annotations__["return"] = torch.futures.Future[torch.Tensor]


__all__ = ["DDP_BUCKET_MODULE", "DistributedRun", "distributed_run", "DistributedRecorder", "ZERO_MAPPING", "fsdp_units"]
