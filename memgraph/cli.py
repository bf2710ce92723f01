"""The ``memgraph`` command line: analyze, measure, models."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
from dataclasses import Field, fields
from pathlib import Path

from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions, flag_of, positive_int, positive_seconds
from memgraph.output import check_output_path, is_file_target, standard_stream, write_output
from memgraph.render.formats import EXTENSION_FORMATS, FORMATS
from memgraph.version import __version__
from memgraph.watch import progress_line, time_budget

# --timeout's default: generous (a 405B-shaped config traces in about 20 s; CPU measurements of
# big models take minutes), but finite, so a runaway input ends with a message instead of hanging.
DEFAULT_TIMEOUT = 1800.0
# --timeout's largest value: the interval timer (setitimer) takes a C time_t; a year is more than any analysis needs.
MAX_TIMEOUT = 365 * 24 * 3600.0


def timeout_seconds(text: str) -> float:
    value = positive_seconds(text)
    if value > MAX_TIMEOUT:
        raise argparse.ArgumentTypeError(f"{text!r} is more than a year: pass at most {MAX_TIMEOUT:,.0f} seconds")
    return value


# memgraph fit's exit status when the user's own settings do not fit with the margin (0: they do;
# 2: bad input; 1: internal error), so a scheduler can branch on it.
FIT_EXIT_DOES_NOT_FIT = 3


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad argument in one line (no usage dump) and exits 2.

    Abbreviated flags are refused: ``--target`` must never be read as ``--target-len``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"memgraph: error: {message} (see '{self.prog} --help')\n")


def _training_args(p: argparse.ArgumentParser, command: str) -> None:
    """The model and one argument per TrainingOptions field, all built from the field (options.Flag)."""
    takes_config = command in ("analyze", "fit")  # --config FILE may name the model (memgraph/job_config/)
    p.add_argument("model", nargs="?" if takes_config else None,
                   help="zoo name (see 'memgraph models'), Hub id (zoo or local Hugging Face cache), config.json / "
                        "model folder, or module:function" + ("; may be left out when --config names it" if takes_config else ""))
    if takes_config:
        p.add_argument("--config", metavar="FILE", default=None,
                       help="the training config you already have (Trainer/TRL arguments JSON or YAML, accelerate, "
                            "axolotl, LLaMA-Factory, torchtune or LitGPT YAML): each field that changes memory is "
                            "taken, and the report lists them; flags given win over the file (default: none)")
    g = p.add_argument_group("training step")
    for f in fields(TrainingOptions):
        flag = flag_of(f)
        if flag.analyze_only and command not in ("analyze", "fit"):
            continue
        names = (flag.name, flag.short) if flag.short else (flag.name,)
        kwargs = _argparse_kwargs(f)
        if command == "analyze" and f.name in SWEEPABLE:  # a comma list analyses each size (memgraph/sweep.py)
            kwargs.update(type=positive_int_list, metavar=f"{flag.metavar}[,{flag.metavar}...]")
        g.add_argument(*names, dest=f.name, help=_help(f), **kwargs)
    if command == "analyze":
        p.add_argument("--output", "-o", metavar="FILE", action="append", default=None,
                       help="write the report to FILE ('-': standard output, the default); the format follows the "
                            "extension (.txt .md .json .html .pickle) unless --format says; repeat for several "
                            "formats from one analysis")
    else:
        p.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE ('-': standard output, the default)")
    p.add_argument("--debug", action="store_true", help=DEBUG_HELP)


SWEEPABLE = ("batch_size", "seq_len")  # analyze takes a comma list of these: one analysis per size, one process


def positive_int_list(text: str) -> int | tuple[int, ...]:
    """``4`` -> 4; ``1,2,4`` -> (1, 2, 4): each item a positive integer."""
    items = tuple(positive_int(item.strip()) for item in text.split(","))
    return items[0] if len(items) == 1 else items


def _argparse_kwargs(f: Field) -> dict:
    flag = flag_of(f)
    if isinstance(f.default, bool):
        return {"action": "store_true"}
    kwargs = {"type": flag.parse, "choices": flag.choices, "metavar": flag.metavar}
    if flag.repeatable:  # None, not a shared list that append would grow; training_options gives the field default
        return {**kwargs, "action": "append", "default": None}
    default = os.environ.get(flag.env, f.default) if flag.env else f.default
    return {**kwargs, "default": default}


def _help(f: Field) -> str:
    flag = flag_of(f)
    repeatable = "repeatable; " if flag.repeatable else ""
    text = f"{flag.help} ({repeatable}default: {shown_default(f)})"
    return text.replace("`", "").replace("%", "%%")  # argparse %-formats help


def shown_default(f: Field) -> str:
    """A field's default as --help and README.md show it (markdown: a value in backticks)."""
    flag = flag_of(f)
    if flag.env:
        return f"`${flag.env}`"
    if flag.default_text is not None:
        return flag.default_text
    if isinstance(f.default, bool):
        return "on" if f.default else "off"
    if f.default is None or f.default == ():
        return "none"
    return f"`{f.default}`"


