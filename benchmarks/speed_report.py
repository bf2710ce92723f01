"""Issue 17's figures in one run: where a process's CPU seconds go, whole-process cost, the batch sweep, and
the trace against its floors.

    python benchmarks/speed_report.py                  # everything (about 15 CPU minutes)
    python benchmarks/speed_report.py --parts imports,process,sweep --no-make-fx
    python benchmarks/speed_report.py --baseline /tmp/old-checkout   # process part: that checkout beside this one

0. imports: in one child process, as ``memgraph analyze`` imports them (the cyclic collector paused:
   memgraph/collector.py), the CPU seconds of each import a llama analysis needs, each chunk measured after
   the ones above it (so a module two chunks share is counted once, in the first); then the same imports
   with the collector on (Python's default, what memgraph paid before).
1. process: per model, ``python -m memgraph analyze MODEL ... -o /dev/null`` as a child process: its
   CPU seconds (user + system, from ``os.wait4``'s rusage) and peak RSS (``ru_maxrss``), the least CPU of
   ``--repeats`` runs (the development machine is shared: the least is the run the neighbours disturbed
   least); with ``--baseline DIR`` the same command in that checkout, alternating with this one.
2. sweep: ``analyze llama-2-7b --batch-size 1,2,...,8`` (and ``2,4,...,16``) against its largest size alone,
   both as child processes, as a ratio of CPU seconds.
3. trace (printed last): per model, in this process and with the same built model and batch, two iterations
   of the training step (fp32, foreach AdamW) on meta: plainly (no recorder, no dispatch mode: the floor of
   any meta-device tracer; with shadow values only where the step reads values on meta, LLaVA), under memgraph's trace (``trace_training`` less building the model and batch, which it also
   does) and under ``make_fx`` (one iteration traced, doubled; gpt2 and llama-2-7b only). CPU seconds of this process
   (``time.process_time``), the least of two runs (make_fx: one) after a warm-up on gpt2; ratios to the plain step.

CPU seconds, not wall time: the development machine's cores are shared, so wall time measures the
neighbours. Prints figures and the issue's targets beside them, with the machine and its load; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]  # this checkout's memgraph; trace_speed.py

# model, extra TrainingOptions for the trace part, extra command-line options for the process part
MODELS = [
    ("gpt2", {}, []),
    ("llama-2-7b", {}, ["--precision", "bf16-mixed", "--seq-len", "4096"]),
    ("llama-2-70b", {}, ["--precision", "bf16-mixed", "--seq-len", "4096"]),
    ("llama-3.1-405b", {}, ["--precision", "bf16-mixed", "--seq-len", "4096"]),
    ("llava-1.5-7b", {"stage": "2"}, ["--precision", "bf16-mixed", "--stage", "2"]),
]
SEQ = {"gpt2": 1024}  # trace part: the zoo's default sequence length otherwise
SWEEP = ["llama-2-7b", "--precision", "bf16-mixed"]  # the zoo's sequence length (2048)
MAKE_FX_MODELS = ("gpt2", "llama-2-7b")  # make_fx of the larger ones takes minutes each and says nothing new
REPEATS = 3  # child processes: the least CPU of this many runs
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
        return spec, opts, model, batch_spec, batch_spec.make("meta")

    def values_for(model, batch_spec, batch):
        try:  # the plain step as it is, with no dispatch mode at all ...
            _plain(model, batch, make_optimizer)
            return nullcontext()
        except Exception:  # ... unless it reads values on meta (LLaVA counts image tokens in input_ids)
            values = ShadowValues()
            values.attach_batch(batch_spec, batch)
            return values

    def plain_step(model, batch, values):
        with values:
            _plain(model, batch, make_optimizer)

    def cpu(fn, runs: int = 2) -> float:
        """The least CPU s of ``runs`` calls (the machine is shared: the least is the least disturbed)."""
        best = float("inf")
        for _ in range(runs):
            start = time.process_time()
            fn()
            best = min(best, time.process_time() - start)
        return best

    print("3. trace: CPU s of two training iterations on meta (fp32, foreach AdamW, the zoo's sequence length; gpt2 "
          "1024), same model and batch")
    print(f"{'model':16s} {'ops':>7s} {'plain s':>8s} {'memgraph s':>10s} {'ratio':>6s} {'all layers s':>12s} "
          f"{'ratio':>6s} {'make_fx s':>10s} {'ratio':>6s}")
    warm = setup("gpt2", {})
    plain_step(warm[2], warm[4], values_for(*warm[2:]))
    trace_training(warm[0], warm[1])
    for name, extra, _ in MODELS:
        spec, opts, model, batch_spec, batch = setup(name, extra)  # a --stage froze what it does not train
        values = values_for(model, batch_spec, batch)
        plain = cpu(lambda: plain_step(model, batch, values))
        build = cpu(lambda: setup(name, extra))
        ops = []
        ours = cpu(lambda: ops.append(len(trace_training(spec, opts).log.ops))) - build
        full = cpu(lambda: trace_training(spec, replace(opts, depth_synthesis="off"))) - build
        fx_text = f"{'skipped':>10s} {'':>6s}"
        if make_fx and name in MAKE_FX_MODELS:
            try:
                fx = cpu(lambda: _make_fx(model, batch, make_optimizer), 1) * 2  # one iteration traced: x2
                fx_text = f"{fx:10.2f} {fx / plain:6.2f}"
            except Exception as e:  # make_fx may refuse a model; say so and go on
                fx_text = f"{'failed':>10s} {type(e).__name__[:6]:>6s}"
        print(f"{name:16s} {ops[-1]:7d} {plain:8.2f} {ours:10.2f} {ours / plain:6.2f} {full:12.2f} {full / plain:6.2f} "
              f"{fx_text}", flush=True)
    print(f"target: trace/plain for llama-2-7b {TARGETS['trace/plain llama-2-7b']}. memgraph: as analyze runs it (a "
          "deep model traced at 3 and 4 layers, and 2 where a plain-text note differs, and synthesized: "
          "trace/shortcuts/depth_run.py); all layers: "
          "--depth-synthesis off, the recorder's cost over the same ops as the plain step\n")


IMPORTS_CHILD = """
import gc, importlib, json, sys, time
gc.disable() if sys.argv[1] == "paused" else None
start = time.process_time()  # the interpreter's own start-up (site, encodings), before the first line
out = [["python start-up", start]]
for name, modules in json.loads(sys.argv[2]):
    t = time.process_time()
    for m in modules:
        importlib.import_module(m)
    out.append([name, time.process_time() - t])
