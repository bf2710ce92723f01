"""GPU ground truth in one command: many configurations in one process, one JSONL file, predictions beside them.

    python tools/measure_matrix.py gpu --device cuda --budget-s 450 --out $OUT/gpu.jsonl   # on the GPU machine
    python tools/measure_matrix.py gpu --device cpu --budget-s 450 --out /tmp/gpu.jsonl    # the rehearsal here
    python tools/measure_matrix.py split $OUT/gpu.jsonl --out reports/groundtruth/h100-80gb  # records -> files

Written for a lent GPU machine of 15 minutes in all (issue 24): it runs from the source tree on that machine's own
torch and transformers, needs nothing installed, and stops cleanly before ``--budget-s``. Every record is one JSON
line, appended and flushed at once, so whatever ran before a kill is on disk. In order:

1. ``header``: versions (python, torch, CUDA, cuDNN, transformers, memgraph and its git commit), the GPU and driver
   as nvidia-smi prints them and the device memory in use before anything of ours ran.
2. ``context`` (cuda): a fresh process measures the device memory the CUDA context takes (after
   ``torch.cuda.init()``), then after its first cuBLAS GEMM and its first cuDNN convolution, with the caching
   allocator's own figures beside each.
3. ``measurement`` with ``fresh_process: true``: one configuration run by ``memgraph measure`` in its own process,
   before this process opens its CUDA context; the same configuration runs again in the loop, so a reset between
   configurations can be compared with a fresh process.
4. ``measurement`` per configuration, in this process: ``memgraph measure``'s own record (``max_memory_allocated``,
   ``max_memory_reserved``, the device total by ``mem_get_info`` and nvidia-smi, ``memory_stats()`` per iteration,
   versions), then the reset: ``gc.collect``, ``empty_cache``, cuBLAS's workspaces cleared (PyTorch keeps one per
   handle and stream until ``torch._C._cuda_clearCublasWorkspaces``, aten/src/ATen/cuda/CublasHandlePool.cpp), the
   allocator settings put back, and what stays allocated after the reset recorded (``allocated_after_reset``).
5. ``prediction`` per configuration: ``memgraph analyze --target cuda`` for the GPU nvidia-smi names, made by worker
   processes on the machine's CPU cores with no GPU visible (``CUDA_VISIBLE_DEVICES=""``) while the GPU measures,
   with that machine's versions: version drift and modelling error can be told apart.
6. ``footer``: what ran, what was left for the budget, wall times.

The matrix is ordered so the most informative and cheapest configurations come first (small models across every
knob, then batch series, allocator settings, LoRA, MoE, multimodal, 7B models, compiled steps).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from memgraph.measure.cuda import nvidia_smi_query  # noqa: E402  (the query measure records per iteration)
from tools.matrix import slug  # noqa: E402

ITERATIONS = 3  # the steady state is seen twice on a GPU (iterations 2 and 3)
MOE = "tools/gpu_configs/olmoe-defaults.json"  # see tools/gpu_configs/README.md
FRESH = ["llama-3.2-1b", "-s", "2048", "-b", "2", "--precision", "bf16-mixed", "--attn", "sdpa", "--optimizer", "adamw"]
# Seconds a configuration of this size may take on one H100 (model built without weights, 3 iterations): the loop
# starts a configuration only while this much of the budget is left. Rough by design (model size classes).
COST_S = {"small": 8.0, "1b": 15.0, "mm": 30.0, "7b": 45.0, "compile": 90.0}


def _gpu_matrix() -> list[tuple[str, list[str]]]:
    """(cost class, memgraph measure arguments): at least 40 configurations over 10+ models (issue 24)."""
    mix, bf16, fp32, fp16 = (["--precision", p] for p in ("bf16-mixed", "bf16", "fp32", "fp16-mixed"))
    sdpa, eager, ckpt = ["--attn", "sdpa"], ["--attn", "eager"], ["--gradient-checkpointing"]
    adamw, sgd = ["--optimizer", "adamw"], ["--optimizer", "sgd"]
    foreach, fused = ["--optimizer-impl", "foreach"], ["--optimizer-impl", "fused"]
    expandable = ["--allocator-conf", "expandable_segments:True"]
    gpt2 = ["gpt2", "-s", "1024", "-b", "8"]
    m = [
        # small models across the knobs: precision, attention, optimizer and its implementation, checkpointing
        ("small", [*gpt2, *mix, *sdpa, *adamw, *fused]),
        ("small", [*gpt2, *mix, *sdpa, *adamw, *foreach]),
        ("small", [*gpt2, *fp32, *eager, *adamw]),
        ("small", [*gpt2, *fp32, *sdpa, *sgd]),
        ("small", [*gpt2, *bf16, *sdpa, *adamw]),
        ("small", [*gpt2, *mix, *eager, *adamw]),
        ("small", [*gpt2, *mix, *sdpa, *adamw, *ckpt]),
        ("small", [*gpt2, *fp16, *sdpa, *adamw]),  # GradScaler
        ("small", ["bert-large-uncased", "-s", "512", "-b", "8", *fp32, *eager, *adamw]),
        ("small", ["bert-large-uncased", "-s", "512", "-b", "16", *mix, *sdpa, *adamw]),
        ("small", ["t5-base", "-s", "512", "--target-len", "128", "-b", "8", *fp32, *eager, *adamw]),
        ("small", ["t5-base", "-s", "512", "--target-len", "128", "-b", "8", *mix, *eager, *adamw]),
        ("small", ["vit-base-patch16-224", "-b", "32", *fp32, *eager, *adamw]),
        ("small", ["vit-base-patch16-224", "-b", "64", *mix, *sdpa, *adamw]),
        ("small", ["resnet-50", "-b", "32", *fp32, "--optimizer", "sgd-momentum"]),
        ("small", ["resnet-50", "-b", "64", *mix, *adamw]),
        ("small", ["clip-vit-large-patch14-336", "-b", "16", *mix, *sdpa, *adamw]),
        ("small", ["whisper-small", "-b", "8", *mix, *sdpa, *adamw]),
        ("small", ["whisper-small", "-b", "4", *fp32, *eager, *adamw]),
        ("small", ["siglip-base", "-b", "32", *mix, *sdpa, *adamw]),
    ]
    for b in ("1", "2", "4", "8"):  # batch series, three models
        m.append(("small", ["gpt2", "-s", "1024", "-b", b, *mix, *sdpa, *adamw]))
        m.append(("1b", ["qwen2.5-0.5b", "-s", "2048", "-b", b, *mix, *sdpa, *adamw]))
        m.append(("1b", ["llama-3.2-1b", "-s", "2048", "-b", b, *mix, *sdpa, *adamw]))
    m += [
        # expandable segments on (the same configurations run off above)
        ("small", [*gpt2, *mix, *sdpa, *adamw, *fused, *expandable]),
        ("1b", ["llama-3.2-1b", "-s", "2048", "-b", "4", *mix, *sdpa, *adamw, *expandable]),
        ("small", ["resnet-50", "-b", "64", *mix, *adamw, *expandable]),
        ("1b", ["qwen2.5-0.5b", "-s", "2048", "-b", "8", *mix, *sdpa, *adamw, *ckpt]),
        ("1b", ["qwen2.5-0.5b", "-s", "1024", "-b", "2", *fp32, *eager, *sgd]),
        ("1b", ["llama-3.2-1b", "-s", "2048", "-b", "2", *mix, *eager, *adamw]),
        ("1b", ["llama-3.2-1b", "-s", "2048", "-b", "8", *mix, *sdpa, *adamw, *ckpt]),
        ("1b", ["llama-3.2-1b", "-s", "2048", "-b", "4", *bf16, *sdpa, *sgd]),
        ("1b", ["llama-3.2-1b", "-s", "2048", "-b", "4", *bf16, *sdpa, *adamw, "--lora-rank", "16"]),
        ("1b", [MOE, "-s", "2048", "-b", "2", *mix, *sdpa, *adamw]),  # mixture of experts
        # multimodal: Qwen2-VL at two image sizes, LLaVA stages 1 and 2
        ("mm", ["qwen2-vl-2b", "-s", "2048", "-b", "2", "--image-size", "448x448", *mix, *sdpa, *adamw]),
        ("mm", ["qwen2-vl-2b", "-s", "2048", "-b", "4", "--image-size", "448x672", *mix, *sdpa, *adamw, *ckpt]),
        ("7b", ["llava-1.5-7b", "-s", "2048", "-b", "8", *mix, *sdpa, *adamw, *ckpt, "--stage", "1"]),
        ("7b", ["llava-1.5-7b", "-s", "2048", "-b", "2", *bf16, *sdpa, *adamw, *ckpt, "--stage", "2"]),
        # 7B decoders (bf16 states: a 7B full fine-tune with fp32 Adam states does not fit 80 GB)
        ("7b", ["llama-2-7b", "-s", "2048", "-b", "1", *bf16, *sdpa, *sgd]),
        ("7b", ["llama-2-7b", "-s", "2048", "-b", "1", *bf16, *sdpa, *sgd, *ckpt]),
        ("7b", ["llama-2-7b", "-s", "1024", "-b", "1", *bf16, *sdpa, *adamw, *ckpt]),
        ("7b", ["llama-2-7b", "-s", "2048", "-b", "4", *mix, *sdpa, *adamw, "--lora-rank", "16", *ckpt]),
        ("7b", ["mistral-7b", "-s", "2048", "-b", "1", *bf16, *sdpa, *sgd, *ckpt]),
        # compiled steps (Inductor with Triton on the GPU): last, as compiling takes the longest
        ("compile", ["gpt2", "-s", "1024", "-b", "8", *mix, *sdpa, *adamw, "--compile"]),
        ("compile", ["llama-3.2-1b", "-s", "2048", "-b", "2", *mix, *sdpa, *adamw, "--compile"]),
    ]
    return m


def _tiny_matrix() -> list[tuple[str, list[str]]]:
    """The rehearsal's small matrix (tests/configs): the same code path in seconds on a CPU."""
    t = "tests/configs"
    return [("small", [f"{t}/tiny-gpt2.json", "-s", "32", "-b", "2"]),
            ("small", [f"{t}/tiny-llama.json", "-s", "32", "-b", "2", "--optimizer", "adamw"]),
            ("small", [f"{t}/tiny-bert.json", "-s", "32", "-b", "2", "--optimizer", "sgd"])]


