"""``--deepspeed ds_config.json``: the model wrapped by DeepSpeed's own engine, as one rank.

:class:`DeepSpeedRun` stands where :class:`memgraph.trace.parallel.distributed.DistributedRun` stands in the tracer and in
``memgraph measure`` (same methods), and runs ``deepspeed.initialize(model=..., optimizer=..., config=...)`` with the
config as written, its ``"auto"`` values resolved (memgraph/ds_engine/config.py). The optimizer is the client
optimizer memgraph builds from ``--optimizer`` (what a Trainer passes when the config has no ``optimizer``
section); a config with one is refused for now.

The engine is created at the first forward, inside the recorder, so that what ``deepspeed.initialize`` allocates
(the flat 16-bit parameter groups the weights become views of, the fp32 master partitions, gradient buckets,
ZeRO-3's partitions) and frees (the original weights) is recorded as iteration 1's; the real run measured by
``memgraph measure`` does the same. The training loop is the Trainer's with DeepSpeed (accelerate's
``backward``: ``engine.backward(loss)``; ``engine.step()``): :class:`EngineLoop` is what ``train_iteration``
(trace/training_step.py) takes as its scaler, so the loop itself is unchanged. DeepSpeed does its own mixed
precision (the engine casts the model to bf16/fp16): no autocast runs with ``--deepspeed``.

On meta (the prediction), the fake process group carries the collectives and private_api.py
``deepspeed_on_meta`` moves the engine's buffers to meta; DeepSpeed's overflow and gradient-norm checks read a
value (``.item()``), answered 0 by :class:`ScalarsOnMeta` (no overflow: every step runs, as with
``GradScalerAssumingFiniteGrads``).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from unittest import mock

import torch
import torch.distributed as dist
import torch.nn as nn

from memgraph.ds_engine.buffers import buffer_notes, mark_roles
from memgraph.ds_engine.config import DeepSpeedConfig, describe, resolve
from memgraph.ds_engine.offload import HostStandIns, offloads_optimizer, offloads_param
from memgraph.errors import MemgraphError
from memgraph.facts.gpus import get_gpu, process_context
from memgraph.facts.nccl import nccl_buffers
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.user_code import describe as describe_exception
from memgraph.model_spec.user_code import innermost_is_memgraph
from memgraph.private_api import TorchDispatchMode, deepspeed_cpu_adam_on_meta, deepspeed_on_meta, fake_store

# deepspeed 0.19.8 runtime/config.py ADAM_OPTIMIZER, ADAMW_OPTIMIZER: the types engine.py builds as DeepSpeedCPUAdam
# when the optimizer is offloaded to the CPU (get_optimizer_configuration)
CPU_ADAM_TYPES = ("adam", "adamw")


def import_deepspeed():
    """``deepspeed``, imported with its CPU accelerator (``DS_ACCELERATOR=cpu``: the CPU build's paths; memgraph
    moves its buffers to meta), or one line saying how to install it."""
    with mock.patch.dict(os.environ, DS_ACCELERATOR=os.environ.get("DS_ACCELERATOR", "cpu")):
        try:
            import deepspeed
        except ImportError:
            raise MemgraphError("--deepspeed needs DeepSpeed: pip install 'memgraph[deepspeed]'") from None
        from deepspeed.accelerator import get_accelerator

        if get_accelerator().device_name() not in ("cpu", "meta"):
            raise MemgraphError(f"--deepspeed: DeepSpeed chose its {get_accelerator().device_name()} accelerator; "
                                "run memgraph with DS_ACCELERATOR=cpu")
    return deepspeed


@contextlib.contextmanager
def initialize_failures(path: str):
    """DeepSpeed refusing the config in ``deepspeed.initialize`` (its config checks: "Either train_batch_size or
    train_micro_batch_size_per_gpu needs to be provided", a bad key's pydantic error, ...) as one line naming the config
    and DeepSpeed's message. An exception raised in memgraph's own code (its patches) stays an internal error."""
    try:
        yield
    except MemgraphError:
        raise
    except Exception as e:
        if innermost_is_memgraph(e):
            raise
        raise MemgraphError(f"--deepspeed {path}: deepspeed.initialize refused the config: "
                            f"{describe_exception(e)}: fix the config (DeepSpeed's config reference: "
                            "https://www.deepspeed.ai/docs/config-json/)") from e


class ScalarsOnMeta(TorchDispatchMode):
    """``.item()`` (``aten._local_scalar_dense``) of a meta tensor answered 0: DeepSpeed's overflow flags and gradient
    norms (stage_1_and_2.py ``has_overflow``, runtime/utils.py ``get_global_norm``, ``is_invalid_grad_norm``)."""

    answered = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default and args[0].device.type == "meta":
            ScalarsOnMeta.answered += 1
            return 0
        return func(*args, **(kwargs or {}))


class EngineLoop:
    """What ``train_iteration`` calls as its GradScaler: ``scale(loss).backward()`` is ``engine.backward(loss)``,
    ``step(optimizer)`` is ``engine.step()`` (with ``--grad-accum N`` the engine counts micro-steps: ``step`` after
    each backward, as the Trainer calls it, updating at the boundary)."""

    def __init__(self, run: DeepSpeedRun):
        self.run = run
        self._pending = 0

    def scale(self, loss: torch.Tensor):
        return _Backward(self, loss)

    def _backward(self, loss: torch.Tensor) -> None:
        engine = self.run.engine
        if self._pending:  # the previous micro-step's engine.step() (not at the boundary: no update)
            with self.run.scalars():
                engine.step()
        with self.run.scalars():
            engine.backward(loss)
        self._pending += 1

    def step(self, optimizer) -> None:
        with self.run.scalars():
            self.run.engine.step()
        self._pending = 0
        self.run.after_step()

    def update(self) -> None:
        pass


class _Backward:
    def __init__(self, loop: EngineLoop, loss: torch.Tensor):
        self.loop, self.loss = loop, loss

    def backward(self) -> None:
        self.loop._backward(self.loss)


class _EngineModule:
    """What the loop calls as the model: the engine, created at the first call."""

    def __init__(self, run: DeepSpeedRun):
        self.run = run

    def compile_after_initialize(self, compile_engine) -> None:
        """``compile_engine(engine)`` right after ``deepspeed.initialize``, where accelerate compiles a DeepSpeed
        engine (accelerate 1.15 accelerator.py ``_prepare_deepspeed``: ``engine.compile(backend=...,
        compile_kwargs=...)``, which compiles ``engine.module`` in place)."""
        self.run.compile_engine = compile_engine

    def __call__(self, *args, **kwargs):
        engine = self.run.engine
        with self.run.fetching():  # ZeRO-3 fetches offloaded parameters in forward too
            return engine(*args, **kwargs)

    def __getattr__(self, name):  # the wrapped model's modules (LayerDrop off: trace/layerdrop.py)
        return getattr(self.run._model, name)


class _EngineOptimizer:
    """What the loop holds as the optimizer: the engine steps and clears the gradients itself (``engine.step``
    zeroes them; the Trainer's ``model.zero_grad()`` finds none)."""

    def __init__(self, client: torch.optim.Optimizer):
        self.client = client

    def zero_grad(self, set_to_none: bool = True) -> None:
        pass


class DeepSpeedRun:
    """One rank's DeepSpeed run: the fake process group (a trace) or the real one (``real=True``, measure)."""

    def __init__(self, opts: TrainingOptions, recorder_type, rank: int = 0, real: bool = False):
        """``recorder_type``: the recorder class of a distributed trace (trace/distributed.py DistributedRecorder)."""
        self.opts, self.rank, self.real = opts, rank, real
        self._answered_before = ScalarsOnMeta.answered  # the class counts over the process: this run's share only
        self.recorder_type = recorder_type
        self.nproc = opts.nproc
        self.recorder = None
        self.engine_loop = EngineLoop(self)
        self.config: DeepSpeedConfig | None = None
        self._model: nn.Module | None = None
        self._client: torch.optim.Optimizer | None = None
        self._engine = None
        self._stack: contextlib.ExitStack | None = None
        self.host: HostStandIns | None = None  # optimizer offload on meta (ds_engine/offload.py)
        self.cpu_adam = False  # the config's "optimizer" section: DeepSpeedCPUAdam (with offload_optimizer)
        self._flatten_note: str | None = None  # ZeRO-1/2 flattened its 16-bit groups through host memory
        self.compile_engine = None  # --compile: called with the engine after deepspeed.initialize

    def __enter__(self) -> DeepSpeedRun:
        stack = contextlib.ExitStack()
        # DeepSpeed prints to stdout ("... deepspeed_shm_comm_op built successfully"), which would corrupt --json
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        stack.enter_context(warnings.catch_warnings())
        warnings.filterwarnings("ignore", category=FutureWarning, module="torch.distributed.c10d_logger")
        import_deepspeed()
        if not self.real:
            if dist.is_initialized():
                raise MemgraphError("--deepspeed needs its own (fake) process group, but torch.distributed is already "
                                    "initialised in this process: run memgraph in a process of its own")
            dist.init_process_group("fake", store=fake_store(), rank=self.rank, world_size=self.nproc)
            stack.callback(dist.destroy_process_group)
            try:
                stack.enter_context(deepspeed_on_meta(self.rank, self.nproc, self._autocast_device(),
                                                      self._free_device_bytes if self.opts.target == "cuda" else None))
            except BaseException:
                stack.close()
                raise
        else:
            stack.enter_context(mock.patch.dict(os.environ, LOCAL_RANK=os.environ.get("LOCAL_RANK", str(self.rank))))
        self._stack = stack
        return self

    def __exit__(self, *exc) -> None:
        if self._engine is not None:
            self._engine.destroy()  # removes ZeRO-3's module hooks
        self._stack.close()

    def _free_device_bytes(self) -> int:
        """The target GPU's free memory now, what DeepSpeed's CUDA accelerator answers from NVML (``free``): its
        capacity less the CUDA context and the model's weights and buffers as they are now (DeepSpeed asks while it
        builds its optimizer, with the model on the device). DeepSpeed's ZeRO-1/2 flattens each 16-bit group on the
        device where it fits (deepspeed 0.19.8 stage_1_and_2.py ``flatten_on_accelerator``); the CPU accelerator would
        answer the free RAM of the machine memgraph runs on."""
        gpu = get_gpu(self.opts.gpu)
        context = process_context(gpu, self.opts.cuda_version, self.opts.module_loading, self.opts.context_bytes)[1]
        storages = {id(t.untyped_storage()): t.untyped_storage().nbytes()
                    for t in (*self._model.parameters(), *self._model.buffers())}
        return max(0, gpu.capacity_bytes - context - sum(storages.values()))

    def _autocast_device(self) -> str:
        return "cuda" if self.opts.target == "cuda" else "cpu"

    def scalars(self):
        """What DeepSpeed's own code runs under on meta: host stand-ins (optimizer offload), ``.item()`` answered."""
        if self.real:
            return contextlib.nullcontext()
        stack = self.host_modes()
        if self.cpu_adam:
            stack.enter_context(deepspeed_cpu_adam_on_meta())
        stack.enter_context(ScalarsOnMeta())  # above the stand-ins: .item() of a host stand-in too
        return stack

    def host_modes(self) -> contextlib.ExitStack:
        """The host stand-ins (offload on meta)."""
        stack = contextlib.ExitStack()
        if self.host is not None and not self.real:
            stack.enter_context(self.host)
        return stack

    @contextlib.contextmanager
    def fetching(self):
        """While the model's forward runs with ZeRO-3's parameters offloaded: the host stand-ins see only the fetches
        of host partitions (offload.py ``_fetch``); the model's own ``.cpu()`` and ``device='cpu'`` stay as traced."""
        if self.host is None or self.real or not self.host.params_offloaded:
            yield
            return
        self.host.fetch_only = True
        try:
            with self.host:
                yield
        finally:
            self.host.fetch_only = False

    def attach(self, recorder) -> None:
        self.recorder = recorder
        if self.host is not None:
            self.host.recorder = recorder

    # -- wrapping -------------------------------------------------------------------------------
    def wrap(self, model: nn.Module):
        self._model = model
        self.config = resolve(self.opts.deepspeed, self.opts, getattr(model, "config", None), self.opts.iterations)
        section = self.config.config.get("optimizer")
        self.cpu_adam = bool(section) and offloads_optimizer(self.config.zero) and str(
            section.get("type", "")).lower() in CPU_ADAM_TYPES
        if section and not self.cpu_adam:
            raise MemgraphError(f"--deepspeed {self.opts.deepspeed}: an \"optimizer\" section (DeepSpeed's own "
                                "FusedAdam) is modelled only as DeepSpeedCPUAdam (type Adam or AdamW with "
                                "offload_optimizer to the CPU): remove it; memgraph's --optimizer is then "
                                "passed to deepspeed.initialize as the Trainer passes its own")
        if offloads_optimizer(self.config.zero):
            if not self.cpu_adam and self.config.config.get("zero_force_ds_cpu_optimizer", True):
                # deepspeed 0.19.8 runtime/engine.py _configure_optimizer: a client optimizer with ZeRO-Offload
                # raises ZeRORuntimeException unless zero_force_ds_cpu_optimizer is false (default true)
                raise MemgraphError(f"--deepspeed {self.opts.deepspeed}: offload_optimizer with the Trainer's own "
                                    "optimizer needs \"zero_force_ds_cpu_optimizer\": false in the config (DeepSpeed "
                                    "refuses it otherwise): add that key, or an \"optimizer\" section of type AdamW "
                                    "(DeepSpeedCPUAdam)")
        # offload_param is ZeRO-3's (deepspeed 0.19.8 runtime/zero/config.py: "Valid only with stage 3"; stage3.py
        # _configure_offloading); ZeRO-1/2 ignore it
        params_offloaded = offloads_param(self.config.zero) and self.config.stage == 3
        if not self.real and (offloads_optimizer(self.config.zero) or params_offloaded):
            self.host = HostStandIns(self.opts.target, self.recorder)
            self.host.params_offloaded = params_offloaded
            self.host.optimizer_offloaded = offloads_optimizer(self.config.zero)
        return _EngineModule(self)

    def shard_optimizer(self, optimizer: torch.optim.Optimizer):
        self._client = optimizer
        return _EngineOptimizer(optimizer)

    @property
    def engine(self):
        if self._engine is None:
            import deepspeed

            if self.host is not None and not self.cpu_adam and offloads_optimizer(self.config.zero):
                self.host.host_step(self._client)
            with self.scalars(), initialize_failures(self.opts.deepspeed), self._flatten_host() as flatten:
                # with an "optimizer" section DeepSpeed builds its own (transformers passes a DummyOptim)
                client = None if self.cpu_adam else self._client
                self._engine, *_ = deepspeed.initialize(model=self._model, optimizer=client,
                                                        config=self.config.config)
            if self.compile_engine is not None:
                self.compile_engine(self._engine)
            if flatten is not None and flatten.peak_host_bytes:
                self._flatten_note = (
                    f"DeepSpeed flattened the 16-bit parameter groups through host memory (peak "
                    f"{flatten.peak_host_bytes:,} B there): the flat buffer did not fit in the target GPU's free "
                    "memory at initialize, so ZeRO-1/2 moved the weights to the host, flattened them there and copied "
                    "the buffer back (deepspeed 0.19.8 stage_1_and_2.py, flatten_on_accelerator false)")
        return self._engine

    def _flatten_host(self):
        """Host stand-ins while ``deepspeed.initialize`` runs on the cuda target without an offload: ZeRO-1/2 flattens
        a 16-bit group whose buffer does not fit in the GPU's free memory on the host (``param.data.cpu()``, the flat
        buffer made there, ``.to(device)``): that host memory is not the device's. Nothing else in ``initialize``
        makes host tensors of any size."""
        if self.real or self.host is not None or self.opts.target != "cuda" or self.config.stage not in (1, 2):
            return contextlib.nullcontext()
        return HostStandIns(self.opts.target, self.recorder)

    def local_optimizer(self, optimizer):
        """The torch optimizer inside DeepSpeed's (its ``state`` holds this rank's partitions' state)."""
        if self._engine is None:
            return None
        inner = self._engine.optimizer
        return getattr(inner, "optimizer", inner)

    def after_step(self) -> None:
        if self.recorder is not None:
            mark_roles(self.recorder, self._engine)

    def rank_layouts(self) -> list[tuple] | None:
        """After this rank's trace, every rank's ZeRO-1/2 layout (rank order), or None where the ranks are alike
        (ZeRO-3: each parameter partitioned evenly; no engine). It stands for DistributedRun's ``layout`` (which
        trace/parallel/ranks.py asks of every rank before any step): what differs between DeepSpeed's ranks is
        known only once ``deepspeed.initialize`` has run.

        A ZeRO-1/2 rank's partition of a flat group starts and ends inside parameters; the parameters it touches,
        whole, are that rank's ``params_in_partition``, and with ``contiguous_gradients`` (DeepSpeed's default) both
        stages copy their gradients, whole, into one buffer at the first reduction (deepspeed 0.19.8
        stage_1_and_2.py ``reduce_ipg_grads`` -> ``copy_grads_in_partition``: ``grads_in_partition =
        torch.empty(sum of their numel)``, alive to the end of the step). So ranks differ by
        which parameters straddle their partition's ends (tiny Llama, 2 ranks: 105,088 and 101,056 elements;
        Llama-scale models up to an embedding matrix). The layout of each rank is the numel of its
        ``params_in_partition`` per group, from DeepSpeed's own ``get_partition_info`` over the engine's groups in
        their flattening order (``round_robin_bit16_groups``, padding and partition size as initialize set them)."""
        inner = None if self._engine is None else self._engine.optimizer
        if inner is None or not hasattr(inner, "round_robin_bit16_groups") or self.config.stage not in (1, 2):
            return None
        groups = getattr(inner, "round_robin_bit16_meta", None) or inner.round_robin_bit16_groups  # numel as built
        return [tuple(sum(t.numel() for t in inner.get_partition_info(group, size, rank, padding)[0])
                      for group, size, padding in zip(groups, inner.partition_size, inner.round_robin_bit16_padding))
                for rank in range(self.nproc)]

    # -- report ---------------------------------------------------------------------------------
    def notes(self) -> list[str]:
        notes = [f"DeepSpeed: deepspeed.initialize on {self.nproc} ranks (figures of rank {self.rank}), DeepSpeed's "
                 "own engine run on meta over PyTorch's fake process group with its CPU accelerator's code paths; "
                 "no autocast (the engine holds 16-bit weights); the loop is engine.backward(loss), engine.step()",
                 describe(self.config)]
        if self.cpu_adam:
            notes.append("DeepSpeed's optimizer: DeepSpeedCPUAdam from the config's \"optimizer\" section (memgraph's "
                         "--optimizer not used), its exp_avg and exp_avg_sq in host memory; its C++ update allocates "
                         "nothing")
        if self._engine is not None:
            notes += buffer_notes(self._engine, self.host.is_host if self.host is not None else lambda t: False)
        if self.host is not None:
            notes += self.host.notes()
        if self._flatten_note:
            notes.append(self._flatten_note)
        answered = ScalarsOnMeta.answered - self._answered_before
        if answered:
            notes.append(f"DeepSpeed's overflow and gradient-norm checks: {answered} .item() reads "
                         "answered 0 (no overflow, every step runs)")
        return notes

    def unknowns(self):
        return nccl_buffers(self.nproc)


__all__ = ["DeepSpeedRun", "EngineLoop", "ScalarsOnMeta", "import_deepspeed"]
