"""Wall time and peak RSS of `memgraph analyze` (each case in a fresh process).

    python benchmarks/analyze_speed.py            # gpt2, llama-2-7b, llama-2-70b
    python benchmarks/analyze_speed.py gpt2:8:1024

Target (issue: memgraph analyze): llama-2-7b, batch 1, seq 2048, AdamW in under 30 s and 1.5 GB
on the 2-core development machine. Prints one line per case; asserts nothing.
"""

from __future__ import annotations

import json
import subprocess
import sys

CASES = ["gpt2:1:1024", "llama-2-7b:1:2048", "llama-2-70b:1:2048"]

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from memgraph.api import analyze
t1 = time.perf_counter()
r = analyze(sys.argv[1], batch_size=int(sys.argv[2]), seq_len=int(sys.argv[3]), optimizer="adamw")
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "analyze_s": t2 - t1, "trace_s": r.trace_seconds,
                  "analysis_s": r.analysis_seconds, "ops": r.ops["count"],
                  "peak_bytes": r.steady_state_peak.bytes,
                  "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main(cases: list[str]) -> None:
    print(f"{'case':24s} {'wall s':>8s} {'trace s':>8s} {'analysis s':>10s} {'ops':>8s} {'max RSS MB':>10s} {'peak GiB':>9s}")
    for case in cases:
        model, batch, seq = case.split(":")
        p = subprocess.run([sys.executable, "-c", CHILD, model, batch, seq], capture_output=True, text=True)
        if p.returncode:
            print(f"{case:24s} FAILED: {p.stderr.strip().splitlines()[-1]}")
            continue
        d = json.loads(p.stdout.strip().splitlines()[-1])
        wall = d["import_s"] + d["analyze_s"]
        print(f"{case:24s} {wall:8.1f} {d['trace_s']:8.1f} {d['analysis_s']:10.1f} {d['ops']:8d} "
              f"{d['max_rss_mb']:10.0f} {d['peak_bytes'] / 2**30:9.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or CASES)
