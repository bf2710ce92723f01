"""Golden files: the table, markdown and JSON reports of three small analyses, byte for byte.

Each case is analysed, rendered through ``memgraph.render.formats.render(result, fmt, depth)``,
normalized (wall times and versions vary from run to run) and compared with
``tests/golden/<case>.<ext>``; a mismatch shows a unified diff.

After an intended change to a report, regenerate the files and review the diff::

    python -m pytest tests/test_golden.py --update-golden
    git diff tests/golden/

The JSON files are also checked for their own arithmetic: per-module and per-modality rows add
up to the totals, each peak's categories add up to its bytes, and the MLP's peaks equal the hand
computations of tests/test_optimizer_kernels.py.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from pathlib import Path

import pytest

from memgraph.api import analyze
from memgraph.render.formats import render
from tests.test_mlp_by_hand import INPUT, LOSS, OUT, PARAMS
from tests.test_optimizer_kernels import FOR_LOOP

GOLDEN = Path(__file__).parent / "golden"
DEPTH = 3

CASES = {
    "mlp-cpu": ("tests.fixtures.nets:mlp", dict(inputs=("x=float32[4,16]",), target="cpu")),
    "mlp-cuda": ("tests.fixtures.nets:mlp", dict(inputs=("x=float32[4,16]",), target="cuda")),
    # a path relative to the repository root (the tests' working directory): the report prints it
    "tiny-llama-bf16-sdpa": ("tests/configs/tiny-llama.json",
                             dict(seq_len=16, precision="bf16-mixed", attn_implementation="sdpa", target="cuda")),
    # six GPT-2 blocks: h.0 holds the embedding output and the cuBLAS workspace, h.1-5 fold into one row, the
    # identical tensors of the blocks group; on a 640 MiB card (600 MiB sm90 context, so the caching allocator may
    # reserve 40 MiB) the step runs out of memory, and the report says where
    "tiny-gpt2-6-layers-oom": ("tests/configs/tiny-gpt2-6-layers.json",
                               dict(seq_len=32, batch_size=2, target="cuda", gpu_memory=640 * 2**20)),
}
FORMATS = {"table": "txt", "md": "md", "json": "json"}
WALL_TIMES = re.compile(r"trace [0-9.]+ s, analysis [0-9.]+ s")


def normalize(fmt: str, text: str) -> str:
    """Blank out what legitimately varies between runs: wall times and versions."""
    if fmt == "json":
        data = json.loads(text)
        data["trace_seconds"] = data["analysis_seconds"] = 0.0
        data["versions"] = {k: "*" for k in data["versions"]}
        return json.dumps(data, indent=2) + "\n"
    return WALL_TIMES.sub("trace * s, analysis * s", text)


@functools.lru_cache(maxsize=None)
def _analysis(case: str):
    model, options = CASES[case]
    return analyze(model, **options)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_report_matches_golden_file(case, fmt, request):
    path = GOLDEN / f"{case}.{FORMATS[fmt]}"
    got = normalize(fmt, render(_analysis(case), fmt, DEPTH))
    if request.config.getoption("--update-golden"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(got)
        return
    if not path.exists():
        pytest.fail(f"{path} is missing: python -m pytest tests/test_golden.py --update-golden", pytrace=False)
    want = path.read_text()
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                            fromfile=f"{path.relative_to(GOLDEN.parent.parent)} (golden)",
                                            tofile="rendered now"))
        pytest.fail(f"the {fmt} report of {case} differs from its golden file:\n{diff}\nIf the change is "
                    "intended: python -m pytest tests/test_golden.py --update-golden", pytrace=False)


def _golden_json(case: str) -> dict:
    return json.loads((GOLDEN / f"{case}.json").read_text())


@pytest.mark.parametrize("case", CASES)
def test_golden_json_rows_add_up(case):
    r = _golden_json(case)
    modules, static, steady = r["modules"], r["static"], r["steady_state_peak"]

    def total(rows, key):
        return sum(row[key] for row in rows)

    # every storage alive at the steady-state peak belongs to exactly one module row
    assert total(modules, "peak_bytes") == steady["bytes"]
    assert total(modules, "parameters") == r["parameters"]
    assert total(modules, "trainable_parameters") == r["trainable_parameters"]
    for row_key, static_key in [("parameter_bytes", "parameters"), ("buffer_bytes", "buffers"),
                                ("gradient_bytes", "gradients"), ("optimizer_state_bytes", "optimizer_state")]:
        assert total(modules, row_key) == static[static_key], row_key
        assert total(r["modalities"], row_key) == static[static_key], row_key
    assert total(r["modalities"], "peak_bytes") == steady["bytes"]
    # a folded row stands for `count` modules with its figures: they add up to the same totals
    folded = r["modules_folded"]
    for key in ("peak_bytes", "parameters", "parameter_bytes", "saved_activation_bytes"):
        assert sum(row[key] * row["count"] for row in folded) == total(modules, key), key
    # grouped tensors: count x size each is the total, and the groups are the largest totals first
    for peak in [r["first_iteration_peak"], steady, *r["phase_peaks"]]:
        groups = peak["top_tensor_groups"]
        assert all(g["total_bytes"] == g["count"] * g["bytes"] >= g["held_past_last_use_bytes"] for g in groups)
        assert [g["total_bytes"] for g in groups] == sorted((g["total_bytes"] for g in groups), reverse=True)
    # each peak's categories add up to its bytes; the last iteration's phases peak at the step's peak
    for peak in [r["first_iteration_peak"], steady, *r["phase_peaks"]]:
        assert sum(peak["by_category"].values()) == peak["bytes"], peak["phase"]
    assert max(p["bytes"] for p in r["phase_peaks"]) == steady["bytes"]
    # the timeline keeps each bucket's maximum, so its highest point is the highest peak
    assert max(t["bytes"] for t in r["timeline"]) == max(steady["bytes"], r["first_iteration_peak"]["bytes"])
    if r["device"]:
        d = r["device"]
        assert d["steady_state_device_total"] == d["steady_state_reserved"] + d["context_bytes"]
        assert d["headroom_bytes"] == d["capacity_bytes"] - d["steady_state_device_total"]
        assert d["steady_state_reserved"] >= steady["bytes"]  # segments hold at least the live blocks
        if d["oom_event"] is not None:  # the capped replay ran out within the allocator's budget
            assert d["allocator_budget_bytes"] == d["capacity_bytes"] - d["context_bytes"]
            assert d["oom_allocated_bytes"] <= d["oom_reserved_bytes"] <= d["allocator_budget_bytes"]
            assert d["steady_state_device_total"] > d["capacity_bytes"]  # the uncapped replay's need


def test_golden_mlp_peaks_are_the_hand_computed_ones():
    # cpu target, AdamW for-loop (PyTorch's CPU default): tests/test_optimizer_kernels.py's FOR_LOOP = 16,780 B
    # (the two host `step` counters, 8 B, are CPU allocator memory on the cpu target)
    assert _golden_json("mlp-cpu")["steady_state_peak"]["bytes"] == FOR_LOOP == 16_780
    # cuda target, AdamW foreach, every block rounded up to 512 B: parameters, gradients (3,072 each, already
    # multiples of 512), exp_avg and exp_avg_sq (2 x 3,072), the foreach sqrt of all parameters (3,072), the
    # input (256), output (128) and loss (4) at 512 each, plus the cuBLAS + cuBLASLt workspaces of the forward
    # and backward threads 2 x (32 + 1) MiB (tests/test_mlp_by_hand.py):
    # 5 x 3,072 + 3 x 512 + 69,206,016 = 69,222,912 B
    blocks = 5 * PARAMS + 3 * 512
    assert (INPUT, OUT, LOSS) == (256, 128, 4)  # each below 512 B: one 512 B block
    cuda = _golden_json("mlp-cuda")["steady_state_peak"]
    assert cuda["bytes"] == blocks + 2 * (32 + 1) * 2**20 == 69_222_912
    assert cuda["by_category"]["workspaces"] == 69_206_016