print(json.dumps(out))
"""
# (what, modules): in the order `memgraph analyze llama-2-7b` needs them; each chunk is measured after the
# ones above, so the transformers rows are what modeling_llama adds on top of the modules before them.
IMPORT_CHUNKS = [
    ("torch", ["torch"]),
    ("transformers package (utils, hub client, version checks)", ["transformers"]),
    ("torch._dynamo (transformers: generation.continuous_batching; torch: first _disable_dynamo call)",
     ["torch._dynamo"]),
    ("torch.distributed.tensor (transformers: distributed.sharding_utils)", ["torch.distributed.tensor"]),
    ("scipy.optimize (transformers: loss_for_object_detection, if scipy is installed)", ["scipy.optimize"]),
    ("accelerate (transformers: integrations.accelerate, if accelerate is installed)", ["accelerate"]),
    ("transformers.models (scans every model folder's files for __all__)", ["transformers.models"]),
    ("transformers.modeling_utils, the rest", ["transformers.modeling_utils"]),
    ("modeling_llama and AutoConfig, the rest", ["transformers.models.llama.modeling_llama",
                                                 "transformers.models.auto.configuration_auto"]),
    ("memgraph.api (trace, analysis, allocator; private_api's symbolic_shapes)", ["memgraph.api"]),
    ("memgraph.cli and the renderers", ["memgraph.cli", "memgraph.render.formats", "memgraph.render.text"]),
]


def _imports_part() -> None:
    import json

    print("0. imports: CPU s of each import `memgraph analyze llama-2-7b` needs, one child process, least of "
          f"{REPEATS} runs per row")
    runs = {mode: [] for mode in ("paused", "on")}
    for _ in range(REPEATS):
        for mode in runs:
            p = subprocess.run([sys.executable, "-c", IMPORTS_CHILD, mode, json.dumps(IMPORT_CHUNKS)], cwd=ROOT,
                               capture_output=True, text=True, check=True, env=_env(ROOT))
            runs[mode].append(json.loads(p.stdout))
    rows = [(name, min(r[i][1] for r in runs["paused"])) for i, (name, _) in enumerate(runs["paused"][0])]
    for name, seconds in rows:
        print(f"  {seconds:6.2f}  {name}")
    paused = min(sum(x for _, x in r) for r in runs["paused"])
    on = min(sum(x for _, x in r) for r in runs["on"])
    print(f"  {paused:6.2f}  all of it, the collector paused (as memgraph's CLI imports them now)")
    print(f"  {on:6.2f}  all of it, the collector on (Python's default): {on - paused:.2f} CPU s more\n")


def _env(checkout: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(checkout)}  # that checkout's memgraph before the editable install's


def _child(args: list[str], checkout: Path = ROOT) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS (MB) of ``python -m memgraph ARGS -o /dev/null``."""
    cmd = [sys.executable, "-m", "memgraph", *args, "-o", os.devnull]
    p = subprocess.Popen(cmd, cwd=checkout, stderr=subprocess.PIPE, env=_env(checkout))
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    err = p.stderr.read().decode()
    if p.returncode:
        raise RuntimeError(f"{' '.join(args)}: exit {p.returncode}: {err.strip().splitlines()[-1:]}")
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def _least(args: list[str], checkouts: list[Path]) -> list[tuple[float, float]]:
    """Per checkout: the least CPU s of REPEATS runs (alternating between checkouts) and the largest RSS."""
    runs = {c: [] for c in checkouts}
    for _ in range(REPEATS):
        for c in checkouts:
            runs[c].append(_child(args, c))
    return [(min(cpu for cpu, _ in runs[c]), max(rss for _, rss in runs[c])) for c in checkouts]