def training_options(a: argparse.Namespace, **decided) -> TrainingOptions:
    """TrainingOptions from parsed arguments; ``decided``: fields the command sets itself (measure: target)."""
    given = {f.name: _field_value(f, getattr(a, f.name)) for f in fields(TrainingOptions) if hasattr(a, f.name)}
    return TrainingOptions(**{**given, **decided})


def _field_value(f: Field, parsed):
    if flag_of(f).repeatable:
        return f.default if parsed is None else tuple(parsed)
    return parsed


def options_table_markdown() -> str:
    """README.md's options table (between its options:begin/end markers), from the TrainingOptions fields."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for f in fields(TrainingOptions):
        flag = flag_of(f)
        meaning = ("`analyze` only: " if flag.analyze_only else "") + flag.help
        if flag.repeatable:
            meaning += " (repeatable)"
        cells = (_usage(f), shown_default(f), meaning)
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows) + "\n"


def _usage(f: Field) -> str:
    """``--precision fp32|bf16``, ``--batch-size N``, ``-b N``: how the option is written."""
    flag = flag_of(f)
    if isinstance(f.default, bool):
        value = ""
    else:
        value = " " + ("|".join(flag.choices) if flag.choices else flag.metavar)
    return ", ".join(f"`{name}{value}`" for name in (flag.name, flag.short) if name)


DEBUG_HELP = "show tracebacks instead of one line per error (default off)"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memgraph", description="Predict the GPU memory of a PyTorch training step, without a GPU.")
    p.add_argument("--version", action="version", version=f"memgraph {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p.subcommands = sub.choices  # name -> parser: parse_arguments refuses an unknown flag with its subcommand

    a = sub.add_parser("analyze", help="predict the peak memory of a training step")
    _training_args(a, "analyze")
    _report_args(a)
    a.set_defaults(run=_analyze)

    f = sub.add_parser("fit", help="does the step fit, the largest batch that does, and what to change if not")
    _training_args(f, "fit")
    f.add_argument("--solve", choices=("batch-size", "seq-len"), default="batch-size",
                   help="what to maximise (default batch-size)")
    f.add_argument("--format", "-f", choices=("table", "json"), default="table",
                   help="table, or json for a scheduler (default table)")
    f.add_argument("--max-gpus", type=positive_int, default=8, metavar="N",
                   help="multi-GPU changes (FSDP over 2, 4 or 8 GPUs; DeepSpeed ZeRO-2/3 over the most, if installed) "
                   "use at most N GPUs; 1: none (default 8, one node)")
    f.set_defaults(run=_fit)

    m = sub.add_parser("measure", help="run the same step for real and record the allocator's peaks (JSON)")
    _training_args(m, "measure")
    m.add_argument("--device", choices=("cpu", "cuda"), required=True,
                   help="where the step runs for real; it also sets the target the record is compared with (required)")
    m.add_argument("--snapshot", metavar="FILE",
                   help="cuda: also record the allocator's history and write torch.cuda.memory._dump_snapshot "
                        "to FILE (a pickle for https://pytorch.org/memory_viz)")
    m.set_defaults(run=_measure)

    v = sub.add_parser("validate", help="predict every stored measurement and write the error table (markdown)")
    v.add_argument("--groundtruth", default="reports/groundtruth", metavar="DIR",
                   help="folder of measurement JSON files (default reports/groundtruth)")
    v.add_argument("--published", nargs="?", const="reports/published", default=None, metavar="DIR",
                   help="validate against published GPU measurements instead (folder of row JSON files, default "
                        "reports/published)")
    v.add_argument("--allow-callables", action="append", default=[], metavar="MODULE",
                   help="predict ground-truth records whose model is MODULE:function (imports MODULE); records "
                        "naming another module are skipped (repeatable)")
    v.add_argument("--output", "--out", "-o", default="-", metavar="FILE",
                   help="markdown file to write, e.g. reports/validation.md (default '-': standard output; nothing "
                        "is written unless asked)")
    v.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    v.set_defaults(run=_validate)

    from memgraph.script_run.cli import add_run_parser  # memgraph run: the user's own script (issue 29)

    add_run_parser(sub, _report_args)

    gp = sub.add_parser("gpus", help="list the GPU catalog")
    gp.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    gp.set_defaults(run=_gpus, output=None)

    z = sub.add_parser("models", help="list the built-in model zoo")
    z.add_argument("--format", "-f", choices=("table", "json"), default="table", help="(default table)")
    z.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    z.set_defaults(run=_models, output=None)
    return p


def _report_args(a: argparse.ArgumentParser) -> None:
    """analyze's report options (memgraph run has the same)."""
    a.add_argument("--format", "-f", choices=FORMATS, default=None,
                   help="table (default), md, json, html, or snapshot (a PyTorch memory snapshot pickle for "
                        "https://pytorch.org/memory_viz, a web page that needs a network; needs --output)")
    a.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help=f"stop the analysis after SECONDS and say where it was (default {DEFAULT_TIMEOUT:g}; "
                        "llama-3.1-405b takes about 20)")
    a.add_argument("--depth", type=positive_int, default=3,
                   help="module path depth of the per-module table (default 3)")
    a.add_argument("--no-timeline", action="store_true",
                   help="leave the memory timeline out of the report (JSON `timeline` is then []: a small file for "
                        "schedulers; HTML without its chart) (default: included)")


