"""Training options shared by ``analyze`` and ``measure``, validated up front."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import torch

from memgraph.errors import MemgraphError
from memgraph.facts.cuda_allocator import AllocatorOptions
from memgraph.facts.gpus import DEFAULT_GPU, get_gpu

# fp32: float32 everywhere. fp16-mixed: torch.autocast(float16) + GradScaler, float32 weights.
# bf16-mixed: torch.autocast(bfloat16), float32 weights, no scaler. bf16: bfloat16 weights, gradients,
# optimizer state and floating inputs, no autocast.
PRECISIONS = ("fp32", "fp16-mixed", "bf16-mixed", "bf16")
MIXED_PRECISIONS = ("fp16-mixed", "bf16-mixed")
BF16_PRECISIONS = ("bf16-mixed", "bf16")
OPTIMIZERS = ("sgd", "sgd-momentum", "adam", "adamw")
OPTIMIZER_IMPLS = ("auto", "foreach", "for-loop", "fused")
TARGETS = ("cuda", "cpu")
# flash_attention_2 is traced as PyTorch's flash SDPA kernel (the same FlashAttention-2 code; see
# memgraph/trace/run.py), on the cuda target only.
ATTN_IMPLEMENTATIONS = ("eager", "sdpa", "flash_attention_2")
LOOPS = ("plain", "trainer")  # the training loops of memgraph/trace/training_step.py
# Vision-language training stages (memgraph/model_spec/stages.py says what each trains).
STAGES = ("1", "2", "full")
# dtype of the parameters (and so of gradients and optimizer state) and of floating inputs
PRECISION_DTYPE = {"fp32": torch.float32, "fp16-mixed": torch.float32, "bf16-mixed": torch.float32,
                   "bf16": torch.bfloat16}
# dtype of torch.autocast("cuda", dtype=...) for the mixed precisions
AUTOCAST_DTYPE = {"fp16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}
MIN_ITERATIONS = 2  # iteration 1 creates the optimizer state; the steady state starts at 2


@dataclass(frozen=True)
class TrainingOptions:
    """How the training step runs. ``None`` sizes fall back to the model's defaults."""

    batch_size: int = 1
    seq_len: int | None = None
    image_size: int | tuple[int, int] | None = None  # N (square) or (H, W)
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
    gpu: str = DEFAULT_GPU  # catalog key of the target GPU (memgraph/gpu/catalog.py); used by the cuda target
    allocator_conf: str = ""  # PYTORCH_CUDA_ALLOC_CONF for the cuda target, e.g. "expandable_segments:True"
    images: int | None = None  # images per sample for image-text models (default: the model's)
    loop: str = "plain"  # training loop: "plain" keeps the outputs through the step, "trainer" drops them
    stage: str | None = None  # vision-language training stage "1", "2" or "full" (memgraph/model_spec/stages.py)

    def __post_init__(self):
        _positive("batch size", self.batch_size, "--batch-size")
        if isinstance(self.image_size, (list, tuple)):  # (H, W); a list when read back from JSON
            if len(self.image_size) != 2:
                raise MemgraphError(f"image size {self.image_size!r} is not N or HxW: pass --image-size 448 or 448x672")
            for v in self.image_size:
                _positive("image size", v, "--image-size")
            object.__setattr__(self, "image_size", tuple(self.image_size))
        elif self.image_size is not None:
            _positive("image size", self.image_size, "--image-size")
        for label, value, flag in (
            ("sequence length", self.seq_len, "--seq-len"),
            ("target length", self.target_len, "--target-len"),
            ("images per sample", self.images, "--images"),
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
        _choice("training loop", self.loop, LOOPS, "--loop")
        if self.stage is not None:
            object.__setattr__(self, "stage", str(self.stage))
            _choice("stage", self.stage, STAGES, "--stage")
        _choice("attention implementation", self.attn_implementation, ATTN_IMPLEMENTATIONS, "--attn")
        if self.allocator_conf:
            try:
                AllocatorOptions.from_env_string(self.allocator_conf)
            except ValueError as e:
                raise MemgraphError(f"--allocator-conf {self.allocator_conf!r}: {e}") from None

        try:
            gpu = get_gpu(self.gpu)
        except KeyError as e:
            raise MemgraphError(f"{e.args[0]}: pass --gpu with a name from 'memgraph gpus'") from None
        object.__setattr__(self, "gpu", gpu.key)
        _precision_supported(self.precision, self.target, gpu)
        if self.attn_implementation == "flash_attention_2" and self.target != "cuda":
            raise MemgraphError("--attn flash_attention_2 needs a GPU: use --target cuda, or --attn sdpa on the cpu target")

    def to_dict(self) -> dict:
        d = asdict(self)
        for k in ("freeze", "train", "inputs"):
            d[k] = list(d[k])
        return d


def _precision_supported(precision: str, target: str, gpu) -> None:
    if precision in MIXED_PRECISIONS and target != "cuda":
        raise MemgraphError(
            f"--precision {precision} is modelled for the cuda target only (CPU autocast has its own op policy, "
            "not modelled): use --target cuda, or --precision fp32/bf16 on the cpu target"
        )
    if precision in BF16_PRECISIONS and target == "cuda" and not gpu.bf16_supported:
        cc = ".".join(map(str, gpu.compute_capability))
        raise MemgraphError(
            f"--precision {precision} needs native bfloat16 (compute capability >= 8.0) but {gpu.name} is {cc}: "
            "use --precision fp16-mixed or fp32, or pick a newer --gpu"
        )


def _positive(label: str, value, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MemgraphError(f"{label} {value!r} is not a positive integer: pass {flag} N with N >= 1")


def _choice(label: str, value: str, allowed: tuple[str, ...], flag: str) -> None:
    if value not in allowed:
        raise MemgraphError(f"unknown {label} {value!r}: pass {flag} one of {', '.join(allowed)}")
