"""The ``memgraph`` command line: analyze, measure, models."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from memgraph.errors import MemgraphError
from memgraph.facts.gpus import DEFAULT_GPU
from memgraph.model_spec.options import (
    ATTN_IMPLEMENTATIONS,
    LOOPS,
    OPTIMIZER_IMPLS,
    OPTIMIZERS,
    PRECISIONS,
    STAGES,
    TARGETS,
    TrainingOptions,
)
from memgraph.render.formats import FORMATS


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (no usage dump) and exits 2."""

    def error(self, message: str):
        self.exit(2, f"memgraph: error: {message} (see '{self.prog} --help')\n")


def _int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 1")
    return value


def _image_size(text: str) -> int | tuple[int, int]:
    """``448`` (square) or ``448x672`` (height x width)."""
    parts = text.lower().split("x")
    if len(parts) > 2:
        raise argparse.ArgumentTypeError(f"{text!r} is not N or HxW")
    sizes = tuple(_int(p.strip()) for p in parts)
    return sizes[0] if len(sizes) == 1 else sizes


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _training_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="zoo name (see 'memgraph models'), config.json / model folder, or module:function")
    g = p.add_argument_group("training step")
    g.add_argument("--batch-size", "-b", type=_int, default=1, help="samples per step (default 1)")
    g.add_argument("--seq-len", "-s", type=_int, help="tokens per sample (default: the model's)")
    g.add_argument("--image-size", type=_image_size, metavar="N|HxW",
                   help="image side, or height x width, in pixels (default: the model's)")
    g.add_argument("--images", type=_int, help="images per sample for image-text models (default: the model's)")
    g.add_argument("--audio-seconds", type=_seconds, help="audio length in seconds (Whisper: 30)")
    g.add_argument("--target-len", type=_int, help="decoder tokens for encoder-decoder models")
    g.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="fp32 (default); fp16-mixed: autocast float16 + GradScaler, float32 weights; "
                        "bf16-mixed: autocast bfloat16, float32 weights; bf16: bfloat16 weights, grads and "
                        "optimizer state (mixed precisions: cuda target only)")
    g.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    g.add_argument("--optimizer-impl", choices=OPTIMIZER_IMPLS, default="auto",
                   help="auto: foreach on cuda, for-loop on cpu (PyTorch's defaults)")
    g.add_argument("--freeze", action="append", default=[], metavar="PATTERN",
                   help="freeze parameters whose name matches (shell pattern, repeatable)")
    g.add_argument("--train", action="append", default=[], metavar="PATTERN",
                   help="train only parameters whose name matches (repeatable)")
    g.add_argument("--loop", choices=LOOPS, default="plain",
                   help="plain (default): out = model(...); out.loss.backward(), the outputs live through the step; "
                        "trainer: as Hugging Face Trainer, the outputs are dropped before backward")
    g.add_argument("--stage", choices=STAGES,
                   help="vision-language training stage: 1 trains the projector, 2 the projector and language "
                        "model, full everything (--train/--freeze then narrow it)")
    g.add_argument("--attn", dest="attn_implementation", choices=ATTN_IMPLEMENTATIONS, default="eager",
                   help="transformers attn_implementation (default eager)")
    g.add_argument("--gradient-checkpointing", action="store_true")
    g.add_argument("--iterations", type=_int, default=2, help="iterations to trace (>= 2; default 2)")
    g.add_argument("--gpu", default=DEFAULT_GPU, help="target GPU for the cuda target (see 'memgraph gpus')")
    g.add_argument("--allocator-conf", default=os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""), metavar="CONF",
                   help="CUDA caching allocator settings as in PYTORCH_CUDA_ALLOC_CONF (default: that variable)")
    g.add_argument("--input", dest="inputs", action="append", default=[], metavar="NAME=DTYPE[DIMS]",
                   help="an input tensor, e.g. x=float32[32,3,224,224] (repeatable; required for module:function)")
    p.add_argument("--output", "-o", help="write the report to FILE instead of standard output")
    p.add_argument("--debug", action="store_true", help="show tracebacks")