def _process_part(baseline: Path | None) -> None:
    checkouts = [ROOT] + ([baseline] if baseline else [])
    print("1. process: python -m memgraph analyze MODEL (one child process each): CPU s and peak RSS, "
          f"least CPU of {REPEATS} runs")
    head = f"{'model':16s} {'options':44s} {'CPU s':>7s} {'target':>7s} {'peak RSS MB':>12s}"
    print(head + (f" {'baseline CPU s':>15s} {'RSS MB':>7s}" if baseline else ""))
    for name, _, extra in MODELS:
        figures = _least(["analyze", name, *extra], checkouts)
        (seconds, rss), target = figures[0], TARGETS["process CPU s"].get(name)
        line = f"{name:16s} {' '.join(extra):44s} {seconds:7.2f} {'< ' + str(target) if target else '':>7s} {rss:12.0f}"
        if baseline:
            line += f" {figures[1][0]:15.2f} {figures[1][1]:7.0f}"
        print(line, flush=True)
    print(f"target: peak RSS < {TARGETS['process peak RSS MB']} MB each" +
          (f"; baseline: {baseline}" if baseline else "") + "\n")


def _sweep_part() -> None:
    print("2. sweep: analyze " + " ".join(SWEEP) + " --batch-size LIST (8 sizes) against its largest size alone, "
          f"least CPU of {REPEATS} runs")
    for sizes in SWEEP_SIZES:
        largest = sizes.rsplit(",", 1)[-1]
        (one, one_rss), = _least(["analyze", *SWEEP, "--batch-size", largest], [ROOT])
        (many, many_rss), = _least(["analyze", *SWEEP, "--batch-size", sizes], [ROOT])
        print(f"  --batch-size {largest:18s} {one:7.2f} CPU s {one_rss:6.0f} MB")
        print(f"  --batch-size {sizes:18s} {many:7.2f} CPU s {many_rss:6.0f} MB   sweep/one = {many / one:.2f} "
              f"(target {TARGETS['sweep/one']})", flush=True)
    print("  (batch 1 records another stream than larger batches, so 1..8 takes three traces: 1, 2 and 8; "
          "2..16 takes two)\n")


def _machine() -> str:
    from importlib.metadata import version  # not importing torch here: see main's comment on ru_maxrss

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    bytecode = "off (PYTHONDONTWRITEBYTECODE: memgraph's modules are compiled in every process)" \
        if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    return (f"machine: {cpu}, {os.cpu_count()} cores; Python {platform.python_version()}, torch {version('torch')}, "
            f"transformers {version('transformers')}; bytecode cache {bytecode}")


def _load() -> str:
    return "load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    global REPEATS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--parts", default="imports,process,sweep,trace")
    p.add_argument("--no-make-fx", action="store_true")
    p.add_argument("--models", help="comma list: only these of " + ", ".join(m[0] for m in MODELS))
    p.add_argument("--baseline", type=Path, help="another checkout of memgraph: the process part runs it too")
    p.add_argument("--repeats", type=int, default=REPEATS, help=f"child processes per figure (default {REPEATS})")
    a = p.parse_args()
    REPEATS = a.repeats
    if a.models:
        MODELS[:] = [m for m in MODELS if m[0] in a.models.split(",")]
    parts = a.parts.split(",")
    print(f"{_machine()}\n{_load()} at the start\n", flush=True)
    # Child processes first: a child's ru_maxrss starts from its parent's RSS at fork (Linux keeps the
    # high-water mark across exec), so they are started while this process is still small (nothing above
    # imports torch).
    if "imports" in parts:
        _imports_part()
    if "process" in parts:
        _process_part(a.baseline.resolve() if a.baseline else None)
    if "sweep" in parts:
        _sweep_part()
    if "trace" in parts:
        _trace_part(not a.no_make_fx)
    print(f"{_load()} at the end")


if __name__ == "__main__":
    main()