def analyze_targets(outputs: list[str] | None, fmt: str | None) -> list[tuple[str | None, str]]:
    """(path, format) of each report ``analyze`` writes: ``--format`` if given, else the extension's format
    (table for an unknown one). A ``--format`` that contradicts a known extension is refused."""
    if not outputs:
        return [(None, fmt or "table")]
    targets = []
    for path in outputs:
        by_ext = None if path == "-" else EXTENSION_FORMATS.get(Path(path).suffix.lower())
        if fmt and by_ext and by_ext != fmt:
            raise MemgraphError(f"--output {path!r} is a {by_ext} file but --format is {fmt}: "
                                f"change the extension or drop --format")
        targets.append((path, fmt or by_ext or "table"))
    paths = [p for p, _ in targets]
    duplicate = next((p for p in paths if paths.count(p) > 1), None)
    if duplicate is not None:
        raise MemgraphError(f"--output {duplicate!r} is given twice: name each file once")
    return targets


def _analyze(a) -> dict[str | None, str | bytes]:
    import pickle

    from memgraph.api import analyze_traced, check_snapshot_target, predicted_snapshot
    from memgraph.render.formats import render

    if any(isinstance(getattr(a, name), tuple) for name in SWEEPABLE):
        return _analyze_sweep(a)
    opts = training_options(a)
    if any(fmt == "snapshot" for _, fmt in a.targets):
        check_snapshot_target(opts)
    with time_budget(a.timeout), progress_line(timeout=a.timeout):  # the collector: paused since run() (and by analyze_spec)
        result, trace = analyze_traced(a.model, opts)
    if a.no_timeline:
        result.timeline = []
    result.job_config = getattr(a, "job_lines", [])
    return {path: (pickle.dumps(predicted_snapshot(trace, opts)) if fmt == "snapshot" else render(result, fmt, a.depth))
            for path, fmt in a.targets}