def _options(a: argparse.Namespace, target: str) -> TrainingOptions:
    return TrainingOptions(
        batch_size=a.batch_size, seq_len=a.seq_len, image_size=a.image_size, audio_seconds=a.audio_seconds,
        target_len=a.target_len, precision=a.precision, optimizer=a.optimizer, optimizer_impl=a.optimizer_impl,
        freeze=tuple(a.freeze), train=tuple(a.train), iterations=a.iterations, target=target,
        attn_implementation=a.attn_implementation, gradient_checkpointing=a.gradient_checkpointing,
        inputs=tuple(a.inputs), gpu=a.gpu, allocator_conf=a.allocator_conf, images=a.images, stage=a.stage, loop=a.loop,
    )


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memgraph", description="Predict the GPU memory of a PyTorch training step, without a GPU.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    a = sub.add_parser("analyze", help="predict the peak memory of a training step")
    _training_args(a)
    a.add_argument("--target", choices=TARGETS, default="cuda",
                   help="cuda: predict torch.cuda.max_memory_allocated; cpu: the CPU allocator's peak")
    a.add_argument("--format", "-f", choices=FORMATS, default="table")
    a.add_argument("--depth", type=_int, default=3, help="module path depth of the per-module table (default 3)")
    a.set_defaults(run=_analyze)

    m = sub.add_parser("measure", help="run the same step for real and record the allocator's peaks (JSON)")
    _training_args(m)
    m.add_argument("--device", choices=("cpu", "cuda"), required=True)
    m.add_argument("--snapshot", metavar="FILE",
                   help="cuda: also record the allocator's history and write torch.cuda.memory._dump_snapshot "
                        "to FILE (a pickle for https://pytorch.org/memory_viz)")
    m.set_defaults(run=_measure)

    v = sub.add_parser("validate", help="predict every stored measurement and write the error table (markdown)")
    v.add_argument("--groundtruth", default="reports/groundtruth", help="folder of measurement JSON files")
    v.add_argument("--output", "-o", default="reports/validation.md", help="markdown file to write ('-' for stdout)")
    v.add_argument("--debug", action="store_true")
    v.set_defaults(run=_validate)

    gp = sub.add_parser("gpus", help="list the GPU catalog")
    gp.add_argument("--debug", action="store_true")
    gp.set_defaults(run=_gpus, output=None)

    z = sub.add_parser("models", help="list the built-in model zoo")
    z.add_argument("--format", "-f", choices=("table", "json"), default="table")
    z.add_argument("--debug", action="store_true")
    z.set_defaults(run=_models, output=None)
    return p


def _analyze(a) -> str:
    from memgraph.api import analyze
    from memgraph.render.formats import render

    result = analyze(a.model, _options(a, a.target))
    return render(result, a.format, a.depth)


def _measure(a) -> str:
    from memgraph.api import measure

    if a.snapshot and not Path(a.snapshot).resolve().parent.is_dir():
        raise MemgraphError(f"cannot write --snapshot {a.snapshot!r}: its folder does not exist")
    return json.dumps(measure(a.model, a.device, _options(a, a.device), snapshot=a.snapshot), indent=2) + "\n"


def _validate(a) -> str:
    from memgraph.validation import render_markdown, validate

    root = Path(a.groundtruth)
    text = render_markdown(validate(root), root)
    if a.output == "-":
        a.output = None
    return text


def _gpus(a) -> str:
    from tabulate import tabulate

    from memgraph.facts.gpus import GPUS
    from memgraph.units import human_bytes

    rows = [[g.key, g.name, human_bytes(g.capacity_bytes), f"{g.compute_capability[0]}.{g.compute_capability[1]}",
             "yes" if g.bf16_supported else "no", "yes" if g.flash_attention_supported else "no"] for g in GPUS.values()]
    return tabulate(rows, ["key", "name", "capacity", "compute capability", "bf16", "flash attention"], disable_numparse=True) + "\n"


def _models(a) -> str:
    from tabulate import tabulate

    from memgraph.model_spec import zoo

    entries = zoo.entries()
    if a.format == "json":
        return json.dumps([{k: getattr(e, k) for k in ("name", "hf_id", "family", "task", "model_class",
                                                       "defaults", "published_params")} for e in entries], indent=2) + "\n"
    rows = [[e.name, e.family, e.task, f"{e.published_params / 1e9:.2f}B", _defaults(e.defaults), e.hf_id]
            for e in entries]
    return tabulate(rows, ["name", "family", "task", "params", "default inputs", "source config"]) + "\n"


def _defaults(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items())


def write_output(text: str, path: str | None) -> None:
    """Write all of ``text`` or nothing: a temporary file in the same folder, then an atomic rename."""
    if path is None:
        sys.stdout.write(text)
        return
    target = Path(path)
    if not target.parent.is_dir():
        raise MemgraphError(f"cannot write {path!r}: folder {str(target.parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file open()'s usual mode
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _quiet_transformers() -> None:
    """Config warnings (e.g. token ids outside a toy vocabulary) are noise in a memory report."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
    except ImportError:
        pass


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not args.debug:
        _quiet_transformers()
    try:
        write_output(args.run(args), args.output)
    except MemgraphError as e:
        if args.debug:
            raise
        print(f"memgraph: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memgraph: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # an internal error: still one line unless --debug
        if args.debug:
            raise
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"memgraph: internal error: {type(e).__name__}: {first} (rerun with --debug for the traceback)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
