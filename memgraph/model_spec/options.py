"""Training options shared by ``analyze`` and ``measure``, validated up front.

Each option is declared once, as a :class:`TrainingOptions` field: its default, and in its metadata
the command-line facts (:class:`Flag`: flag, help, metavar, choices, parse function). memgraph/cli.py
builds the parser and README.md's options table from these fields.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import Field, asdict, dataclass, field, fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from memgraph.errors import MemgraphError
from memgraph.facts.bitsandbytes import BNB_VERSIONS, MODELLED_BNB_VERSION
from memgraph.facts.cuda_allocator import AllocatorOptions
from memgraph.model_spec.option_types import check_types
from memgraph.facts.gpus import (
    CUDA_MAJORS,
    DEFAULT_GPU,
    MODULE_LOADINGS,
    PYPI_CUDA_MAJOR,
    cuda_context_for,
    get_gpu,
    with_capacity,
)

# fp32: float32 everywhere. fp16-mixed: torch.autocast(float16) + GradScaler, float32 weights.
# bf16-mixed: torch.autocast(bfloat16), float32 weights, no scaler. bf16: bfloat16 weights, gradients,
# optimizer state and floating inputs, no autocast. fp16: the same in float16 (``model.half()`` training: no
# autocast, no GradScaler).
PRECISIONS = ("fp32", "fp16-mixed", "bf16-mixed", "bf16", "fp16")
MIXED_PRECISIONS = ("fp16-mixed", "bf16-mixed")
BF16_PRECISIONS = ("bf16-mixed", "bf16")
# sgd-nesterov, adafactor, lion, adam8bit, adamw8bit, paged-adamw8bit: memgraph/model_spec/optimizers.py says
# what state each keeps and where its rules come from (the 8-bit ones: bitsandbytes, emulated on meta)
OPTIMIZERS = ("sgd", "sgd-momentum", "sgd-nesterov", "adam", "adamw", "adafactor", "lion",
              "adam8bit", "adamw8bit", "paged-adamw8bit", "none")  # none: forward and backward only
BNB_8BIT_OPTIMIZERS = ("adam8bit", "adamw8bit", "paged-adamw8bit")
# bitsandbytes storage of the frozen base weights (memgraph/model_spec/quantize.py): 4bit = NF4 with double
# quantisation (QLoRA's; LitGPT's bnb.nf4-dq), nf4 = NF4 without it (LitGPT's bnb.nf4), 8bit = LLM.int8
QUANTIZE = ("4bit", "8bit", "nf4")
# dtype of LoRA adapters of a 16-bit model (memgraph/model_spec/lora.py): float32 = PEFT's autocast_adapter_dtype=True
LORA_DTYPES = ("float32", "model")
OPTIMIZER_IMPLS = ("auto", "foreach", "for-loop", "fused")
TARGETS = ("cuda", "cpu")
# flash_attention_2 is traced as PyTorch's flash SDPA kernel (the same FlashAttention-2 code; see
# memgraph/model_spec/build.py build_model and trace/tracer.py _forward_emulation), on the cuda target only.
# auto: what transformers picks when none is given (memgraph/model_spec/defaults.py)
ATTN_IMPLEMENTATIONS = ("auto", "eager", "sdpa", "flash_attention_2")
# the training loops of memgraph/step/training_step.py; auto: trainer for transformers models, plain for
# module:function models (memgraph/model_spec/defaults.py)
LOOPS = ("auto", "plain", "trainer")
# -- training-loop semantics (memgraph/step/training_step.py) --
# set-to-none: zero_grad(set_to_none=True), PyTorch >= 2.0's default; zero: zero_grad(set_to_none=False), the
# default before 2.0, gradients stay allocated; none: no zero_grad at all (gradients accumulate in place).
ZERO_GRAD_MODES = ("set-to-none", "zero", "none")
# the loss of module:function models (memgraph/model_spec/losses.py): auto = a scalar output or .loss as is, else
# out.sum(); sum = out.sum(); cross-entropy = F.cross_entropy(out, target), target = the input named ``target``
# (a transformers causal LM: its logits flattened against its labels, no float32 upcast);
# chunked-ce = torchtune's chunked output projection + cross-entropy for causal LMs
LOSSES = ("auto", "sum", "cross-entropy", "chunked-ce")
# torch.utils.checkpoint's use_reentrant=False / True (memgraph/model_spec/checkpointing.py)
CHECKPOINT_IMPLS = ("non-reentrant", "reentrant")
# Vision-language training stages (memgraph/model_spec/stages.py says what each trains).
STAGES = ("1", "2", "full")
# Multi-GPU strategies traced per rank on a fake process group (memgraph/trace/parallel/distributed.py)
STRATEGIES = ("ddp", "fsdp", "zero1", "zero2", "zero3", "tp", "fsdp+tp", "fsdp1")
# the strategies that apply a tensor-parallel plan (memgraph/trace/parallel/tensor_parallel.py)
TP_STRATEGIES = ("tp", "fsdp+tp")
# the strategies that run FSDP2's fully_shard (zero2 = reshard_after_forward=False, zero3 = True)
FSDP_STRATEGIES = ("fsdp", "zero2", "zero3")
# the strategies --compile models (memgraph/compiled/strategies.py): none, DDP (the wrapped model compiled whole),
# FSDP2 (each fully_shard unit compiled, its hooks eager)
COMPILED_STRATEGIES = (None, "ddp", "fsdp")
# FSDP1's ShardingStrategy names (torch 2.13 torch/distributed/fsdp/api.py) for --strategy fsdp1
# (memgraph/trace/parallel/fsdp1.py); HYBRID_SHARD is taken with --nnodes
FSDP1_SHARDING = ("FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD")
# FSDP1's BackwardPrefetch (torch/distributed/fsdp/api.py); NONE: backward_prefetch=None
FSDP1_BACKWARD_PREFETCH = ("BACKWARD_PRE", "BACKWARD_POST", "NONE")
# --depth-synthesis (memgraph/trace/shortcuts/depth_run.py): auto = trace a few layers and synthesize the rest, verified
DEPTH_SYNTHESIS = ("auto", "off")
# torch.compile modes modelled with --compile (memgraph/compiled/); reduce-overhead is refused (CUDA graphs keep
# their own memory pool, not modelled)
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
# dtype of the parameters (and so of gradients and optimizer state) and of floating inputs, by torch name;
# PRECISION_DTYPE below maps to the torch.dtype itself; the one rule (the trace's notes and the report read it too)
PRECISION_DTYPE_NAME = {"fp32": "float32", "fp16-mixed": "float32", "bf16-mixed": "float32", "bf16": "bfloat16",
                        "fp16": "float16"}
# dtype of torch.autocast("cuda", dtype=...) for the mixed precisions; AUTOCAST_DTYPE maps to the torch.dtype
AUTOCAST_DTYPE_NAME = {"fp16-mixed": "float16", "bf16-mixed": "bfloat16"}
MIN_ITERATIONS = 2  # iteration 1 creates the optimizer state; the steady state starts at 2
# Each iteration is a full trace, and from iteration 2 on every iteration repeats the same events
# (tests/test_recorder.py), so more iterations only cost time: a larger value is refused, not run for hours.
MAX_ITERATIONS = 16
# Counts (batch, sequence, images, ...) beyond 2**31 - 1 are refused: such a batch's int64 token ids alone
# would be 16 GiB, no GPU step holds it, and a 400-digit number is a typo, not a plan.
MAX_COUNT = 2**31 - 1


def __getattr__(name: str):
    """``PRECISION_DTYPE`` and ``AUTOCAST_DTYPE`` (precision -> torch.dtype), made on first use (PEP 562).

    torch is imported only then, so the command line (``memgraph --help``) can read this module without it.
    """
    names = {"PRECISION_DTYPE": PRECISION_DTYPE_NAME, "AUTOCAST_DTYPE": AUTOCAST_DTYPE_NAME}.get(name)
    if names is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import torch

    table = {precision: getattr(torch, dtype) for precision, dtype in names.items()}
    globals()[name] = table
    return table


# -- parse functions: command-line text -> value (argparse's type=); the message names the bad text --

def positive_int(text: str) -> int:
    if len(text) > 20:  # int() of a 400-digit string works; nothing memgraph counts needs more than 10 digits
        raise argparse.ArgumentTypeError(f"{text[:20]!r}... is not a count memgraph can use (at most {MAX_COUNT:,})")
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    if value > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text!r} is more than memgraph can use (at most {MAX_COUNT:,})")
    return value


def parse_image_size(text: str) -> int | tuple[int, int]:
    """``448`` (square) or ``448x672`` (height x width)."""
    parts = text.lower().split("x")
    if len(parts) > 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not N or HxW")
    try:
        sizes = tuple(positive_int(p.strip()) for p in parts)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not N or HxW with whole numbers >= 1 ({e})") from None
    return sizes[0] if len(sizes) == 1 else sizes


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number > 0")
    return value


def budget_fraction(text: str) -> float:
    """torch._functorch.config.activation_memory_budget: a fraction in (0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in (0, 1]")
    return value


def probability(text: str) -> float:
    """A dropout probability in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be in [0, 1)")
    return value


_BYTE_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
               "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def parse_bytes(text: str) -> int:
    """``536870912``, ``512MiB``, ``1.2GiB`` (binary units, as nvidia-smi prints) or ``600MB`` (decimal)."""
    import re

    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if not m or unit not in _BYTE_UNITS:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count: write e.g. 536870912, 512MiB or 1.2GiB")
    value = int(float(m.group(1)) * _BYTE_UNITS[unit])
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 bytes")
    return value


def parse_gpu_memory(text: str) -> int:
    """:func:`parse_bytes` with a unit required: ``--gpu-memory 48`` is far more likely 48 GiB than 48 bytes."""
    if text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} has no unit: write e.g. {text.strip()}GiB (or {text.strip()}B "
                                         "for bytes)")
    return parse_bytes(text)


@dataclass(frozen=True)
class Flag:
    """How one :class:`TrainingOptions` field appears on the command line and in README.md's options table."""

    name: str  # "--batch-size"; the argparse dest is the field's name
    help: str  # `code` spans stay in README.md; --help drops their backticks
    short: str | None = None  # "-b"
    metavar: str | None = None  # the value's placeholder, "N"; options with choices list them instead
    choices: tuple[str, ...] | None = None  # also checked by TrainingOptions, for the Python API
    parse: Callable[[str], Any] | None = None  # argparse type=: text -> value, or ArgumentTypeError
    repeatable: bool = False  # given once per value (action="append"); the field is a tuple
    analyze_only: bool = False  # not on 'memgraph measure', whose --device sets the target
    default_text: str | None = None  # how the default reads where the field's default is None
    env: str | None = None  # on the command line the default is this environment variable, read at parse time
    noun: str | None = None  # what error messages call the value; default: the field name, with spaces


FLAG = "memgraph.flag"  # the metadata key of a field's Flag


def option(default: Any, name: str, help: str, **facts: Any) -> Any:
    """A :class:`TrainingOptions` field with its default and its command-line facts (see :class:`Flag`)."""
    return field(default=default, metadata={FLAG: Flag(name, help, **facts)})


def flag_of(f: Field) -> Flag:
    return f.metadata[FLAG]


def noun_of(f: Field) -> str:
    return flag_of(f).noun or f.name.replace("_", " ")


@dataclass(frozen=True)
class TrainingOptions:
    """How the training step runs. ``None`` sizes fall back to the model's defaults.

    The field order is the order of ``--help``, of README.md's options table, and of the report's options.
    """

    batch_size: int = option(1, "--batch-size", "samples per step", short="-b", metavar="N", parse=positive_int)
    seq_len: int | None = option(
        None, "--seq-len", "tokens per sample", short="-s", metavar="N", parse=positive_int,
        default_text="the model's", noun="sequence length")
    image_size: int | tuple[int, int] | None = option(
        None, "--image-size",
        "image side, or height x width, in pixels; for Qwen2-VL it sets the patch grid, hence the number of "
        "visual tokens, as its processor does",
        metavar="N|HxW", parse=parse_image_size, default_text="the model's")
    max_pixels: int | None = option(
        None, "--max-pixels",
        "pixel budget of processors that resize by pixel count (Qwen2-VL-style smart_resize): an image above it is "
        "scaled down to fit", metavar="N", parse=positive_int,
        default_text="the checkpoint's preprocessor_config.json, else the processor's", noun="max pixels")
    min_pixels: int | None = option(
        None, "--min-pixels", "the same processors' lower bound: an image below it is scaled up", metavar="N",
        parse=positive_int, default_text="the checkpoint's preprocessor_config.json, else the processor's",
        noun="min pixels")
    video_frames: int | None = option(
        None, "--video-frames",
        "frames of one video per sample, after the processor's sampling (Qwen2/2.5/3-VL-style models: frames grouped "
        "by the temporal patch of 2, each frame resized like an image within the video processor's pixel budget; "
        "LLaVA-NeXT-Video, LLaVA-OneVision, Video-LLaVA: frames at the vision tower's size); "
        "with it, --images defaults to 0", metavar="N", parse=positive_int, default_text="no video",
        noun="video frames")
    audio_seconds: float | None = option(
        None, "--audio-seconds", "audio length in seconds (Whisper: 30; audio-language models: per sample)", metavar="S", parse=positive_seconds,
        default_text="the model's", noun="audio length")
    target_len: int | None = option(
        None, "--target-len", "decoder tokens for encoder-decoder models (Whisper: 225, a typical transcript; 448 is its limit)", metavar="N", parse=positive_int,
        default_text="the model's", noun="target length")
    precision: str = option(
        "fp32", "--precision",
        "`fp16-mixed`: autocast float16 + GradScaler, float32 weights; `bf16-mixed`: autocast bfloat16, float32 "
        "weights; `bf16`: bfloat16 weights, gradients and optimizer state; `fp16`: the same in float16, no "
        "autocast and no GradScaler (as `model.half()` training). Autocast follows PyTorch's CUDA op "
        "policy, weight-cast cache included (mixed precisions: cuda target only)",
        choices=PRECISIONS)
    optimizer: str = option(
        "adamw", "--optimizer",
        "the optimizer; `none`: forward and backward only (no optimizer state, no step; gradients are still made "
        "and cleared as `--zero-grad` says)",
        choices=OPTIMIZERS)
    optimizer_impl: str = option(
        "auto", "--optimizer-impl",
        "`auto`: PyTorch's default (foreach for the cuda target, for-loop for cpu), except AdamW under the "
        "`trainer` loop: fused, as Hugging Face `TrainingArguments.optim` (`adamw_torch_fused`) picks",
        choices=OPTIMIZER_IMPLS, noun="optimizer implementation")
    freeze: tuple[str, ...] = option(
        (), "--freeze", "freeze parameters whose name matches this shell pattern; applied after `--train`",
        metavar="PATTERN", repeatable=True)
    train: tuple[str, ...] = option(
        (), "--train", "train only parameters whose name matches this shell pattern", metavar="PATTERN",
        repeatable=True)
    iterations: int = option(
        MIN_ITERATIONS, "--iterations", f"iterations to trace (at least {MIN_ITERATIONS})", metavar="N",
        parse=positive_int)
    target: str = option(
        "cuda", "--target",
        "which allocator is predicted: `cuda` rounds every block to 512 bytes as the CUDA caching allocator does "
        "and predicts `torch.cuda.max_memory_allocated`; `cpu` predicts the CPU allocator's peak",
        choices=TARGETS, analyze_only=True)
    attn_implementation: str = option(
        "auto", "--attn",
        "transformers' `attn_implementation`; `auto`: what transformers picks when none is given (`sdpa` where the "
        "model class supports it, else `eager`), shown resolved in the report; for SDPA the kernel the target GPU would pick (flash, "
        "memory-efficient or math, by dtype, head size, mask and compute capability) and the tensors it saves "
        "for backward",
        choices=ATTN_IMPLEMENTATIONS, noun="attention implementation")
    gradient_checkpointing: bool = option(
        False, "--gradient-checkpointing", "transformers' gradient checkpointing (non-reentrant)")
    inputs: tuple[str, ...] = option(
        (), "--input",
        "an input tensor, e.g. `x=float32[32,3,224,224]`, passed positionally (required for `module:function` "
        "models); integers may add `<HIGH` for their value range, e.g. `'y=int64[32]<1000'` (quoted: the shell reads `<` as a redirect)",
        metavar="NAME=DTYPE[DIMS]", repeatable=True)
    gpu: str = option(
        DEFAULT_GPU, "--gpu", "target GPU of the cuda target (`memgraph gpus` lists them)", metavar="NAME")
    allocator_conf: str = option(
        "", "--allocator-conf",
        "CUDA caching allocator settings, as in `PYTORCH_CUDA_ALLOC_CONF`, e.g. `expandable_segments:True`",
        metavar="CONF", env="PYTORCH_CUDA_ALLOC_CONF")
    images: int | None = option(
        None, "--images",
        "images per sample for image-text models: each image's tokens are placed in the prompt (LLaVA: 576 per "
        "336-px image) and text fills the rest of `--seq-len`",
        metavar="N", parse=positive_int, default_text="the model's", noun="images per sample")
    loop: str = option(
        "auto", "--loop",
        "`auto`: `trainer` for transformers models (what fine-tuning with the Hugging Face Trainer runs), `plain` "
        "for `module:function` models; `plain`: `out = model(**batch); out.loss.backward(); opt.step(); opt.zero_grad()`, so the outputs (logits, "
        "a KV cache) live through the whole step; `trainer` drops them once the loss is taken, as Hugging Face "
        "`Trainer.training_step` does",
        choices=LOOPS, noun="training loop")
    stage: str | None = option(
        None, "--stage",
        "vision-language training stage (LLaVA recipe): `1` trains the projector, `2` the projector and "
        "language model (vision tower frozen), `full` everything; the groups come from the model's structure, "
        "and `--train`/`--freeze` narrow the stage's set",
        choices=STAGES)
    no_kv_cache: bool = option(
        False, "--no-kv-cache",
        "transformers models: every config's `use_cache` set false, so the training forward builds no key/value "
        "cache (transformers builds one when `use_cache` is true, the default of most LM configs; torchtune's models "
        "have none, and gradient checkpointing turns it off)")
    # -- training-loop semantics (memgraph/step/training_step.py) --
    zero_grad: str = option(
        "set-to-none", "--zero-grad",
        "how gradients are cleared after the step: `set-to-none` frees them (`zero_grad()`, PyTorch >= 2.0); `zero` "
        "keeps them allocated, zeroed in place, through the next forward (`zero_grad(set_to_none=False)`, the default "
        "before PyTorch 2.0); `none` never clears them (scripts without `zero_grad`: they accumulate in place)",
        choices=ZERO_GRAD_MODES, noun="zero_grad mode")
    loss: str = option(
        "auto", "--loss",
        "loss of `module:function` models: `auto` takes a scalar output (or `.loss`) as it is, else `out.sum()`; "
        "`sum`: `out.sum()` (also for transformers models: their logits summed, labels not passed, as "
        "`logits.sum().backward()` benchmarks do); `cross-entropy`: `F.cross_entropy(out, target)`, where `target` is the `--input` named "
        "`target` (integer class indices; it is not passed to the model), e.g. `--input 'target=int64[32]<10'`; for a "
        "transformers causal LM, `F.cross_entropy(logits.flatten(0, 1), labels.flatten())` in the logits' dtype, as "
        "hand-written loops do (transformers' own loss upcasts the logits to float32); "
        "`chunked-ce` (transformers causal LMs): the `lm_head` and cross-entropy in 8 chunks of the sequence, each "
        "upcast to float32 on its own, as torchtune's `CEWithChunkedOutputLoss`",
        choices=LOSSES)
    # -- fine-tuning knobs (LoRA through PEFT, QLoRA storage, gradient accumulation, optimizer in backward) --
    lora_rank: int | None = option(
        None, "--lora-rank",
        "train LoRA adapters of this rank (PEFT's `get_peft_model`; the base model is frozen)",
        metavar="R", parse=positive_int, default_text="no LoRA", noun="LoRA rank")
    lora_alpha: int | None = option(
        None, "--lora-alpha", "LoRA scaling numerator (with `--lora-rank`)", metavar="A", parse=positive_int,
        default_text="8, PEFT's", noun="LoRA alpha")
    lora_targets: str | None = option(
        None, "--lora-targets",
        "modules that get adapters: `all-linear`, or module names such as `q_proj,v_proj` (with `--lora-rank`)",
        metavar="NAMES", default_text="PEFT's default for the model type", noun="LoRA targets")
    lora_dropout: float | None = option(
        None, "--lora-dropout", "dropout on the adapters' input (with `--lora-rank`)", metavar="P",
        parse=probability, default_text="0.0, PEFT's", noun="LoRA dropout")
    lora_dtype: str | None = option(
        None, "--lora-dtype",
        "dtype of the adapters of a bf16/fp16 model: `float32` upcasts them as PEFT does by default "
        "(`get_peft_model(..., autocast_adapter_dtype=True)`), so each adapted layer's dropout and adapter matmuls "
        "run in float32; `model` keeps them in the model's dtype (`autocast_adapter_dtype=False`, as LitGPT's "
        "bf16-true LoRA; with `--lora-rank`)",
        choices=LORA_DTYPES, default_text="float32, PEFT's", noun="LoRA dtype")
    dora: bool = option(False, "--dora", "weight-decomposed LoRA (PEFT's `use_dora`; with `--lora-rank`)")
    quantize: str | None = option(
        None, "--quantize",
        "store the frozen base linear weights as bitsandbytes 0.50 does (`4bit`: NF4, blocks of 64, double "
        "quantisation, compute in the model's dtype, as QLoRA; `nf4`: the same without double quantisation, the "
        "absmax kept as float32 per block (`bnb_4bit_use_double_quant=False`, LitGPT's `bnb.nf4`); `8bit`: LLM.int8, threshold 6.0, no outlier "
        "column modelled); needs `--lora-rank`, cuda target, fp32 or bf16",
        choices=QUANTIZE, default_text="none")
    bnb_version: str | None = option(
        None, "--bnb-version",
        "the bitsandbytes release the 4-bit step runs (with `--quantize 4bit|nf4`): before 0.44 `MatMul4Bit` keeps "
        "each quantised layer's input until the graph is freed, and before 0.50 its forward always dequantises the "
        "whole weight (memgraph/facts/bitsandbytes.py)",
        choices=BNB_VERSIONS, metavar="X.Y", default_text=f"{MODELLED_BNB_VERSION}", noun="bitsandbytes version")
    no_kbit_preparation: bool = option(
        False, "--no-kbit-preparation",
        "with `--quantize`: skip PEFT's `prepare_model_for_kbit_training`, which is otherwise assumed (gradient "
        "checkpointing on, reentrant; input embeddings' output requiring grad; the base model's bfloat16/float16 "
        "parameters that are not quantised, norms, embeddings and `lm_head`, upcast to float32)")
    grad_accum: int = option(
        1, "--grad-accum", "micro-steps per optimizer step; gradients accumulate between them", metavar="N",
        parse=positive_int, noun="gradient accumulation steps")
    optimizer_in_backward: bool = option(
        False, "--optimizer-in-backward",
        "step each parameter in its post-accumulate-grad hook and free its gradient there (torchtune's "
        "optimizer-in-backward)")
    gpu_memory: int | None = option(
        None, "--gpu-memory",
        "the CUDA total of a board the catalog lacks (`torch.cuda.get_device_properties(0).total_memory`), e.g. "
        "`48GiB`; the architecture (compute capability, workspaces, context) is `--gpu`'s",
        metavar="BYTES", parse=parse_gpu_memory, default_text="the --gpu board's", noun="GPU memory", analyze_only=True)
    context_bytes: int | None = option(
        None, "--context-bytes",
        "the CUDA context and kernel images of the process (nvidia-smi minus "
        "`torch.cuda.memory_reserved()` after a step), e.g. `512MiB` or `1.2GiB`, measured on your stack; it "
        "replaces the estimate, and its range leaves the upper bound",
        metavar="BYTES", parse=parse_bytes, default_text="estimated", noun="context bytes", analyze_only=True)
    cuda_version: str | None = option(
        None, "--cuda-version",
        "CUDA major version of the torch build (CUDA 13 needs compute capability >= 7.5); the "
        "context estimate's figures are the same for both, the GPUs they run on are not",
        choices=tuple(map(str, CUDA_MAJORS)),
        default_text=f"`{PYPI_CUDA_MAJOR}` (the PyPI wheel of torch 2.13), `12` on Volta", noun="CUDA version",
        analyze_only=True)
    module_loading: str = option(
        "lazy", "--module-loading",
        "`CUDA_MODULE_LOADING` of the run: `lazy` (the default since CUDA 12.2) loads the kernels a "
        "step uses, `eager` every kernel image of libtorch_cuda, cuBLAS and cuDNN at start (about 1 GiB more)",
        choices=MODULE_LOADINGS, noun="module loading", analyze_only=True)
    # -- multi-GPU, per rank (memgraph/trace/parallel/distributed.py) --
    nproc: int = option(
        1, "--nproc",
        "world size: the number of GPUs (ranks) of a `--strategy` run; the report is rank 0's memory, traced by "
        "running torch.distributed's own code on a fake process group",
        metavar="N", parse=positive_int, noun="world size")
    strategy: str | None = option(
        None, "--strategy",
        "`ddp`: `DistributedDataParallel` (gradient buckets); `fsdp`: FSDP2 `fully_shard` on every transformer "
        "block, then the root (sharded parameters, gradients and optimizer state; gathered parameters per block); "
        "`zero1`: DDP with `ZeroRedundancyOptimizer` (ZeRO stage 1: each rank keeps the optimizer state of its "
        "partition of the parameters); `zero2`: FSDP2 with `reshard_after_forward=False` (gradients and optimizer "
        "state sharded, parameters unsharded from forward to the end of backward, but sharded at rest, unlike "
        "DeepSpeed); `zero3`: FSDP2 with `reshard_after_forward=True` (parameters, gradients and optimizer state "
        "sharded; the same as `fsdp`); `tp`: tensor parallelism over all N ranks with "
        "`torch.distributed.tensor.parallel` and the model's `base_model_tp_plan` (q/k/v/gate/up column-wise, "
        "o/down row-wise; embedding and head sharded on the vocabulary); `fsdp+tp`: 2-D, a `(dp, tp)` `DeviceMesh` of "
        "N / `--tp-size` x `--tp-size` ranks, the TP plan applied on `tp`, then FSDP2 `fully_shard` over `dp` (torchtitan's "
        "order); `fsdp1`: FSDP1 `FullyShardedDataParallel` (flat parameters) with `transformer_auto_wrap_policy` on "
        "every transformer block (`--fsdp1-sharding`, `--fsdp1-use-orig-params`)",
        choices=STRATEGIES, default_text="none (one GPU)")
    tp_size: int | None = option(
        None, "--tp-size",
        "`fsdp+tp`: the tensor-parallel degree T (ranks per TP group; it divides N); FSDP2 shards over the N / T "
        "data-parallel groups", metavar="T", parse=positive_int, default_text="required with fsdp+tp",
        noun="tensor-parallel size")
    sequence_parallel: bool = option(
        False, "--sequence-parallel",
        "`tp`, `fsdp+tp`: sequence parallelism (torchtitan's Llama plan): the norms `SequenceParallel`, activations "
        "between the TP regions sharded on the sequence, all-gathered into q/k/v and gate/up and reduce-scattered "
        "out of o/down")
    nnodes: int = option(
        1, "--nnodes",
        "`fsdp`, `zero2`, `zero3`: hybrid sharding (FSDP2 HSDP) over M nodes of N / M GPUs: a `(replicate, shard)` "
        "`DeviceMesh` of M x N / M, parameters sharded within a node and replicated across nodes (gradients "
        "all-reduced across them); `fsdp1` with `--fsdp1-sharding HYBRID_SHARD`; 1: shard over all N ranks", metavar="M", parse=positive_int, noun="node count")
    no_reshard_after_forward: bool = option(
        False, "--no-reshard-after-forward",
        "`fsdp`: `fully_shard(reshard_after_forward=False)` on the blocks: gathered parameters stay from forward "
        "to backward")
    fsdp1_sharding: str = option(
        "FULL_SHARD", "--fsdp1-sharding",
        "`fsdp1`: FSDP1's `ShardingStrategy`: `FULL_SHARD` (parameters gathered per unit for forward and again for "
        "backward), `SHARD_GRAD_OP` (kept unsharded from forward to backward), `NO_SHARD` (replicated, gradients "
        "all-reduced), `HYBRID_SHARD` (FULL_SHARD within a node, replicated across `--nnodes` nodes)",
        choices=FSDP1_SHARDING)
    fsdp1_use_orig_params: bool = option(
        False, "--fsdp1-use-orig-params",
        "`fsdp1`: `FullyShardedDataParallel(use_orig_params=True)`: the optimizer sees the original parameters "
        "(views into the flat parameter); off: FSDP1's default, one `FlatParameter` per unit")
    fsdp1_backward_prefetch: str = option(
        "BACKWARD_PRE", "--fsdp1-backward-prefetch",
        "`fsdp1`: FSDP1's `backward_prefetch`: `BACKWARD_PRE` (torch's default: the next unit's all-gather is issued "
        "before the current unit's gradient computation), `BACKWARD_POST` (after it), `NONE` (accelerate's default, "
        "no prefetch)", choices=FSDP1_BACKWARD_PREFETCH)
    fsdp_mixed_precision: bool = option(
        False, "--fsdp-mixed-precision",
        "`fsdp`, `zero2`, `zero3` with `--precision bf16-mixed`: FSDP2's `MixedPrecisionPolicy(param_dtype=bfloat16, "
        "reduce_dtype=float32)` instead of autocast: float32 shards, parameters gathered and used in bfloat16, "
        "gradients reduced in float32; assumed there unless `--fsdp-autocast`; `fsdp1`: FSDP1's `MixedPrecision` with "
        "param, reduce and buffer dtypes bfloat16 (accelerate's), also on the cpu target")
    fsdp_autocast: bool = option(
        False, "--fsdp-autocast",
        "`fsdp`, `zero2`, `zero3`, `fsdp+tp` with `--precision bf16-mixed`: autocast over the gathered float32 "
        "weights and no FSDP2 `MixedPrecisionPolicy` (a plain FSDP2 script); without it the policy of "
        "`--fsdp-mixed-precision` is assumed, as accelerate's FSDP plugin sets for `mixed_precision: bf16`")
    deepspeed: str | None = option(
        None, "--deepspeed",
        "a DeepSpeed config (ds_config.json, ZeRO stage 0-3; offload_optimizer and ZeRO-3's offload_param to the "
        "CPU: their host memory a note; NVMe refused): the model wrapped by DeepSpeed's own engine "
        "(`deepspeed.initialize`) on each of `--nproc` ranks, Hugging Face `\"auto\"` values resolved as the "
        "Trainer does (memgraph/ds_engine; needs `pip install memgraph[deepspeed]`)",
        metavar="ds_config.json", default_text="none")
    gradient_as_bucket_view: bool = option(
        False, "--gradient-as-bucket-view",
                "`ddp`, `zero1`: `DistributedDataParallel(gradient_as_bucket_view=True)`: gradients are views of the buckets")
    # -- activation offload, checkpointing variants --
    activation_offload: bool = option(
        False, "--activation-offload",
        "forward and loss under `torch.autograd.graph.save_on_cpu(pin_memory=True)`: every tensor autograd saves is "
        "copied to host memory, and copied back to the device when backward needs it (the host bytes are a note)")
    checkpoint_impl: str = option(
        "non-reentrant", "--checkpoint-impl",
        "with `--gradient-checkpointing`: `torch.utils.checkpoint`'s `use_reentrant=False` (saved-tensor hooks) or "
        "`use_reentrant=True` (recompute in an autograd.Function; the embedding output made to require grad)",
        choices=CHECKPOINT_IMPLS, noun="checkpoint implementation")
    checkpoint_every: int = option(
        1, "--checkpoint-every",
        "with `--gradient-checkpointing`: checkpoint only every K-th layer (layers 0, K, 2K, ...; the others keep "
        "their activations)", metavar="K", parse=positive_int, noun="checkpoint interval")
    # -- torch.compile (memgraph/compiled/) --
    compile: bool = option(
        False, "--compile",
        "the model under `torch.compile`: Dynamo, AOTAutograd and PyTorch's min-cut partitioner as PyTorch runs them; "
        "Inductor's C++ code on the cpu target, its CUDA code (Triton not run) on the cuda target; the loss outside "
        "the model (unless `--compile-loss`), the optimizer step (unless `--compile-optimizer`) and the loop stay "
        "eager")
    compile_mode: str = option(
        "default", "--compile-mode", "with `--compile`: `torch.compile(mode=...)`; reduce-overhead is refused (CUDA "
        "graphs keep their own memory pool, not modelled)", choices=COMPILE_MODES, noun="compile mode")
    compile_blocks: bool = option(
        False, "--compile-blocks",
        "with `--compile`: each repeated block (the classes of the model's `_no_split_modules`, the blocks FSDP "
        "wraps) compiled on its own and the rest of the model eager, as torchtune's `compile_model` and PyTorch's "
        "regional compilation recipe do; `--strategy fsdp` compiles so anyway")
    compile_loss: bool = option(
        False, "--compile-loss",
        "with `--compile`: the loss outside the model compiled too (`torch.compile(loss_fn)`, as torchtitan does; "
        "with `--loss chunked-ce` one chunk's cross-entropy, as torchtune's `compile: True`; a transformers "
        "model's own loss is inside its compiled forward already)")
    compile_optimizer: bool = option(
        False, "--compile-optimizer",
        "with `--compile`: the optimizer step compiled too (`torch.compile(optimizer.step)`, PyTorch's compiled "
        "optimizer recipe); fused, foreach and for-loop")
    activation_memory_budget: float | None = option(
        None, "--activation-memory-budget",
        "with `--compile`: `torch._functorch.config.activation_memory_budget`, the knapsack partitioner's share of "
        "the eager activations to keep", metavar="F", parse=budget_fraction, default_text="1.0, min-cut",
        noun="activation memory budget")
    # -- tracing speed (memgraph/trace/shortcuts/depth_run.py) --
    depth_synthesis: str = option(
        "auto", "--depth-synthesis",
        "`auto`: a model with 10 or more repeated layers is traced at 3 and 4 layers (and 2 when a note whose "
        "words carry its numbers differs) and the full depth is synthesized by repeating one layer, after checking that this reproduces the "
        "4-layer trace exactly (any difference: the full trace, with a note); `off`: always trace every layer",
        choices=DEPTH_SYNTHESIS, analyze_only=True)

    def __post_init__(self):
        # the Python API's values: each field's type (model_spec/option_types.py); counts and choices below
        check_types(self, {f.name: flag_of(f).name for f in fields(self)},
                    {f.name for f in fields(self) if flag_of(f).parse is positive_int or flag_of(f).choices})
        if isinstance(self.iterations, int) and not MIN_ITERATIONS <= self.iterations <= MAX_ITERATIONS:
            raise MemgraphError(
                f"iterations {self.iterations}: pass --iterations from {MIN_ITERATIONS} (the steady state needs "
                f"2) to {MAX_ITERATIONS} (every iteration from the second repeats the same events)"
            )
        for name in ("stage", "cuda_version"):  # str choices; the Python API may pass 2 or 13
            if getattr(self, name) is not None:
                object.__setattr__(self, name, str(getattr(self, name)))
        if isinstance(self.image_size, (list, tuple)):  # (H, W); a list when read back from JSON
            if len(self.image_size) != 2:
                raise MemgraphError(f"image size {self.image_size!r} is not N or HxW: pass --image-size 448 or 448x672")
            for v in self.image_size:
                _positive("image size", v, "--image-size")
            object.__setattr__(self, "image_size", tuple(self.image_size))
        elif self.image_size is not None:
            _positive("image size", self.image_size, "--image-size")
        if self.audio_seconds is not None and not 0 < self.audio_seconds < float("inf"):
            raise MemgraphError(f"audio length {self.audio_seconds!r} is not positive: pass --audio-seconds > 0")
        for f in fields(self):  # what the flags declare: positive integers and choices
            flag, value = flag_of(f), getattr(self, f.name)
            if value is None and f.default is None:
                continue
            if flag.parse is positive_int:
                _positive(noun_of(f), value, flag.name)
            if flag.choices is not None:
                _choice(noun_of(f), value, flag.choices, flag.name)
        if self.allocator_conf:
            try:
                AllocatorOptions.from_env_string(self.allocator_conf)
            except ValueError as e:
                raise MemgraphError(f"--allocator-conf {self.allocator_conf!r}: {e}") from None

        try:
            gpu = get_gpu(self.gpu)
        except KeyError as e:
            raise MemgraphError(f"{e.args[0]}: pass --gpu with a name from 'memgraph gpus'") from None
        if self.gpu_memory is not None:
            if isinstance(self.gpu_memory, bool) or not isinstance(self.gpu_memory, int) or self.gpu_memory <= 0:
                raise MemgraphError(f"GPU memory {self.gpu_memory!r} is not a byte count: pass --gpu-memory e.g. 48GiB")
            gpu = with_capacity(gpu, self.gpu_memory)
        object.__setattr__(self, "gpu", gpu.key)
        # DeepSpeed casts, no autocast; so does --strategy fsdp1's MixedPrecision (its CPU ground truth needs it)
        if not (self.precision in MIXED_PRECISIONS and (self.deepspeed is not None or self.target == "cpu"
                                                         and self.strategy == "fsdp1" and self.fsdp_mixed_precision)):
            _precision_supported(self.precision, self.target, gpu)
        _knobs_consistent(self)
        _remaining_knobs_consistent(self)
        _context_options(self, gpu)
        _strategy_consistent(self)
        _compile_consistent(self)
        if self.attn_implementation == "flash_attention_2" and self.target != "cuda":
            raise MemgraphError("--attn flash_attention_2 needs a GPU: use --target cuda, or --attn sdpa on the cpu target")

    def to_dict(self) -> dict:
        d = asdict(self)
        for f in fields(self):
            if flag_of(f).repeatable:
                d[f.name] = list(d[f.name])
        return d


def _strategy_consistent(opts: TrainingOptions) -> None:
    if opts.deepspeed is not None and opts.strategy is not None:
        raise MemgraphError(f"--deepspeed and --strategy {opts.strategy} both wrap the model: pass one of them")
    if opts.nproc > 1 and opts.strategy is None and opts.deepspeed is None:
        raise MemgraphError(f"--nproc {opts.nproc} needs a multi-GPU strategy: pass --strategy "
                            f"{' or '.join(STRATEGIES)}")
    if opts.strategy == "fsdp+tp":
        t = opts.tp_size
        if t is None or not 1 < t < opts.nproc or opts.nproc % t:
            shown = "no --tp-size" if t is None else f"--tp-size {t}"
            raise MemgraphError(f"--strategy fsdp+tp --nproc {opts.nproc} with {shown}: pass --tp-size T with 1 < T < "
                                f"{opts.nproc} dividing {opts.nproc} (e.g. --tp-size 2); T = N is --strategy tp")
    elif opts.tp_size is not None:
        raise MemgraphError(f"--tp-size {opts.tp_size} is the TP degree of --strategy fsdp+tp: pass that strategy, "
                            "or drop it (--strategy tp uses all --nproc ranks)")
    if opts.sequence_parallel and opts.strategy not in TP_STRATEGIES:
        raise MemgraphError("--sequence-parallel is a tensor-parallel option: pass --strategy tp or fsdp+tp, or drop it")
    _fsdp1_consistent(opts)
    if opts.nnodes > 1 and (opts.strategy not in FSDP_STRATEGIES + ("fsdp1",) or opts.nproc % opts.nnodes
                            or opts.nproc // opts.nnodes < 2):
        raise MemgraphError(f"--nnodes {opts.nnodes} with --nproc {opts.nproc} --strategy {opts.strategy}: hybrid "
                            f"sharding needs --strategy {'|'.join(FSDP_STRATEGIES)} and --nproc a multiple of --nnodes "
                            "with at least 2 GPUs per node (--nproc is the total number of GPUs)")
    if opts.no_reshard_after_forward and opts.strategy not in ("fsdp", "fsdp+tp"):
        raise MemgraphError("--no-reshard-after-forward is an FSDP option: pass --strategy fsdp, or drop it "
                            "(zero2 never reshards after forward, zero3 always does)")
    sharded = FSDP_STRATEGIES + ("fsdp+tp", "fsdp1")
    if opts.fsdp_mixed_precision and (opts.strategy not in sharded or opts.precision != "bf16-mixed"):
        raise MemgraphError("--fsdp-mixed-precision replaces autocast under FSDP2: pass --strategy "
                            f"{'|'.join(sharded)} --precision bf16-mixed with it, or drop it")
    if opts.fsdp_autocast and (opts.strategy not in sharded or opts.precision != "bf16-mixed"
                               or opts.fsdp_mixed_precision):
        raise MemgraphError("--fsdp-autocast keeps autocast under FSDP2 without a MixedPrecisionPolicy: pass --strategy "
                            f"{'|'.join(sharded)} --precision bf16-mixed with it, without --fsdp-mixed-precision")
    if opts.gradient_as_bucket_view and opts.strategy not in ("ddp", "zero1"):
        raise MemgraphError("--gradient-as-bucket-view is a DDP option: pass --strategy ddp or zero1, or drop it")


def _fsdp1_consistent(opts: TrainingOptions) -> None:
    """--fsdp1-sharding / --fsdp1-use-orig-params belong to --strategy fsdp1; HYBRID_SHARD goes with --nnodes M > 1."""
    if opts.strategy != "fsdp1":
        given = [f for f, on in (("--fsdp1-sharding", opts.fsdp1_sharding != "FULL_SHARD"),
                                 ("--fsdp1-use-orig-params", opts.fsdp1_use_orig_params),
                                 ("--fsdp1-backward-prefetch", opts.fsdp1_backward_prefetch != "BACKWARD_PRE")) if on]
        if given:
            raise MemgraphError(f"{given[0]} is an FSDP1 option: pass --strategy fsdp1 with it, or drop it")
        return
    if (opts.fsdp1_sharding == "HYBRID_SHARD") != (opts.nnodes > 1):
        raise MemgraphError(f"--fsdp1-sharding {opts.fsdp1_sharding} with --nnodes {opts.nnodes}: HYBRID_SHARD shards "
                            "within a node and replicates across nodes, so it needs --nnodes M > 1, and --nnodes M > 1 "
                            "needs --fsdp1-sharding HYBRID_SHARD")


def compile_refusal(values: dict) -> str | None:
    """Why ``--compile`` with these option values (TrainingOptions fields; the rest at their defaults) is refused,
    or None: for a config file that asks for torch.compile (memgraph/job_config), checked before it is taken."""
    given = {f.name: f.default for f in fields(TrainingOptions)}
    given.update(values)
    try:
        _compile_consistent(SimpleNamespace(**given))
    except MemgraphError as e:
        return str(e)
    return None


def _zero_stage(path: str) -> int | None:
    """The ZeRO stage a DeepSpeed config file asks for (``zero_optimization.stage``); None where the file cannot be
    read as one (memgraph/ds_engine/config.py ``read_config`` says why, where the engine reads it)."""
    try:
        zero = json.loads(Path(path).read_text()).get("zero_optimization") or {}
        return int(zero.get("stage", 0))
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def _compile_consistent(o: TrainingOptions) -> None:
    if not o.compile:
        given = [f for f, on in (("--compile-mode", o.compile_mode != "default"), ("--compile-loss", o.compile_loss),
                                 ("--compile-blocks", o.compile_blocks),
                                 ("--compile-optimizer", o.compile_optimizer),
                                 ("--activation-memory-budget", o.activation_memory_budget is not None)) if on]
        if given:
            raise MemgraphError(f"{given[0]} is a torch.compile option: pass --compile with it, or drop it")
        return
    if o.compile_mode == "reduce-overhead":
        raise MemgraphError("--compile-mode reduce-overhead: CUDA graphs keep their own memory pool, which memgraph "
                            "does not model: use --compile-mode default or max-autotune-no-cudagraphs")
    if o.activation_memory_budget is not None and not 0 < o.activation_memory_budget <= 1:
        raise MemgraphError(f"activation memory budget {o.activation_memory_budget!r} is not in (0, 1]: pass "
                            "--activation-memory-budget F, e.g. 0.5")
    if o.strategy not in COMPILED_STRATEGIES:
        raise MemgraphError(f"--compile with --strategy {o.strategy} is not modelled: use --strategy ddp or fsdp with "
                            "--compile, or drop --compile")
    if o.deepspeed is not None and (o.compile_blocks or o.compile_optimizer):
        # accelerate 1.15 compiles a DeepSpeed engine's module whole (engine.compile) or, with regional compilation,
        # every leaf module too (utils/other.py compile_regions_deepspeed); the optimizer step is DeepSpeed's own
        flag = "--compile-blocks" if o.compile_blocks else "--compile-optimizer"
        raise MemgraphError(f"{flag} with --deepspeed is not modelled (memgraph compiles the DeepSpeed engine's "
                            "module whole, as accelerate's engine.compile does): drop " + flag)
    if o.deepspeed is not None and _zero_stage(o.deepspeed) == 3:
        # measured (tiny-llama, 2 gloo ranks, bf16, deepspeed 0.19.8, torch 2.13.0): ZeRO-3's per-module fetch and
        # release hooks split the compiled module into 22 graphs with 45 breaks and hit Dynamo's recompile limit; the
        # prediction read 7.5% under the real steady state
        raise MemgraphError(f"--compile with --deepspeed {o.deepspeed} (ZeRO stage 3) is not modelled: use ZeRO "
                            "stage 1 or 2 with --compile, or drop --compile")
    if o.compile_blocks and o.strategy == "ddp":
        raise MemgraphError("--compile-blocks with --strategy ddp is not modelled (DDP is compiled whole, its graph "
                            "split at the buckets): drop --compile-blocks, or use --strategy fsdp")
    if o.strategy is not None and o.gradient_checkpointing:  # fsdp: measured 5.5% under 2 gloo ranks (tiny-llama,
        # transformers' checkpoint around each compiled block); ddp: not measured
        raise MemgraphError(f"--compile with --gradient-checkpointing and --strategy {o.strategy} is not modelled: "
                            "drop one of them")
    unmodelled = [f for f, on in (("--activation-offload", o.activation_offload),
                                  ("--quantize", o.quantize is not None)) if on]
    if unmodelled:
        raise MemgraphError(f"--compile with {unmodelled[0]} is not modelled: drop one of them")


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


def _knobs_consistent(o: TrainingOptions) -> None:
    """The fine-tuning knobs that only make sense together, or on one target."""
    if o.lora_rank is None:
        given = [flag for flag, on in (("--lora-alpha", o.lora_alpha is not None), ("--lora-targets", o.lora_targets),
                                       ("--lora-dropout", o.lora_dropout is not None), ("--dora", o.dora),
                                       ("--lora-dtype", o.lora_dtype is not None),
                                       ("--quantize", o.quantize)) if on]
        if given:
            raise MemgraphError(f"{given[0]} needs --lora-rank R: the adapters are what trains")
    elif o.train or o.freeze or o.stage is not None:
        raise MemgraphError("--lora-rank trains the adapters only (PEFT freezes the rest): drop --train/--freeze/--stage")
    if o.lora_dropout is not None and not 0 <= o.lora_dropout < 1:
        raise MemgraphError(f"LoRA dropout {o.lora_dropout!r} is not in [0, 1): pass --lora-dropout P")
    if o.quantize is not None and o.target != "cuda":
        raise MemgraphError(f"--quantize {o.quantize} emulates bitsandbytes' CUDA kernels: use --target cuda")
    if o.quantize is not None and o.precision in MIXED_PRECISIONS:
        raise MemgraphError(f"--quantize {o.quantize} with --precision {o.precision} is not modelled: QLoRA recipes "
                            "use --precision bf16 (compute dtype bfloat16)")
    if o.bnb_version is not None and o.quantize not in ("4bit", "nf4"):
        raise MemgraphError(f"--bnb-version {o.bnb_version} changes the 4-bit path only: pass --quantize 4bit or nf4, "
                            "or drop --bnb-version")
    if o.no_kbit_preparation and o.quantize is None:
        raise MemgraphError("--no-kbit-preparation skips PEFT's k-bit preparation of a quantised model: pass --quantize, "
                            "or drop it")
    if o.quantize is not None and o.dora:
        raise MemgraphError("--dora with --quantize is not modelled: drop one of them")
    if o.optimizer in BNB_8BIT_OPTIMIZERS and o.target != "cuda":
        raise MemgraphError(f"--optimizer {o.optimizer} emulates bitsandbytes' CUDA kernels: use --target cuda")
    if o.optimizer_in_backward and o.precision == "fp16-mixed":
        raise MemgraphError("--optimizer-in-backward with --precision fp16-mixed: the GradScaler unscales all gradients "
                            "before one step, which per-parameter steps cannot do; use bf16-mixed or bf16")
    if o.optimizer_in_backward and o.grad_accum > 1:
        raise MemgraphError("--optimizer-in-backward steps at every backward, so gradients cannot accumulate: "
                            "drop --grad-accum (torchtune refuses the same combination)")


def _remaining_knobs_consistent(o: TrainingOptions) -> None:
    """--checkpoint-impl / --checkpoint-every refine --gradient-checkpointing; --loss chunked-ce and FSDP."""
    if not o.gradient_checkpointing:
        if o.checkpoint_impl != "non-reentrant":
            raise MemgraphError(f"--checkpoint-impl {o.checkpoint_impl} needs --gradient-checkpointing")
        if o.checkpoint_every != 1:
            raise MemgraphError(f"--checkpoint-every {o.checkpoint_every} needs --gradient-checkpointing")
    if o.loss == "chunked-ce" and o.strategy in ("fsdp", "fsdp+tp", "fsdp1"):
        raise MemgraphError("--loss chunked-ce calls lm_head outside the FSDP root's forward, where its parameters "
                            "are sharded: drop --loss or --strategy fsdp")


def _context_options(opts: TrainingOptions, gpu) -> None:
    """--cuda-version and --module-loading must describe a stack that runs on the GPU; --context-bytes is positive."""
    if opts.context_bytes is not None:
        _positive("context bytes", opts.context_bytes, "--context-bytes")
    try:
        cuda_context_for(gpu.compute_capability, opts.cuda_version and int(opts.cuda_version), opts.module_loading)
    except ValueError as e:
        raise MemgraphError(f"--cuda-version {opts.cuda_version} on {gpu.name}: {e}: pass --cuda-version 12") from None


def _positive(label: str, value, flag: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise MemgraphError(f"{label} {value!r} is not a positive integer: pass {flag} N with N >= 1")
    if value > MAX_COUNT:
        raise MemgraphError(f"{label} {value!r} is more than memgraph can use: pass {flag} N with N <= {MAX_COUNT:,}")


def _choice(label: str, value: str, allowed: tuple[str, ...], flag: str) -> None:
    if value not in allowed:
        raise MemgraphError(f"unknown {label} {value!r}: pass {flag} one of {', '.join(allowed)}")
