"""tools/measure_matrix.py, the one prepared command for a lent GPU (issue 24): its matrix, its records, its rehearsal."""

from __future__ import annotations

import json

import pytest

from memgraph.cli import build_parser, training_options
from memgraph.model_spec.sources import resolve
from tools.matrix import slug
from tools.measure_matrix import FRESH, _gpu_matrix, main


def _options(args):
    return training_options(build_parser().parse_args(["measure", *args, "--device", "cuda"]))


def test_gpu_matrix_covers_what_issue_24_asks():
    """At least 40 configurations over at least 10 models; every knob the issue names appears; each configuration is
    a valid `memgraph measure` command line whose model resolves without a network; names are unique."""
    configs = [args for _, args in _gpu_matrix()]
    assert len(configs) >= 40
    models = {args[0] for args in configs}
    assert len(models) >= 10
    for model in models:
        resolve(model)  # zoo entries and the matrix's own config files: no hub, no download
    opts = [_options(args) for args in configs]
    assert {o.precision for o in opts} >= {"fp32", "bf16-mixed", "bf16", "fp16-mixed"}
    assert {o.optimizer for o in opts} >= {"sgd", "adamw"}
    assert {o.optimizer_impl for o in opts} >= {"foreach", "fused"}
    assert {o.attn_implementation for o in opts} >= {"eager", "sdpa"}
    assert {o.gradient_checkpointing for o in opts} == {True, False}
    assert {o.stage for o in opts} >= {"1", "2"} or {o.stage for o in opts} >= {1, 2}
    assert any(o.lora_rank for o in opts) and any(o.compile for o in opts)
    assert any(o.allocator_conf == "expandable_segments:True" for o in opts)
    assert {"llava-1.5-7b", "qwen2-vl-2b", "whisper-small", "resnet-50", "t5-base", "bert-large-uncased"} <= models
    names = [slug(a) for a in configs]
    assert len(set(names)) == len(names)
    assert slug(FRESH) in names  # the fresh-process configuration also runs in the loop


def test_split_and_summary_copy_records_unchanged(tmp_path, capsys):
    """split writes each ok measurement's record byte-for-byte as `memgraph measure -o` would (as JSON); summary
    compares the steady state (iterations 2 on) with the prediction: 110 / 100 - 1 = +10.0%."""
    record = {"kind": "memgraph.measurement", "iterations": [
        {"iteration": 1, "peak_allocated": 90, "peak_reserved": 128, "device_used": 1000},
        {"iteration": 2, "peak_allocated": 100, "peak_reserved": 128, "device_used": 1000}]}
    prediction = {"steady_state_peak": {"bytes": 110}, "device": {"steady_state_reserved": 128,
                                                                   "steady_state_device_total": 1100}}
    lines = [{"record": "header"},
             {"record": "measurement", "slug": "a", "fresh_process": True, "status": "ok", "result": record},
             {"record": "measurement", "slug": "a", "fresh_process": False, "status": "ok", "result": record},
             {"record": "measurement", "slug": "b", "fresh_process": False, "status": "error", "error": "OOM"},
             {"record": "prediction", "slug": "a", "status": "ok", "result": prediction}]
    jsonl = tmp_path / "gpu.jsonl"
    jsonl.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["split", str(jsonl), "--out", str(tmp_path / "records")]) == 0
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == ["a.fresh.json", "a.json"]
    assert json.loads((tmp_path / "records" / "a.json").read_text()) == record
    assert main(["summary", str(jsonl)]) == 0
    out = capsys.readouterr().out
    assert "100 / 110 / +10.0%" in out and "128 / 128 / +0.0%" in out and "1000 / 1100 / +10.0%" in out


@pytest.mark.slow
def test_rehearsal_on_the_cpu_measures_and_predicts_the_same_bytes(tmp_path):
    """The whole command on the CPU (the tiny matrix, one prediction worker): header, the fresh-process measurement,
    three in-process measurements, three predictions and a footer, flushed as JSON lines; the cpu target's
    predictions equal the real CPU allocator's steady-state peaks within 0.01% (the cpu target's exactness;
    tiny-gpt2 differs by 48 B on torch 2.11, 0 B on 2.13)."""
    out = tmp_path / "tiny.jsonl"
    assert main(["tiny", "--device", "cpu", "--budget-s", "600", "--out", str(out), "--workers", "1"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = [r["record"] for r in records]
    assert kinds[0] == "header" and kinds[-1] == "footer"
    assert kinds.count("measurement") == 4 and kinds.count("prediction") == 3
    assert all(r["status"] == "ok" for r in records if r["record"] in ("measurement", "prediction"))
    steady = {r["slug"]: max(i["peak_allocated"] for i in r["result"]["iterations"][1:])
              for r in records if r["record"] == "measurement" and not r["fresh_process"]}
    predicted = {r["slug"]: r["result"]["steady_state_peak"]["bytes"] for r in records if r["record"] == "prediction"}
    assert steady.keys() == predicted.keys()
    for name in steady:
        assert abs(predicted[name] - steady[name]) <= 1e-4 * steady[name], (name, predicted[name], steady[name])
    fresh = next(r for r in records if r["record"] == "measurement" and r["fresh_process"])
    assert max(i["peak_allocated"] for i in fresh["result"]["iterations"][1:]) == steady[fresh["slug"]]
