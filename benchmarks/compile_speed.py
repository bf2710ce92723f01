"""CPU seconds of `memgraph analyze --compile`, each case in a fresh process (the console command as a user runs it).

    python benchmarks/compile_speed.py                # llama-3-8b (issue 30's case) and two tiny ones
    python benchmarks/compile_speed.py llama-3-8b "--compile --precision bf16-mixed -s 4096 --gpu h100-80gb"

Target (issue 30): `analyze llama-3-8b --compile --precision bf16-mixed -s 4096 --gpu h100-80gb` in under 60 CPU
seconds on the 2-core development machine. CPU seconds (user + sys of the child, from the OS's accounting) count
the work, not the waiting, but a machine shared with other busy processes still inflates them (caches, hyper-
threads): compare figures measured side by side. Prints one line per case with the steady-state peak, so a speed
change that moved bytes shows; asserts nothing. Measured 2026-11-27 on a quiet machine, side by side: llama-3-8b 58.1
CPU s (65.4 before memgraph/frame_stack.py), tiny Llama cuda 9.7 (11.0), tiny Llama cpu 16.8 (18.2).
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile

CASES = [
    ("llama-3-8b", "--compile --precision bf16-mixed -s 4096 --gpu h100-80gb"),
    ("tests/configs/tiny-llama.json", "--compile --precision bf16-mixed -s 64"),
    ("tests/configs/tiny-llama.json", "--compile --target cpu -s 32 -b 1 --optimizer sgd"),
]


def _run(model: str, args: str) -> tuple[float, float, int | None]:
    """(user s, sys s, steady-state peak bytes) of one `python -m memgraph analyze` process."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run([sys.executable, "-m", "memgraph", "analyze", model, *args.split(), "-f", "json",
                            "-o", out], capture_output=True, text=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak = json.load(open(out))["steady_state_peak"]["bytes"] if p.returncode == 0 else None
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime, peak


def main(cases: list[tuple[str, str]]) -> None:
    print(f"{'model':32s} {'options':56s} {'user s':>7s} {'sys s':>6s} {'CPU s':>6s} {'peak B':>16s}")
    for model, args in cases:
        user, system, peak = _run(model, args)
        shown = f"{peak:,}" if peak is not None else "FAILED"
        print(f"{model:32s} {args:56s} {user:7.1f} {system:6.1f} {user + system:6.1f} {shown:>16s}", flush=True)


if __name__ == "__main__":
    main([(sys.argv[1], sys.argv[2])] if len(sys.argv) > 2 else CASES)