def _fit(a) -> str:
    from memgraph.fit import FitProgress, fit, render_fit

    with progress_line():
        report = fit(a.model, training_options(a), a.solve, progress=FitProgress(), max_gpus=a.max_gpus)
    if not report.yours.fits_with_margin:
        a.exit_code = FIT_EXIT_DOES_NOT_FIT
    report.job_config = getattr(a, "job_lines", [])
    return render_fit(report, a.format)


def _analyze_sweep(a) -> dict[str | None, str]:
    from memgraph.sweep import analyze_many, check_sweep_format, render_sweep

    for _, fmt in a.targets:  # before any tracing
        check_sweep_format(fmt)
    sizes = {name: getattr(a, name) if isinstance(getattr(a, name), tuple) else (getattr(a, name),)
             for name in SWEEPABLE}
    options = training_options(argparse.Namespace(**{**vars(a), "batch_size": sizes["batch_size"][0],
                                                     "seq_len": sizes["seq_len"][0]}))
    with time_budget(a.timeout), progress_line(timeout=a.timeout):
        points = analyze_many(a.model, options, list(sizes["batch_size"]), list(sizes["seq_len"]))
    for point in points:
        point.result.job_config = getattr(a, "job_lines", [])
        if a.no_timeline:
            point.result.timeline = []
    return {path: render_sweep(points, fmt, a.depth) for path, fmt in a.targets}


def _measure(a) -> str:
    from memgraph.api import measure

    if a.snapshot and not Path(a.snapshot).resolve().parent.is_dir():
        raise MemgraphError(f"cannot write --snapshot {a.snapshot!r}: its folder does not exist")
    record = measure(a.model, a.device, training_options(a, target=a.device), snapshot=a.snapshot)
    return json.dumps(record, indent=2) + "\n"


def _validate(a) -> str:
    if a.published:
        from memgraph.validation.published import render_markdown as render_published
        from memgraph.validation.published import validate_published

        root = Path(a.published)
        return render_published(validate_published(root), root)

    from memgraph.validation import render_markdown, validate

    root = Path(a.groundtruth)
    return render_markdown(validate(root, tuple(a.allow_callables)), root)


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


def _quiet_transformers() -> None:
    """Config warnings (e.g. token ids outside a toy vocabulary) are noise in a memory report.

    Without importing transformers (a second of CPU time, which ``memgraph gpus``, ``models`` and a plain
    ``nn.Module`` never need): transformers reads ``TRANSFORMERS_VERBOSITY`` when it first configures its
    logger (``_get_default_logging_level`` in transformers/utils/logging.py, 5.6 to 5.23), which then has
    the level ``set_verbosity_error()`` sets. Already imported (memgraph called from Python), it is set
    directly. Processes memgraph starts (``measure --nproc``) inherit the setting."""
    os.environ["TRANSFORMERS_VERBOSITY"] = "error"
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging is not None:
        hf_logging.set_verbosity_error()


# An internal error is memgraph's own bug (every input it refuses is a MemgraphError): how to report it.
INTERNAL_ERROR_HELP = (f"this is a bug in memgraph {__version__}: please report it with the command you ran and the "
                       "traceback that the same command prints with --debug")


# Commands that trace on meta and render, or only list: the collector run() pauses stays paused to the end.
COLLECTOR_PAUSED_COMMANDS = ("analyze", "fit", "gpus", "models")


