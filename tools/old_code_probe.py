"""Measure, on the CPU, what the transformers code of two published SDPA benchmarks kept that today's does not.

The published rows of transformers PR #31031 (GPT-NeoX, pythia-410m-deduped, fp16, transformers of May 2024) and
PR #33298 (OPT-350m, fp16, September 2024) were measured with older modeling code than the transformers memgraph
traces. This probe runs the REAL training step of the benchmark (fxmarty's training gist as the rows describe it:
``model.train()``, ``model.zero_grad()``, forward on random ``input_ids`` with an all-ones ``attention_mask``,
``loss = logits.sum()``, ``loss.backward()``, no optimizer) on small configs of the same structure (the published
model's config file with fewer layers, a smaller hidden size and vocabulary, head_dim 64 as published) in float16 on
the CPU, under torch.profiler(profile_memory=True) as memgraph's CPU ground truth does (memgraph/measure/cpu.py),
once per transformers installation, and writes one JSON record.

Usage (the old transformers in their own virtual environments beside the global torch 2.13.0 and transformers 5.23:
``python -m venv --system-site-packages /tmp/oldtf42 && /tmp/oldtf42/bin/pip install "transformers==4.42.4"
"torch==2.13.0"``, the same with 4.46.3 in /tmp/oldtf46; 4.42 is the first release with PR #31031's
GPTNeoXSdpaAttention, 4.46 the first with PR #33298's OPTSdpaAttention, 4.45.2 has none). The record is written
outside reports/published/ and reports/groundtruth/, whose loaders read every ``*.json`` there as a row or record:

    python tools/old_code_probe.py --python /tmp/oldtf42/bin/python=gpt_neox --python /tmp/oldtf46/bin/python=opt \
        --python python=gpt_neox --python python=opt --out reports/old-code-probe.json

``--saved gpt_neox,sdpa`` prints one JSON line: what the forward keeps for backward by dtype and storage size;
``reports/old-code-probe-saved.jsonl`` is its output for gpt_neox,sdpa under transformers 4.42.4 then 5.23.0, and for
opt,sdpa under 4.46.3 then 5.23.0 (``/tmp/oldtf42/bin/python tools/old_code_probe.py --saved gpt_neox,sdpa``, and so
on, appended in that order).

``--worker`` runs the measurements in the current interpreter and prints JSON lines (what the driver reads).
Every byte figure in the record is measured; the per-token, per-layer, per-hidden-element figures are differences
of measurements divided by the config's sizes, nothing fitted.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (architecture, published model config, overrides): head_dim 64 as published (1024 / 16), the same rotary_pct,
# parallel residual, project_in/out (word_embed_proj_dim < hidden_size) and do_layer_norm_before False.
ARCHS = {
    "gpt_neox": ("models/published/pythia-410m-deduped.json",
                 {"hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024, "vocab_size": 1024}),
    "opt": ("models/published/opt-350m.json",
            {"hidden_size": 256, "num_attention_heads": 4, "ffn_dim": 1024, "word_embed_proj_dim": 128,
             "vocab_size": 1024}),
}
LAYERS = (2, 4)
SEQ_LENS = (256, 512)
BATCH = 1
ITERATIONS = 2  # the second is measured: steady state, as memgraph's measure (iteration 2 on)


def _config(arch: str, layers: int):
    import transformers

    path, overrides = ARCHS[arch]
    data = json.loads((ROOT / path).read_text())
    data.update(overrides, num_hidden_layers=layers)
    cls = {"gpt_neox": transformers.GPTNeoXConfig, "opt": transformers.OPTConfig}[arch]
    return cls(**{k: v for k, v in data.items() if k not in ("architectures", "model_type")})


def _memory_events(prof):
    import torch

    out = [(e.start_ns(), e.nbytes()) for e in prof.profiler.kineto_results.events()
           if e.name() == "[memory]" and e.device_type() == torch.autograd.DeviceType.CPU]
    out.sort(key=lambda m: m[0])
    return out


def _ranges(prof, prefix):
    return {e.name()[len(prefix):]: (e.start_ns(), e.end_ns()) for e in prof.profiler.kineto_results.events()
            if e.name().startswith(prefix)}


def measure(arch: str, attn: str, layers: int, seq: int) -> dict:
    import torch
    import transformers
    from torch.profiler import ProfilerActivity, profile, record_function

    torch.manual_seed(0)
    config = _config(arch, layers)
    # built under torch_dtype=float16 as from_pretrained(..., torch_dtype=torch.float16) builds it (the benchmark's
    # load): buffers made explicitly float32 at init (the old GPT-NeoX rotary cos/sin caches) stay float32
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn, torch_dtype=torch.float16)
    model.train()
    ids = torch.randint(0, config.vocab_size, (BATCH, seq))
    mask = torch.ones_like(ids)
    saved: dict[str, int] = {}

    def step(it):
        with record_function(f"probe_it{it}"):
            model.zero_grad(set_to_none=True)
            with record_function(f"probe_zero{it}"):
                pass
            seen = set()

            def pack(t):  # bytes the forward keeps for backward, by dtype, each storage once (iteration 2)
                if it == ITERATIONS:
                    key = t.untyped_storage().data_ptr()
                    if key not in seen and t.device.type == "cpu":
                        seen.add(key)
                        name = str(t.dtype).replace("torch.", "")
                        saved[name] = saved.get(name, 0) + t.untyped_storage().nbytes()
                return t

            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                loss = model(input_ids=ids, attention_mask=mask).logits.sum()
            with record_function(f"probe_fwd_end{it}"):
                pass
            loss.backward()
            del loss

    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with prof:
        for it in range(1, ITERATIONS + 1):
            step(it)
    events = _memory_events(prof)
    r = _ranges(prof, "probe_")
    lo, hi = r[f"it{ITERATIONS}"]
    zero, fwd_end = r[f"zero{ITERATIONS}"][0], r[f"fwd_end{ITERATIONS}"][0]
    start = sum(b for t, b in events if t < lo)
    cur, peak = start, start
    after_zero = end_forward = None
    for t, b in events:
        if t > hi:
            break
        if t >= lo:
            if after_zero is None and t >= zero:
                after_zero = cur
            if end_forward is None and t >= fwd_end:
                end_forward = cur
            cur += b
            peak = max(peak, cur)
    after_zero = cur if after_zero is None else after_zero
    end_forward = cur if end_forward is None else end_forward
    return {"arch": arch, "attn": attn, "layers": layers, "seq_len": seq, "batch": BATCH,
            "hidden_size": config.hidden_size, "dtype": "float16",
            "start_allocated": start, "after_zero_grad": after_zero, "end_of_forward": end_forward,
            "peak_allocated": peak, "forward_kept": end_forward - after_zero, "peak_over_start": peak - start,
            "saved_for_backward_by_dtype": dict(sorted(saved.items())),
            "float32_buffers": sorted(n for n, b in model.named_buffers() if b.dtype == torch.float32)}


def saved_breakdown(arch: str, attn: str, layers: int = LAYERS[0], seq: int = SEQ_LENS[0]) -> dict:
    """What the forward keeps for backward, parameters left out: (dtype, storage bytes, tensor shape) -> how many
    storages, each storage once (a view keeps its whole storage: what the allocator holds)."""
    import collections

    import torch
    import transformers

    torch.manual_seed(0)
    config = _config(arch, layers)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn, torch_dtype=torch.float16)
    model.train()
    ids = torch.randint(0, config.vocab_size, (BATCH, seq))
    params = {q.untyped_storage().data_ptr() for q in model.parameters()}
    seen: dict[int, tuple] = {}

    def pack(t):
        key = t.untyped_storage().data_ptr()
        if key not in params and key not in seen:
            seen[key] = (str(t.dtype).replace("torch.", ""), t.untyped_storage().nbytes())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.sum()
    counts = collections.Counter(seen.values())
    return {"transformers": transformers.__version__, "arch": arch, "attn": attn, "layers": layers, "seq_len": seq,
            "storages": [{"dtype": d, "bytes": n, "count": c} for (d, n), c in sorted(counts.items(), key=str)],
            "total_bytes": sum(n for d, n in seen.values())}


def worker(archs) -> None:
    import torch
    import transformers

    info = {"torch": torch.__version__, "transformers": transformers.__version__, "python": platform.python_version()}
    print(json.dumps({"versions": info}), flush=True)
    for arch in archs:
        for attn in ("eager", "sdpa"):
            for layers in LAYERS:
                for seq in SEQ_LENS:
                    try:
                        msg = {"run": measure(arch, attn, layers, seq)}
                    except (ValueError, ImportError) as e:  # e.g. no sdpa for this model in this transformers
                        msg = {"skipped": {"arch": arch, "attn": attn, "layers": layers, "seq_len": seq,
                                           "why": str(e).splitlines()[0][:200]}}
                    print(json.dumps(msg), flush=True)


def _collect(stdout: str) -> dict:
    versions, runs, skipped = None, [], []
    for line in stdout.splitlines():
        if line.startswith("{"):
            msg = json.loads(line)
            versions = msg.get("versions", versions)
            if "run" in msg:
                runs.append(msg["run"])
            if "skipped" in msg:
                skipped.append(msg["skipped"])
    return {"versions": versions, "runs": runs, "skipped": skipped}


def _key(r):
    return r["arch"], r["attn"], r["layers"], r["seq_len"]


def compare(old: dict, new: dict) -> list[dict]:
    """Per architecture and attention: the old code's extra bytes over the new (forward_kept and peak), and those
    per token per layer per hidden element (slopes over the measured layer counts and lengths)."""
    o, n = {_key(r): r for r in old["runs"]}, {_key(r): r for r in new["runs"]}
    out = []
    for arch in ARCHS:
        for attn in ("eager", "sdpa"):
            if not all((arch, attn, L, s) in o and (arch, attn, L, s) in n for L in LAYERS for s in SEQ_LENS):
                continue
            diff = {(L, s): {m: o[(arch, attn, L, s)][m] - n[(arch, attn, L, s)][m]
                             for m in ("forward_kept", "peak_over_start")} for L in LAYERS for s in SEQ_LENS}
            hidden = o[(arch, attn, LAYERS[0], SEQ_LENS[0])]["hidden_size"]
            row = {"arch": arch, "attn": attn, "old_minus_new": {f"L{L}_s{s}": d for (L, s), d in diff.items()}}
            for m in ("forward_kept", "peak_over_start"):
                # per layer: (L_hi - L_lo) at each length; per token: over the two longest lengths
                dl, (s1, s2) = LAYERS[1] - LAYERS[0], SEQ_LENS[-2:]
                per_layer = {s: (diff[(LAYERS[1], s)][m] - diff[(LAYERS[0], s)][m]) / dl for s in SEQ_LENS}
                per_layer_token = (per_layer[s2] - per_layer[s1]) / (BATCH * (s2 - s1))
                row[f"{m}_per_layer_bytes"] = per_layer
                row[f"{m}_per_layer_per_token_bytes"] = per_layer_token
                row[f"{m}_bytes_per_hidden_element_per_layer"] = per_layer_token / hidden
            out.append(row)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--worker", metavar="ARCHS", help="measure these architectures (comma-separated) here")
    p.add_argument("--python", action="append", default=[],
                   help="PYTHON=ARCH[,ARCH]: an interpreter whose transformers is probed, and on which architectures")
    p.add_argument("--saved", metavar="ARCH,ATTN", help="print what the forward keeps for backward here (by dtype and "
                   "storage size, parameters left out), at the first layer count and length")
    p.add_argument("--out", type=Path)
    a = p.parse_args()
    if a.saved:
        arch, attn = a.saved.split(",")
        print(json.dumps(saved_breakdown(arch, attn)))
        return
    if a.worker:
        worker(a.worker.split(","))
        return
    jobs = [spec.split("=", 1) for spec in a.python]
    procs = [subprocess.Popen([py, str(Path(__file__).resolve()), "--worker", archs], stdout=subprocess.PIPE,
                              text=True, cwd="/") for py, archs in jobs]  # one process each, run side by side
    outs = [pr.communicate()[0] for pr in procs]
    for spec, pr in zip(a.python, procs):
        if pr.returncode:
            raise SystemExit(f"{spec} --worker failed with exit status {pr.returncode}")
    by_version: dict[str, dict] = {}  # one interpreter given twice (one process per architecture): one result
    for o in outs:
        r = _collect(o)
        merged = by_version.setdefault(r["versions"]["transformers"], {"versions": r["versions"], "runs": [],
                                                                        "skipped": []})
        merged["runs"] += r["runs"]
        merged["skipped"] += r["skipped"]
    results = list(by_version.values())
    newest = max(results, key=lambda r: tuple(int(x) for x in r["versions"]["transformers"].split(".")[:2]))
    record = {"kind": "memgraph.old_code_probe", "tool": "tools/old_code_probe.py",
              "command": " ".join(["python", "tools/old_code_probe.py"] + sys.argv[1:]),
              "configs": {a_: {"model": ARCHS[a_][0], "overrides": ARCHS[a_][1]} for a_ in ARCHS},
              "layers": LAYERS, "seq_lens": SEQ_LENS, "batch": BATCH, "measured_iteration": ITERATIONS,
              "results": results,
              "old_minus_newest": [{"old": r["versions"], "new": newest["versions"], "by_arch": compare(r, newest)}
                                   for r in results if r is not newest]}
    text = json.dumps(record, indent=1) + "\n"
    if a.out:
        a.out.write_text(text)
    else:
        print(text)


if __name__ == "__main__":
    main()