MATRICES = {"gpu": _gpu_matrix, "tiny": _tiny_matrix}


class Log:
    """One JSONL file: each record appended as one line and flushed at once."""

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a", encoding="utf-8")

    def write(self, record: dict) -> None:
        self.file.write(json.dumps(record, sort_keys=True) + "\n")
        self.file.flush()
        os.fsync(self.file.fileno())


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None


def _header(argv: list[str], smi: dict | None) -> dict:
    import platform

    import torch
    import transformers

    import memgraph

    return {"record": "header", "argv": argv, "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
            "transformers": transformers.__version__, "memgraph": memgraph.__version__, "git_commit": _git_commit(),
            "cpu_count": os.cpu_count(), "nvidia_smi_before": smi}


# --- the CUDA context on its own (a fresh process) --------------------------------------------------------------

_CONTEXT_PROBE = r"""
import json, torch
def used():
    free, total = torch.cuda.mem_get_info()
    return total - free
out = {}
torch.cuda.init()
out["after_init"] = used()
a = torch.ones(256, 256, device="cuda")
torch.cuda.synchronize()
out["after_first_tensor"] = used()
out["allocated_after_first_tensor"] = torch.cuda.memory_allocated()
(a @ a).sum().item()
out["after_first_fp32_gemm"] = used()
out["reserved_after_first_fp32_gemm"] = torch.cuda.memory_reserved()
out["allocated_after_first_fp32_gemm"] = torch.cuda.memory_allocated()
b = a.bfloat16()
(b @ b).float().sum().item()
out["after_first_bf16_gemm"] = used()
out["reserved_after_first_bf16_gemm"] = torch.cuda.memory_reserved()
x = torch.ones(8, 3, 64, 64, device="cuda")
w = torch.ones(16, 3, 3, 3, device="cuda")
torch.nn.functional.conv2d(x, w).sum().item()
out["after_first_cudnn_conv"] = used()
out["reserved_after_first_cudnn_conv"] = torch.cuda.memory_reserved()
out["cudnn"] = torch.backends.cudnn.version()
props = torch.cuda.get_device_properties(0)
out["device"] = {"name": props.name, "total_memory": props.total_memory, "cc": [props.major, props.minor]}
print(json.dumps(out))
"""


