"""CPU seconds and wall time of `memgraph fit` (each case a fresh `python -m memgraph fit` process).

    python benchmarks/fit_speed.py                      # the cases below
    python benchmarks/fit_speed.py "llama-3-8b --gpu a100-40gb -s 4096"
    python benchmarks/fit_speed.py --traces "llama-3-8b --gpu a100-40gb -s 4096"   # every trace, in-process

Target (issue: fit answers in seconds): fit of an 8B model in at most 15 s on the 2-core development
machine. CPU seconds (user + system of the process and its forked analysis workers) are the figure to compare
on a shared machine; wall time is printed beside them with the load average at the start. Prints one line per
case and the analyses fit reported (traced, replayed, interpolated); asserts nothing. With ``--traces``, one fit
in this process with the worker pool off: each real trace (trace/tracer.py ``_trace_all_layers``) with its depth,
parallelism and CPU s, then the totals (how reports/speed.md's breakdown was made, there under cProfile).
"""

from __future__ import annotations

import json
import os
import resource
import shlex
import subprocess
import sys
import time

CASES = [
    "llama-3-8b --gpu a100-40gb -s 4096",  # the case: 61.7 CPU s at 5677251, 21.1 at 68d1bc7, 12.4 after
    # (reports/speed.md)
    "llama-3-8b --quantize 4bit --lora-rank 16 --precision bf16 -s 4096 --gpu rtx-4090",
]


def run(case: str) -> None:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    start = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "memgraph", "fit", *shlex.split(case), "--format", "json"],
                       capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode not in (0, 3):  # 3: your settings do not fit (cli.py FIT_EXIT_DOES_NOT_FIT)
        print(f"{case}: FAILED: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
        return
    d = json.loads(p.stdout)
    hows: dict[str, int] = {}
    for a in d["analyses"]:
        kind = a["how"].split(" ")[0]
        hows[kind] = hows.get(kind, 0) + 1
    best = d["suggestions"][0]["setting"] if d["suggestions"] else "(fits as given)"
    print(f"{case}\n  {cpu:6.1f} CPU s  {wall:6.1f} s wall (load {load:.1f})  {len(d['analyses'])} analyses "
          f"{hows}  best: {best}", flush=True)


def traces(case: str) -> None:
    sys.path.insert(0, os.getcwd())  # the memgraph of the directory it runs in, as `python -m memgraph` imports it
    import memgraph.fit.analyses as analyses
    import memgraph.trace.tracer as tracer
    from memgraph.cli import build_parser, training_options
    from memgraph.fit import fit

    analyses.usable_cpus = lambda: 1  # every analysis here, in turn, so each trace is timed in this process
    real, rows = tracer._trace_all_layers, []

    def timed(spec, opts, rank=0):
        start = time.process_time()
        try:
            return real(spec, opts, rank)
        finally:
            config = spec.config
            depth = getattr(config, "num_hidden_layers", None) or getattr(getattr(config, "text_config", None),
                                                                          "num_hidden_layers", "?")
            rows.append((depth, time.process_time() - start, opts.nproc, opts.strategy or opts.deepspeed or ""))

    tracer._trace_all_layers = timed
    a = build_parser().parse_args(["fit", *shlex.split(case)])
    start = time.process_time()
    fit(a.model, training_options(a), a.solve, max_gpus=a.max_gpus)
    for depth, cpu, nproc, how in rows:
        print(f"  trace: {depth} layers  {cpu:6.2f} CPU s  nproc {nproc} {how}")
    print(f"{case}\n  {len(rows)} traces, {sum(r[1] for r in rows):.1f} CPU s of {time.process_time() - start:.1f}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--traces"]:
        for c in sys.argv[2:] or CASES[:1]:
            traces(c)
    else:
        for c in sys.argv[1:] or CASES:
            run(c)
