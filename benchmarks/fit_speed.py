"""CPU seconds and wall time of `memgraph fit` (each case a fresh `python -m memgraph fit` process).

    python benchmarks/fit_speed.py                      # the cases below
    python benchmarks/fit_speed.py "llama-3-8b --gpu a100-40gb -s 4096"

Target (issue: fit answers in seconds): fit of an 8B model in at most 15 s on the 2-core development
machine. CPU seconds (user + system of the process and its forked analysis workers) are the figure to compare
on a shared machine; wall time is printed beside them with the load average at the start. Prints one line per
case and the analyses fit reported (traced, replayed, interpolated); asserts nothing.
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
    "llama-3-8b --gpu a100-40gb -s 4096",  # the case: 80.7 CPU s at 1da0399, 59.0 after (reports/speed.md)
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


if __name__ == "__main__":
    for c in sys.argv[1:] or CASES:
        run(c)
