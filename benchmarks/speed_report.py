"""Issue 17's figures in one run: trace cost against its floors, whole-process cost, and the batch sweep.

    python benchmarks/speed_report.py                  # everything (about 15 CPU minutes)
    python benchmarks/speed_report.py --parts trace    # one part: trace, process, sweep
    python benchmarks/speed_report.py --no-make-fx     # skip make_fx (the slowest column)

1. trace (printed last): per model, in this process and with the same built model and batch, two iterations of the
   training step (fp32, foreach AdamW) on meta: plainly (no recorder: the floor of any meta-device
   tracer), under memgraph's trace (``trace_training`` less building the model and batch, which it
   also does) and under ``make_fx`` (one iteration traced, doubled). CPU seconds of this process
   (``time.process_time``), one run each after a warm-up on gpt2; ratios to the plain step.
2. process: per model, ``python -m memgraph analyze MODEL ... -o /dev/null`` as a child process: its
   CPU seconds (user + system, from ``os.wait4``'s rusage) and peak RSS (``ru_maxrss``).
3. sweep: ``analyze llama-2-7b --batch-size 1,2,...,8`` (and ``2,4,...,16``) against its largest
   size alone, both as child processes, as a ratio of CPU seconds.

CPU seconds, not wall time: the development machine's cores are shared, so wall time measures the
neighbours. Prints figures and the issue's targets beside them; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]  # this checkout's memgraph; trace_speed.py

# model, extra TrainingOptions for the trace part, extra command-line options for the process part
MODELS = [
    ("gpt2", {}, []),
    ("llama-2-7b", {}, ["--precision", "bf16-mixed"]),
    ("llama-2-70b", {}, ["--precision", "bf16-mixed"]),
    ("llama-3.1-405b", {}, ["--precision", "bf16-mixed"]),
    ("llava-1.5-7b", {"stage": "2"}, ["--precision", "bf16-mixed", "--stage", "2"]),
]
SEQ = {"gpt2": 1024}  # trace part: the zoo's default sequence length otherwise
SWEEP = ["llama-2-7b", "--precision", "bf16-mixed"]
SWEEP_SIZES = ["1,2,3,4,5,6,7,8", "2,4,6,8,10,12,14,16"]
TARGETS = {  # issue 17
    "trace/plain llama-2-7b": "<= 1.5",
    "process CPU s": {"llama-2-7b": 4, "llama-2-70b": 7, "llama-3.1-405b": 10},
    "process peak RSS MB": 600,
    "sweep/one": "< 1.5",
}


def _trace_part(make_fx: bool) -> None:
    from trace_speed import _make_fx, _plain

    from memgraph.model_spec.build import build_model
    from memgraph.model_spec.optimizers import make_optimizer
    from memgraph.model_spec.options import PRECISION_DTYPE, TrainingOptions
    from memgraph.model_spec.sources import resolve
    from memgraph.trace.shadow_values import ShadowValues
    from memgraph.trace.tracer import trace_training

    def setup(name, extra):
        opts = TrainingOptions(seq_len=SEQ.get(name), optimizer_impl="foreach", **extra)
        spec = resolve(name)
        model = build_model(spec, opts, "meta")
        batch_spec = spec.batch(opts, PRECISION_DTYPE[opts.precision])
        batch = batch_spec.make("meta")
        shadows = ShadowValues()  # LLaVA counts image tokens in input_ids: the plain step needs their values too
        return spec, opts, model, batch, (shadows if shadows.attach_batch(batch_spec, batch) else nullcontext())

    def plain_step(model, batch, values):
        with values:
            _plain(model, batch, make_optimizer)

    def cpu(fn) -> float:
        start = time.process_time()
        fn()
        return time.process_time() - start

    print("1. trace: CPU s of two training iterations on meta (fp32, foreach AdamW), same model and batch")
    print(f"{'model':16s} {'ops':>7s} {'plain s':>8s} {'memgraph s':>10s} {'ratio':>6s} {'make_fx s':>10s} {'ratio':>6s}")
    warm = setup("gpt2", {})
    plain_step(*warm[2:])
    trace_training(warm[0], warm[1])
    for name, extra, _ in MODELS:
        spec, opts, model, batch, values = setup(name, extra)  # a --stage froze what it does not train
        plain = cpu(lambda: plain_step(model, batch, values))
        build = cpu(lambda: setup(name, extra))
        ops = []
        ours = cpu(lambda: ops.append(len(trace_training(spec, opts).log.ops))) - build
        fx_text = f"{'skipped':>10s} {'':>6s}"
        if make_fx:
            try:
                fx = cpu(lambda: _make_fx(model, batch, make_optimizer)) * 2  # one iteration traced: x2
                fx_text = f"{fx:10.2f} {fx / plain:6.2f}"
            except Exception as e:  # make_fx may refuse a model; say so and go on
                fx_text = f"{'failed':>10s} {type(e).__name__[:6]:>6s}"
        print(f"{name:16s} {ops[-1]:7d} {plain:8.2f} {ours:10.2f} {ours / plain:6.2f} {fx_text}", flush=True)
    print(f"target: trace/plain for llama-2-7b {TARGETS['trace/plain llama-2-7b']}\n")


def _child(args: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS (MB) of ``python -m memgraph ARGS -o /dev/null``."""
    cmd = [sys.executable, "-m", "memgraph", *args, "-o", os.devnull]
    p = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode()
    if p.returncode:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {err.strip().splitlines()[-1:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _process_part() -> None:
    print("2. process: python -m memgraph analyze MODEL (one child process each): CPU s and peak RSS")
    print(f"{'model':16s} {'options':34s} {'CPU s':>7s} {'target':>7s} {'peak RSS MB':>12s}")
    for name, _, extra in MODELS:
        seconds, rss = _child(["analyze", name, *extra])
        target = TARGETS["process CPU s"].get(name)
        print(f"{name:16s} {' '.join(extra):34s} {seconds:7.2f} {'< ' + str(target) if target else '':>7s} "
              f"{rss:12.0f}", flush=True)
    print(f"target: peak RSS < {TARGETS['process peak RSS MB']} MB each\n")


def _sweep_part() -> None:
    print("3. sweep: analyze " + " ".join(SWEEP) + " --batch-size LIST (8 sizes) against its largest size alone")
    for sizes in SWEEP_SIZES:
        largest = sizes.rsplit(",", 1)[-1]
        one, one_rss = _child(["analyze", *SWEEP, "--batch-size", largest])
        many, many_rss = _child(["analyze", *SWEEP, "--batch-size", sizes])
        print(f"  --batch-size {largest:18s} {one:7.2f} CPU s {one_rss:6.0f} MB")
        print(f"  --batch-size {sizes:18s} {many:7.2f} CPU s {many_rss:6.0f} MB   sweep/one = {many / one:.2f} "
              f"(target {TARGETS['sweep/one']})", flush=True)
    print("  (batch 1 records another stream than larger batches, so 1..8 takes three traces: 1, 2 and 8; "
          "2..16 takes two)\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="trace,process,sweep")
    p.add_argument("--no-make-fx", action="store_true")
    p.add_argument("--models", help="comma list: only these of " + ", ".join(m[0] for m in MODELS))
    a = p.parse_args()
    if a.models:
        MODELS[:] = [m for m in MODELS if m[0] in a.models.split(",")]
    parts = a.parts.split(",")
    # Child processes first: a child's ru_maxrss starts from its parent's RSS at fork (Linux keeps the
    # high-water mark across exec), so they are started while this process is still small.
    if "process" in parts:
        _process_part()
    if "sweep" in parts:
        _sweep_part()
    if "trace" in parts:
        _trace_part(not a.no_make_fx)


if __name__ == "__main__":
    main()
