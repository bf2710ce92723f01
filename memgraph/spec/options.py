"""Training options shared by ``analyze`` and ``measure``, validated up front."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..errors import MemgraphError

PRECISIONS = ("fp32",)
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
OPTIMIZER_IMPLS = ("auto", "foreach", "for-loop", "fused")
TARGETS = ("cuda", "cpu")
ATTN_IMPLEMENTATIONS = ("eager", "sdpa")
MIN_ITERATIONS = 2  # iteration 1 creates the optimizer state; the steady state starts at 2


@dataclass(frozen=True)
class TrainingOptions:
    """How the training step runs. ``None`` sizes fall back to the model's defaults."""

    batch_size: int = 1
    seq_len: int | None = None
    image_size: int | None = None
    audio_seconds: float | None = None
    target_len: int | None = None
    precision: str = "fp32"
    optimizer: str = "adamw"
    optimizer_impl: str = "auto"
    freeze: tuple[str, ...] = ()
    train: tuple[str, ...] = ()
    iterations: int = MIN_ITERATIONS
    target: str = "cuda"
    attn_implementation: str = "eager"
    gradient_checkpointing: bool = False
    inputs: tuple[str, ...] = field(default=())  # --input specs for callable models
    gpu: str = "h100-80gb"  # catalog key of the target GPU (memgraph/gpu/catalog.py); used by the cuda target
    allocator_conf: str = ""  # PYTORCH_CUDA_ALLOC_CONF for the cuda target, e.g. "expandable_segments:True"

    def __post_init__(self):
        _positive("batch size", self.batch_size, "--batch-size")
        for label, value, flag in (
            ("sequence length", self.seq_len, "--seq-len"),
            ("image size", self.image_size, "--image-size"),
            ("target length", self.target_len, "--target-len"),
        ):
            if value is not None:
                _positive(label, value, flag)
        if self.audio_seconds is not None and not self.audio_seconds > 0:
            raise MemgraphError(f"audio length {self.audio_seconds!r} is not positive: pass --audio-seconds > 0")
        if self.iterations < MIN_ITERATIONS:
            raise MemgraphError(
                f"iterations {self.iterations} < {MIN_ITERATIONS}: the steady state needs at least 2 iterations"
            )
        _choice("precision", self.precision, PRECISIONS, "--precision")
        _choice("optimizer", self.optimizer, OPTIMIZERS, "--optimizer")
        _choice("optimizer implementation", self.optimizer_impl, OPTIMIZER_IMPLS, "--optimizer-impl")
        _choice("target", self.target, TARGETS, "--target")
        _choice("attention implementation", self.attn_implementation, ATTN_IMPLEMENTATIONS, "--attn")
        from ..allocator.cuda_caching import AllocatorOptions
        from ..gpu.catalog import get_gpu

        if self.allocator_conf:
            try:
                AllocatorOptions.from_env_string(self.allocator_conf)
            except ValueError as e:
                raise MemgraphError(f"--allocator-conf {self.allocator_conf!r}: {e}") from None

        try:
            object.__setattr__(self, "gpu", get_gpu(self.gpu).key)
        except KeyError as e:
            raise MemgraphError(f"{e.args[0]}: pass --gpu with a name from 'memgraph gpus'") from None

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("freeze", "train", "inputs"):
            d[k] = list(d[k])
        return d


def _positive(label: str, value, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MemgraphError(f"{label} {value!r} is not a positive integer: pass {flag} N with N >= 1")


def _choice(label: str, value: str, allowed: tuple[str, ...], flag: str) -> None:
    if value not in allowed:
        raise MemgraphError(f"unknown {label} {value!r}: pass {flag} one of {', '.join(allowed)}")