def _context_record(budget_left: float) -> dict:
    smi_before = nvidia_smi_query()
    try:
        proc = subprocess.run([sys.executable, "-c", _CONTEXT_PROBE], capture_output=True, text=True,
                              timeout=max(10.0, min(120.0, budget_left)))
        probe = json.loads(proc.stdout.strip().splitlines()[-1]) if proc.returncode == 0 else None
        error = None if proc.returncode == 0 else proc.stderr.strip()[-2000:]
    except (subprocess.SubprocessError, ValueError, IndexError) as e:
        probe, error = None, f"{type(e).__name__}: {e}"
    return {"record": "context", "nvidia_smi_before": smi_before, "probe": probe, "error": error}


# --- measurements ------------------------------------------------------------------------------------------------

def _measure_in_process(args: list[str], device: str) -> dict:
    """``memgraph measure ARGS`` in this process: its record, or the one line it printed."""
    from memgraph.cli import main

    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "record.json"
        err = io.StringIO()
        start = time.time()
        with contextlib.redirect_stderr(err):
            code = main(["measure", *args, "--device", device, "--iterations", str(ITERATIONS), "-o", str(target)])
        wall = time.time() - start
        if code == 0 and target.exists():
            return {"status": "ok", "wall_s": round(wall, 3), "result": json.loads(target.read_text())}
    return {"status": "error", "wall_s": round(wall, 3), "error": err.getvalue().strip()[-2000:]}


