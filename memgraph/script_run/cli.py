"""``memgraph run``'s command line: report options as ``analyze``'s, then ``-- SCRIPT.py ARGS`` or ``-- -m MODULE``."""

from __future__ import annotations

import argparse
from dataclasses import fields

from memgraph.model_spec.options import TrainingOptions, flag_of, positive_int

# The TrainingOptions fields memgraph run takes (the rest describe a step the script itself writes)
RUN_FIELDS = ("target", "gpu", "gpu_memory", "allocator_conf", "cuda_version", "module_loading", "context_bytes")
# --nproc: the world the script's init_process_group makes (script_run/distributed.py); not a TrainingOptions
# field here, since TrainingOptions ties --nproc > 1 to analyze's --strategy


def add_run_parser(sub, report_args) -> None:
    r = sub.add_parser("run", help="predict the memory of your own training script, run unmodified on meta",
                       description="memgraph run [options] -- SCRIPT.py [ARGS...]  (or -- -m MODULE [ARGS...])")
    g = r.add_argument_group("target")
    for f in fields(TrainingOptions):
        if f.name in RUN_FIELDS:
            flag = flag_of(f)
            default = f.default
            if flag.env:
                import os

                default = os.environ.get(flag.env, f.default)
            g.add_argument(flag.name, dest=f.name, type=flag.parse, choices=flag.choices, metavar=flag.metavar,
                           default=default, help=flag.help.replace("`", "").replace("%", "%%"))
    r.add_argument("--nproc", type=positive_int, default=1, metavar="N",
                   help="world size the script's torch.distributed.init_process_group makes (fake process group; the "
                        "script runs as rank 0, as torchrun --nproc-per-node N starts it) (default 1)")
    r.add_argument("--steps", type=positive_int, default=3, metavar="N",
                   help="optimizer steps to run before the script is stopped (at least 2: the first step and the "
                        "steady state; default 3)")
    r.add_argument("--output", "-o", metavar="FILE", action="append", default=None,
                   help="write the report to FILE ('-': standard output, the default); the format follows the "
                        "extension (.txt .md .json .html .pickle) unless --format says; repeatable")
    report_args(r)
    r.add_argument("--debug", action="store_true", help="show tracebacks instead of one line per error (default off)")
    r.add_argument("script", nargs=argparse.REMAINDER, metavar="-- SCRIPT.py [ARGS...]",
                   help="the script and its arguments, after --")
    r.set_defaults(run=run_command)


def run_command(a) -> dict:
    import pickle

    from memgraph.api import check_snapshot_target, predicted_snapshot, result_of_trace
    from memgraph.errors import MemgraphError
    from memgraph.render.formats import render
    from memgraph.script_run.runner import ScriptCommand, run_script
    from memgraph.watch import progress_line, time_budget

    argv = tuple(a.script[1:] if a.script[:1] == ["--"] else a.script)
    if a.steps < 2:
        raise MemgraphError(f"--steps {a.steps}: memgraph run needs 2 or more (the first step and the steady state)")
    opts = TrainingOptions(**{name: getattr(a, name) for name in RUN_FIELDS}, iterations=a.steps)
    if any(fmt == "snapshot" for _, fmt in a.targets):
        check_snapshot_target(opts)
    command = ScriptCommand(argv)
    command.check()
    with time_budget(a.timeout), progress_line():
        trace, options = run_script(command, opts, nproc=a.nproc)
        result = result_of_trace(command.name, opts, trace)
    result.options = options
    if a.no_timeline:
        result.timeline = []
    return {path: (pickle.dumps(predicted_snapshot(trace, opts)) if fmt == "snapshot" else render(result, fmt, a.depth))
            for path, fmt in a.targets}


__all__ = ["RUN_FIELDS", "add_run_parser", "run_command"]