def parse_arguments(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, where an unknown flag is refused by its subcommand with the closest flag that
    subcommand has (``--batchsize``: did you mean --batch-size?) and that subcommand's help."""
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        import difflib

        sub = parser.subcommands[args.command]
        known = [o for action in sub._actions for o in action.option_strings]
        close = difflib.get_close_matches(unknown[0].split("=")[0], known, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        sub.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_arguments(build_parser(), argv)
    if not args.debug:
        _quiet_transformers()
    if not gc.isenabled() and args.command not in COLLECTOR_PAUSED_COMMANDS:
        _collector_back_after_imports()
    try:
        outputs = args.output if isinstance(args.output, list) else [args.output]
        for path in outputs:  # before any work: a bad target fails in a second, not after the trace
            check_output_path(path)
        if args.command in ("analyze", "run"):
            args.targets = analyze_targets(args.output, args.format)
            if any(fmt == "snapshot" and path in (None, "-") for path, fmt in args.targets):
                raise MemgraphError("--format snapshot writes a binary pickle: give --output FILE.pickle")
        if hasattr(args, "config"):  # analyze, fit: the file's options under the flags given (job_config/apply.py)
            from memgraph.job_config.apply import apply_to_args

            apply_to_args(args, sys.argv[1:] if argv is None else argv)
        produced = args.run(args)
        reports = produced if isinstance(produced, dict) else {outputs[0]: produced}
        for path, content in reports.items():  # everything rendered first: a failure writes nothing
            write_output(content, path)
            if is_file_target(path):
                print(f"memgraph: wrote {path} ({os.path.getsize(path):,} bytes)", file=standard_stream("stderr"))
        return getattr(args, "exit_code", 0)
    except MemgraphError as e:
        if args.debug:
            raise
        print(f"memgraph: error: {e}", file=standard_stream("stderr"))
        return 2
    except KeyboardInterrupt:
        print("memgraph: interrupted", file=standard_stream("stderr"))
        return 130
    except BrokenPipeError:  # the reader went away (memgraph ... | head): end quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:  # an internal error: still one line unless --debug
        if args.debug:
            raise
        first = str(e).splitlines()[0] if str(e) else ""
        print(f"memgraph: internal error: {type(e).__name__}: {first}; {INTERNAL_ERROR_HELP}", file=standard_stream("stderr"))
        return 1
    except BaseException as e:  # SystemExit, GeneratorExit or another BaseException from the user's model code:
        # memgraph itself raises none inside run (argparse's exits happen before), so it is the model's doing
        if args.debug:
            raise
        print(f"memgraph: error: the model's code raised {type(e).__name__}({str(e)[:80]!r}) while memgraph ran it; "
              "a model or factory must return, not exit (rerun with --debug for the traceback)",
              file=standard_stream("stderr"))
        return 2
    return 0


def _collector_back_after_imports() -> None:
    """``measure`` and ``validate`` (real steps, many analyses in one process): torch imported with the
    collector still paused, then the collector back on, with what the imports made frozen out of its walks."""
    import memgraph.api  # noqa: F401  (torch and memgraph's trace; transformers comes with the model)

    gc.freeze()
    gc.enable()


def run() -> None:
    """The console entry: :func:`main`, then exit without the interpreter's teardown.

    The cyclic garbage collector is paused from the start (memgraph/collector.py says why): importing
    torch and transformers is most of a short analysis, and with the collector on it costs about 0.6 CPU s
    more (reports/speed.md). ``analyze``, ``fit``, ``gpus`` and ``models`` keep it paused to the end; they
    trace on meta, where storages are freed by reference counting, and end here. ``measure`` and ``validate``
    get it back once torch is imported (:func:`_collector_back_after_imports`).

    Tearing down torch and transformers (freeing every module's objects and the trace) takes about a
    second after the report is already written; nothing memgraph writes needs it (output files are
    closed and renamed by then), so standard streams are flushed and the process ends at once."""
    gc.disable()
    code = main()
    try:
        standard_stream("stdout").flush()
        standard_stream("stderr").flush()
    except BrokenPipeError:
        code = code or 0
    os._exit(code)


if __name__ == "__main__":
    run()