def _measure_fresh_process(args: list[str], device: str, budget_left: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "record.json"
        start = time.time()
        try:
            proc = subprocess.run([sys.executable, "-m", "memgraph", "measure", *args, "--device", device,
                                   "--iterations", str(ITERATIONS), "-o", str(target)], cwd=REPO,
                                  capture_output=True, text=True, timeout=max(10.0, budget_left))
        except subprocess.TimeoutExpired:
            return {"status": "error", "wall_s": round(time.time() - start, 3), "error": "timed out"}
        wall = round(time.time() - start, 3)
        if proc.returncode == 0 and target.exists():
            return {"status": "ok", "wall_s": wall, "result": json.loads(target.read_text())}
        return {"status": "error", "wall_s": wall, "error": proc.stderr.strip()[-2000:]}


def _reset(device: str, args: list[str]) -> dict:
    """Between configurations: what a fresh process would start from, as far as PyTorch lets a process go back."""
    gc.collect()
    if device != "cuda":
        return {}
    import torch

    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    with contextlib.suppress(AttributeError, RuntimeError):
        torch._C._cuda_clearCublasWorkspaces()  # private: the per-handle cuBLAS workspaces (see the docstring)
    if "--allocator-conf" in args:  # back to the default for the next configuration
        torch.cuda.memory._set_allocator_settings("expandable_segments:False")
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    free, total = torch.cuda.mem_get_info()
    return {"allocated_after_reset": torch.cuda.memory_allocated(), "reserved_after_reset": torch.cuda.memory_reserved(),
            "device_used_after_reset": total - free}


# --- predictions on the CPU cores --------------------------------------------------------------------------------

def _worker_init() -> None:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # read by the CUDA runtime at its first call: no context, no GPU memory
    import torch

    torch.set_num_threads(1)


def _predict(args: list[str], gpu: str, target: str) -> dict:
    """``memgraph analyze ARGS --target TARGET --gpu GPU -f json`` in a worker process (the rehearsal on the CPU
    predicts the cpu target, which must equal its measurements)."""
    from memgraph.cli import main

    start = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(["analyze", *args, "--target", target, "--gpu", gpu, "-f", "json", "-o", str(out)])
            except BaseException as e:  # noqa: BLE001 - a worker reports, never dies
                code, err = 1, io.StringIO(f"{type(e).__name__}: {e}")
        wall = round(time.time() - start, 3)
        if code == 0 and out.exists():
            report = json.loads(out.read_text())
            return {"status": "ok", "wall_s": wall, "result": {k: v for k, v in report.items() if k in KEPT}}
        return {"status": "error", "wall_s": wall, "error": err.getvalue().strip()[-2000:]}


# The report's figures a comparison needs; the timeline, op and module tables are left out (files come back from
# the GPU machine up to 16 MiB each, and the report can be made again here from the record's options).
KEPT = ("steady_state_peak", "first_iteration_peak", "device", "static", "phase_peaks", "required_bytes",
        "required_bytes_upper", "required_bytes_validated_upper", "fits", "fits_with_margin", "margin_basis",
        "options", "versions", "notes", "unknowns", "warnings", "assumptions", "parameters", "trainable_parameters",
        "optimizer_impl", "analysis_seconds", "trace_seconds", "gpu", "target", "model", "schema_version")


def _gpu_key(smi: dict | None) -> str:
    """The catalog name memgraph predicts for: the GPU nvidia-smi names (memgraph/facts/gpus.py get_gpu), or the
    default target GPU in the CPU rehearsal."""
    from memgraph.facts.gpus import DEFAULT_GPU, get_gpu

    if smi is None:
        return DEFAULT_GPU
    try:
        return get_gpu(smi["name"]).key
    except Exception:  # noqa: BLE001 - a GPU the catalog lacks: predict for the default, say so in the header
        return DEFAULT_GPU


# --- the run -----------------------------------------------------------------------------------------------------

def run(matrix: str, device: str, budget_s: float, out: Path, workers: int, only: str | None) -> int:
    t0 = time.time()
    left = lambda: budget_s - (time.time() - t0)  # noqa: E731
    log = Log(out)
    smi = nvidia_smi_query() if device == "cuda" else None
    header = _header(sys.argv, smi)
    configs = [(cost, args) for cost, args in MATRICES[matrix]() if not only or only in slug(args)]
    gpu = _gpu_key(smi)
    header.update(matrix=matrix, device=device, budget_s=budget_s, configurations=len(configs), predict_for=gpu,
                  workers=workers, iterations=ITERATIONS)
    log.write(header)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn"), initializer=_worker_init) \
        if workers else None
    predictions = {slug(a): pool.submit(_predict, a, gpu, device) for _, a in configs} if pool else {}
    if device == "cuda":
        log.write(_context_record(left()))
    fresh = FRESH if matrix == "gpu" else configs[0][1]
    log.write({"record": "measurement", "slug": slug(fresh), "args": fresh, "fresh_process": True, "index": None,
               **_measure_fresh_process(fresh, device, left())})
    done, skipped = [], []
    for index, (cost, args) in enumerate(configs):
        name = slug(args)
        if left() < COST_S[cost]:
            skipped.append(name)
            continue
        record = {"record": "measurement", "slug": name, "args": args, "fresh_process": False, "index": index,
                  "cost_class": cost}
        try:
            record.update(_measure_in_process(args, device))
        except BaseException as e:  # noqa: BLE001 - one configuration's failure never stops the matrix
            if isinstance(e, KeyboardInterrupt):
                raise
            record.update(status="error", error=f"{type(e).__name__}: {e}"[-2000:])
        record.update(_reset(device, args))
        log.write(record)
        done.append(name)
    waited = []
    for name, future in predictions.items():
        remaining = left()
        if remaining <= 1:
            future.cancel()
            continue
        try:
            result = future.result(timeout=remaining)
        except Exception as e:  # noqa: BLE001 - timeouts and worker deaths are recorded, not raised
            result = {"status": "error", "error": f"{type(e).__name__}: {e}"[-2000:]}
        log.write({"record": "prediction", "slug": name, "args": next(a for _, a in configs if slug(a) == name),
                   "gpu": gpu, **result})
        waited.append(name)
    if pool:
        workers_left = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in workers_left:  # a worker still predicting is ended, not waited for
            p.terminate()
    log.write({"record": "footer", "wall_s": round(time.time() - t0, 3), "measured": len(done),
               "skipped_for_budget": skipped, "predicted": len(waited),
               "predictions_left": [n for n in predictions if n not in waited]})
    print(f"measure_matrix: {len(done)} measured, {len(skipped)} left for the budget, {len(waited)} predicted, "
          f"{time.time() - t0:.1f} s -> {out}", flush=True)
    return 0


def split(jsonl: Path, out: Path) -> int:
    """Each measurement record of ``jsonl`` as the file ``memgraph measure -o`` writes (``memgraph validate`` reads
    those), named by its configuration; a fresh-process record gets ``.fresh`` in its name. Records are copied, not
    changed."""
    out.mkdir(parents=True, exist_ok=True)
    n = 0
    for line in jsonl.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("record") != "measurement" or rec.get("status") != "ok":
            continue
        name = rec["slug"] + (".fresh" if rec["fresh_process"] else "")
        (out / f"{name}.json").write_text(json.dumps(rec["result"], indent=1) + "\n")
        n += 1
    print(f"split: {n} records -> {out}")
    return 0


def summary(jsonl: Path) -> int:
    """Measured (steady state, in-process) against predicted, per configuration: allocated, reserved, device total."""
    from memgraph.validation import METRICS, measured_peaks

    measured, predicted, fresh = {}, {}, {}
    for line in jsonl.read_text().splitlines():
        rec = json.loads(line)
        if rec.get("record") == "measurement" and rec.get("status") == "ok":
            (fresh if rec["fresh_process"] else measured)[rec["slug"]] = measured_peaks(rec["result"])
        elif rec.get("record") == "prediction" and rec.get("status") == "ok":
            device = rec["result"].get("device") or {}
            predicted[rec["slug"]] = {"allocated": rec["result"]["steady_state_peak"]["bytes"],
                                      "reserved": device.get("steady_state_reserved"),
                                      "device_total": device.get("steady_state_device_total")}
    print("configuration | " + " | ".join(f"{m} measured / predicted / error" for m in METRICS))
    for name, m in measured.items():
        p = predicted.get(name, {})
        cells = []
        for metric in METRICS:
            mv, pv = m.get(metric), p.get(metric)
            err = f"{100 * (pv - mv) / mv:+.1f}%" if mv and pv is not None else "-"
            cells.append(f"{mv if mv is not None else '-'} / {pv if pv is not None else '-'} / {err}")
        print(f"{name} | " + " | ".join(cells))
    for name, f in fresh.items():
        print(f"fresh process {name}: {f} (in this process: {measured.get(name)})")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tools/measure_matrix.py")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("gpu", help="the GPU matrix (issue 24)")
    t = sub.add_parser("tiny", help="three tiny configurations: the same code path in seconds")
    for q in (r, t):
        q.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
        q.add_argument("--budget-s", type=float, default=450.0, help="stop starting configurations before this")
        q.add_argument("--out", required=True, type=Path, help="the JSONL file records are appended to")
        q.add_argument("--workers", type=int, default=max(0, min(12, (os.cpu_count() or 2) - 2)),
                       help="processes predicting on the CPU cores meanwhile (0: none)")
        q.add_argument("--only", help="only configurations whose name contains this text")
    s = sub.add_parser("split", help="measurement records -> one JSON file each, for memgraph validate")
    s.add_argument("jsonl", type=Path)
    s.add_argument("--out", required=True, type=Path)
    m = sub.add_parser("summary", help="measured against predicted, per configuration")
    m.add_argument("jsonl", type=Path)
    a = p.parse_args(argv)
    if a.cmd == "summary":
        return summary(a.jsonl)
    if a.cmd == "split":
        return split(a.jsonl, a.out)
    return run(a.cmd, a.device, a.budget_s, a.out, a.workers, a.only)


if __name__ == "__main__":
    sys.exit(main())
