"""Measurement matrices: run ``memgraph measure`` over many configurations, one JSON file each.

    python tools/matrix.py cpu-tiny --out reports/groundtruth/cpu
    python tools/matrix.py gpu --device cuda --out reports/groundtruth/h100-80gb

Each configuration runs in its own process (a fresh CUDA context, so reserved memory and the
device total are not inherited from the previous one) and writes its raw record with
``memgraph measure -o``. Existing files are skipped, so an interrupted run resumes where it
stopped. Failures (e.g. out of memory) are appended to ``failures.log`` in the output folder.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

TINY = "tests/configs"
GPU_ITERATIONS = 3


def _tiny() -> list[list[str]]:
    sizes = {"tiny-llama": ["-s", "32"], "tiny-gpt2": ["-s", "32"], "tiny-bert": ["-s", "32"],
             "tiny-t5": ["-s", "32", "--target-len", "16"], "tiny-vit": [], "tiny-resnet": ["--image-size", "32"],
             "tiny-clip": ["-s", "16"], "tiny-whisper": ["--audio-seconds", "1", "--target-len", "16"],
             "tiny-siglip": ["-s", "16"], "tiny-llava": ["-s", "64", "--images", "2"],
             "tiny-qwen2-vl": ["-s", "64", "--images", "2", "--image-size", "56x84"]}
    out = []
    for name, size in sizes.items():
        out.append([f"{TINY}/{name}.json", *size, "-b", "1", "--optimizer", "sgd"])
        out.append([f"{TINY}/{name}.json", *size, "-b", "8", "--optimizer", "adamw"])
    return out


def _gpu() -> list[list[str]]:
    """At least 40 configurations over 10+ models for one 80 GB GPU (see issue: ground truth)."""
    m = []
    mix, bf16, fp32 = ["--precision", "bf16-mixed"], ["--precision", "bf16"], ["--precision", "fp32"]
    sdpa, eager, ckpt = ["--attn", "sdpa"], ["--attn", "eager"], ["--gradient-checkpointing"]
    adamw, sgd = ["--optimizer", "adamw"], ["--optimizer", "sgd"]
    for b in ("1", "2", "4", "8"):  # batch-size series, three models
        m.append(["gpt2", "-s", "1024", "-b", b, *mix, *sdpa, *adamw])
        m.append(["qwen2.5-0.5b", "-s", "2048", "-b", b, *mix, *sdpa, *adamw])
        m.append(["llama-3.2-1b", "-s", "2048", "-b", b, *mix, *sdpa, *adamw])
    m += [
        ["gpt2", "-s", "1024", "-b", "8", *fp32, *eager, *adamw],
        ["gpt2", "-s", "1024", "-b", "8", *fp32, *sdpa, *sgd],
        ["gpt2", "-s", "1024", "-b", "8", *bf16, *sdpa, *adamw],
        ["gpt2", "-s", "1024", "-b", "8", *mix, *eager, *adamw],
        ["gpt2", "-s", "1024", "-b", "8", *mix, *sdpa, *adamw, *ckpt],
        ["qwen2.5-0.5b", "-s", "2048", "-b", "4", *bf16, *sdpa, *adamw],
        ["qwen2.5-0.5b", "-s", "2048", "-b", "8", *mix, *sdpa, *adamw, *ckpt],
        ["qwen2.5-0.5b", "-s", "1024", "-b", "2", *fp32, *eager, *sgd],
        ["llama-3.2-1b", "-s", "2048", "-b", "2", *mix, *eager, *adamw],
        ["llama-3.2-1b", "-s", "2048", "-b", "8", *mix, *sdpa, *adamw, *ckpt],
        ["llama-3.2-1b", "-s", "2048", "-b", "4", *bf16, *sdpa, *sgd],
        ["llama-2-7b", "-s", "2048", "-b", "1", *bf16, *sdpa, *sgd],
        ["llama-2-7b", "-s", "2048", "-b", "1", *bf16, *sdpa, *sgd, *ckpt],
        ["llama-2-7b", "-s", "1024", "-b", "1", *bf16, *sdpa, *adamw, *ckpt],
        ["mistral-7b", "-s", "2048", "-b", "1", *bf16, *sdpa, *sgd, *ckpt],
        ["bert-large-uncased", "-s", "512", "-b", "8", *fp32, *eager, *adamw],
        ["bert-large-uncased", "-s", "512", "-b", "8", *fp32, *sdpa, *adamw],
        ["bert-large-uncased", "-s", "512", "-b", "16", *mix, *sdpa, *adamw],
        ["t5-base", "-s", "512", "--target-len", "128", "-b", "8", *fp32, *eager, *adamw],
        ["t5-base", "-s", "512", "--target-len", "128", "-b", "8", *mix, *eager, *adamw],
        ["vit-base-patch16-224", "-b", "32", *fp32, *eager, *adamw],
        ["vit-base-patch16-224", "-b", "64", *mix, *sdpa, *adamw],
        ["resnet-50", "-b", "32", *fp32, "--optimizer", "sgd-momentum"],
        ["resnet-50", "-b", "64", *mix, *adamw],
        ["clip-vit-large-patch14-336", "-b", "8", *fp32, *eager, *adamw],
        ["clip-vit-large-patch14-336", "-b", "16", *mix, *sdpa, *adamw],
        ["whisper-small", "-b", "4", *fp32, *eager, *adamw],
        ["whisper-small", "-b", "8", *mix, *sdpa, *adamw],
        ["siglip-base", "-b", "32", *mix, *sdpa, *adamw],
        # multimodal (issue: multimodal models): LLaVA stages 1 and 2, Qwen2-VL at two image sizes
        ["llava-1.5-7b", "-s", "2048", "-b", "8", *mix, *sdpa, *adamw, *ckpt, "--stage", "1"],
        ["llava-1.5-7b", "-s", "2048", "-b", "2", *bf16, *sdpa, *adamw, *ckpt, "--stage", "2"],
        ["qwen2-vl-2b", "-s", "2048", "-b", "2", "--image-size", "448x448", *mix, *sdpa, *adamw],
        ["qwen2-vl-2b", "-s", "2048", "-b", "4", "--image-size", "448x672", *mix, *sdpa, *adamw, *ckpt],
    ]
    return m


MATRICES = {"cpu-tiny": _tiny, "gpu": _gpu}


def slug(args: list[str]) -> str:
    """A file name for a configuration: model and options, e.g. 'gpt2__s1024_b8_precision-bf16-mixed'."""
    model = Path(args[0]).stem if args[0].endswith(".json") else args[0]
    opts = "_".join(a.lstrip("-").replace("gradient-checkpointing", "ckpt") for a in args[1:])
    opts = re.sub(r"_(?=[0-9])", "", opts.replace("_optimizer", "").replace("_attn", "").replace("_precision", ""))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{model}__{opts}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python tools/matrix.py")
    p.add_argument("matrix", choices=sorted(MATRICES))
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    p.add_argument("--out", required=True, help="folder for one JSON record per configuration")
    p.add_argument("--only", help="run only configurations whose file name contains this text")
    p.add_argument("--snapshots", type=int, default=0, metavar="N",
                   help="cuda: also write an allocator history snapshot (NAME.snapshot.pickle) for the first N configurations")
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for index, args in enumerate(MATRICES[a.matrix]()):
        name = slug(args)
        target = out / f"{name}.json"
        if target.exists() or (a.only and a.only not in name):
            continue
        start = time.time()
        extra = []
        if a.device == "cuda":  # 3 iterations on a GPU: the steady state is seen twice (issue: ground truth)
            extra += ["--iterations", str(GPU_ITERATIONS)]
            if index < a.snapshots:
                extra += ["--snapshot", str(out / f"{name}.snapshot.pickle")]
        cmd = [sys.executable, "-m", "memgraph", "measure", *args, *extra, "--device", a.device, "-o", str(target)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        status = "ok" if proc.returncode == 0 else f"FAILED: {proc.stderr.strip().splitlines()[-1:]}"
        print(f"{name}: {status} ({time.time() - start:.1f} s)", flush=True)
        if proc.returncode:
            with open(out / "failures.log", "a") as log:
                log.write(f"{name}\t{' '.join(args)}\t{proc.stderr.strip()[-2000:]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
