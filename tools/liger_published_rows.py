"""Write reports/published/liger-kernel-benchmark/*.json from Liger-Kernel's benchmark data file (issue 28).

    git -C <linkedin/Liger-Kernel clone> show <commit>:benchmark/data/all_benchmark_data.csv > data.csv
    python tools/liger_published_rows.py data.csv <commit>

Each row is one line of the file, quoted verbatim: a memory measurement of the plain PyTorch / Hugging Face
provider (``huggingface``) of a kernel whose measured function memgraph can run
(models/published/liger_kernel_bench.py builds it as the benchmark script builds it). The value is the line's
``y_value_50`` as printed; nothing is rounded or edited. Kernels and GPUs: KERNELS and GPU below. Liger's own Triton kernels are not rows: memgraph cannot
run them.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path

OUT = Path("reports/published/liger-kernel-benchmark")
MODEL = "models/published/liger_kernel_bench.py"
REPO = "https://github.com/linkedin/Liger-Kernel"

# kernel -> (script commit, factory name from the x value, extra options from the x value, what the script runs)
_DEF = "b5672a15"  # "Refactored benchmark tests" (2024-09-03): the commit that wrote the 2024-09-03 rows
KERNELS = {
    "cross_entropy": (_DEF, lambda x: f"cross_entropy_v{x}", lambda x: ["--input", f"target=int64[16384]<{x}"],
                      "_input = torch.randn(B * T, V, requires_grad=True) (B=8, T=2048, float32); "
                      "CrossEntropyLoss()(_input, target); y.backward()"),
    "rms_norm": (_DEF, lambda x: f"rms_norm_h{x}", lambda x: ["--input", f"dy=bfloat16[2048,{x}]"],
                 "x = torch.randn(M=2048, H, bfloat16), requires_grad; the script's LlamaRMSNorm (float32 weight) "
                 "beside an unused LigerRMSNorm; y.backward(dy, retain_graph=True) with dy = torch.randn_like(x)"),
    "layer_norm": (None, lambda x: f"layer_norm_n{x}", lambda x: ["--input", f"dy=float32[4096,{x}]"],
                   "x = torch.randn(M=4096, N, float32), requires_grad; torch.nn.LayerNorm(N, eps=1e-6) beside an "
                   "unused LigerLayerNorm; y.backward(dy, retain_graph=True) with dy = torch.randn_like(x)"),
    "swiglu": (_DEF, lambda x: f"swiglu_t{x}", lambda x: ["--input", "unused=float32[1]"],
               "transformers' LlamaMLP (hidden 4096, intermediate 11008, silu) in bfloat16 on "
               "x = torch.randn(B=4, T, 4096, bfloat16, requires_grad=True); "
               "y.backward(torch.randn_like(y), retain_graph=True)"),
    "geglu": (_DEF, lambda x: f"geglu_t{x}", lambda x: ["--input", "unused=float32[1]"],
              "transformers' LlamaMLP (hidden 4096, intermediate 11008, gelu_pytorch_tanh) in bfloat16 on "
              "x = torch.randn(bsz=8, T, 4096, bfloat16, requires_grad=True); "
              "y.backward(torch.randn_like(y), retain_graph=True)"),
    "group_norm": ("dea3a772", lambda x: f"group_norm_c{x}", lambda x: ["--input", f"dy=float32[128,{x},512]"],
                   "x = torch.randn(M=128, C, H=512, float32), requires_grad; torch.nn.GroupNorm(C // 4, C, "
                   "eps=1e-6) beside an unused LigerGroupNorm; y.backward(dy, retain_graph=True) with "
                   "dy = torch.randn_like(x)"),
    "fused_linear_cross_entropy": (
        "90fb5e4a", lambda x: f"fused_linear_cross_entropy_bt{x}",
        lambda x: ["--input", f"target=int64[{x}]<128256"],
        "the script's TorchLMHeadCE: nn.Linear(4096, 128256, bias=False, bfloat16) and CrossEntropyLoss on the "
        "bfloat16 logits of _input = torch.randn(BT, 4096, bfloat16, requires_grad=True), beside an unused "
        "LigerLMHeadCE (its own [128256, 4096] bfloat16 weight); y.backward()"),
}
# layer_norm was measured twice: on the A100 by b5672a15, on the H100 by 6a2c4913 ("Layernorm enhancement",
# 2025-07-18), whose bench_memory_layer_norm runs the same function.
LAYER_NORM_COMMIT = {"NVIDIA A100-SXM4-80GB": _DEF, "NVIDIA H100 80GB HBM3": "6a2c4913"}
GPU = {"NVIDIA A100-SXM4-80GB": "a100-80gb", "NVIDIA H100 80GB HBM3": "h100-80gb", "NVIDIA B200": "b200"}
# group_norm's bench_memory_group_norm measures the full step whatever the mode: its forward and backward lines repeat
# the full line's figure and are not rows.
MODE_IGNORED = {"group_norm"}
COUNTER_REASON = ("benchmark/scripts/utils.py _test_memory (at {commit}): for each of 10 calls "
                  "'{reset}' then func() then 'mem = {read} / 2**20'; the file holds the 50th, 20th and 80th "
                  "percentiles of the 10 (y_value_50 is the median)")


def _lines(text: str):
    """(raw line, parsed fields) for each data line of the CSV."""
    raw = text.splitlines()
    header = next(csv.reader([raw[0]]))
    for line in raw[1:]:
        fields = next(csv.reader(io.StringIO(line)))
        yield line, dict(zip(header, fields))


def row_file(line: str, rec: dict, data_commit: str) -> tuple[str, dict]:
    kernel, mode, x = rec["kernel_name"], rec["kernel_operation_mode"], rec["x_value"]
    script_commit, factory, inputs, runs = KERNELS[kernel]
    if kernel == "layer_norm":
        script_commit = LAYER_NORM_COMMIT[rec["gpu_name"]]
    new_utils = script_commit in ("6a2c4913", "dea3a772")  # utils.py reads the counter through infer_device()
    reason = COUNTER_REASON.format(
        commit=script_commit,
        reset="getattr(torch, device).memory.reset_peak_memory_stats()" if new_utils
        else "torch.cuda.memory.reset_peak_memory_stats()",
        read="getattr(torch, device).max_memory_allocated()" if new_utils else "torch.cuda.max_memory_allocated()")
    gpu_key = GPU[rec["gpu_name"]]
    name = f"{kernel}-{mode}-{rec['x_name'].lower()}{x}-{gpu_key}"
    data = {
        "kind": "memgraph.published",
        "source": {
            "name": "Liger-Kernel benchmark data: memory of the plain PyTorch / Hugging Face provider",
            "url": f"{REPO}/blob/{data_commit}/benchmark/data/all_benchmark_data.csv",
            "quote": line,
        },
        "counter": "allocated",
        "counter_stated": f"metric_name memory, metric_unit {rec['metric_unit']}, y_value_50",
        "counter_reason": reason,
        "measured": {"value": json.loads(rec["y_value_50"]), "unit": "MiB",
                     "unit_reason": "_test_memory divides max_memory_allocated() by 2**20; the file labels it 'MB'"},
        "gpu": rec["gpu_name"],
        "versions": {"liger_kernel": rec["liger_version"], "torch": "not stated", "transformers": "not stated",
                     "measured_at": rec["timestamp"]},
        "model": f"{MODEL}:{factory(int(x))}",
        "options": [*inputs(int(x)), "--optimizer", "none", "--zero-grad", "none", "--gpu", gpu_key],
        "notes": (f"benchmark/scripts/benchmark_{kernel}.py at {script_commit}, provider huggingface, mode {mode}, "
                  f"{rec['x_name']} = {x}, {rec['extra_benchmark_config_str']}: {runs}. The measured tensors are "
                  "made once and reused by all 10 calls; nothing clears a gradient, so from the second call on it "
                  "is added in place to the one kept (--zero-grad none), and the median is a call of that steady "
                  "state (memgraph's iteration 2). "
                  + ("memgraph's module adds two 512-byte scalars the script lacks (the scalar it calls backward() "
                     "on and its gradient). " if "retain_graph=True" in runs else "")
                  + "The 10 figures pass through a float32 "
                  "tensor (torch.tensor(total_mem, dtype=torch.float)) before torch.quantile, so each figure is "
                  "rounded to float32's step (1 KiB from 8 GiB, 2 KiB from 16 GiB, 4 KiB from 32 GiB)"
                  + ("; the --input 'unused' (512 bytes) is there because a module:function model needs one."
                     if "unused=float32[1]" in inputs(int(x)) else ".")),
    }
    if mode != "full":
        data["out_of_scope"] = (f"mode {mode}: the script measures only the "
                                f"{'forward' if mode == 'forward' else 'backward from a kept forward'}, "
                                "not a training step")
    return name, data


def main(argv: list[str]) -> int:
    csv_path, data_commit = argv
    written = 0
    OUT.mkdir(parents=True, exist_ok=True)
    for line, rec in _lines(Path(csv_path).read_text()):
        if (rec["metric_name"] != "memory" or rec["kernel_provider"] != "huggingface"
                or rec["kernel_name"] not in KERNELS or rec["gpu_name"] not in GPU):
            continue
        if rec["kernel_name"] in MODE_IGNORED and rec["kernel_operation_mode"] != "full":
            continue
        name, data = row_file(line, rec, data_commit)
        (OUT / f"{name}.json").write_text(json.dumps(data, indent=2) + "\n")
        written += 1
    print(f"{written} rows written to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
