"""The CLI as a user runs it: reports, formats, and one-line errors with a non-zero exit.

``main()`` runs in-process in the fast tests; the tests marked ``cli`` start ``python -m memgraph`` in
a subprocess (exit status, stderr, no traceback, as a shell sees them) and run with ``--full``.
"""

import json
import os
import subprocess
import sys

import pytest

from memgraph.analysis.result import SCHEMA_VERSION
from memgraph.cli import main
from tests.conftest import CONFIGS, TINY_LLAMA_PARAMETERS

TINY = str(CONFIGS / "tiny-llama.json")
assert TINY_LLAMA_PARAMETERS == 202_048


def run(*args):
    p = subprocess.run([sys.executable, "-m", "memgraph", *args], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def test_analyze_table_reports_peak_breakdown_and_modules(capsys):
    assert main(["analyze", TINY, "-s", "32", "-b", "2"]) == 0
    out = capsys.readouterr().out
    for text in ("steady-state peak", "first-iteration peak", "torch.cuda.max_memory_allocated", "gradients",
                 "optimizer_state", "activations", "model.layers.0", "Per module"):
        assert text in out


def test_json_output_file_matches_schema(tmp_path):
    out = tmp_path / "r.json"
    assert main(["analyze", TINY, "-s", "32", "--format", "json", "--output", str(out)]) == 0
    data = json.loads(out.read_text())
    peak = data["steady_state_peak"]
    assert data["schema_version"] == SCHEMA_VERSION and data["target"] == "cuda"
    assert sum(peak["by_category"].values()) == peak["bytes"]
    assert peak["iteration"] == 2 and peak["phase"] in ("forward", "backward", "optimizer", "zero_grad")
    assert data["parameters"] == data["trainable_parameters"] == TINY_LLAMA_PARAMETERS
    assert [p["phase"] for p in data["phase_peaks"]] == ["forward", "backward", "optimizer", "zero_grad"]
    assert max(p["bytes"] for p in data["phase_peaks"]) == peak["bytes"]
    # a report file gets open()'s usual mode (0666 less the umask), not the temporary file's 0600
    mask = os.umask(0)
    os.umask(mask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~mask


def test_markdown_category_rows_add_up(capsys):
    assert main(["analyze", TINY, "-s", "32", "--format", "md"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("# memgraph analyze")
    # the "Alive at the steady-state peak" table: | category | size | bytes | share |, then a total row
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines()
            if line.startswith("| ") and line.count("|") == 5]
    start = next(i for i, r in enumerate(rows) if r[0] == "category") + 1
    end = next(i for i in range(start, len(rows)) if rows[i][0] == "total")
    parts = [int(r[2].replace(",", "")) for r in rows[start:end]]
    assert len(parts) >= 4 and sum(parts) == int(rows[end][2].replace(",", ""))


def test_models_lists_the_zoo(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in ("gpt2", "llama-2-7b", "llama-3-8b", "mistral-7b", "qwen2.5-7b", "bert-base-uncased",
                 "bert-large-uncased", "t5-base", "vit-base-patch16-224", "resnet-50",
                 "clip-vit-large-patch14-336", "whisper-small"):
        assert name in out


BAD_INPUTS = [
    (["analyze", "llama2-7b"], "did you mean llama-2-7b"),
    (["analyze", "gpt2", "--batch-size", "abc"], "'abc' is not an integer"),
    (["analyze", "gpt2", "--batch-size", "0"], "'0' must be >= 1"),
    (["analyze", "missing/config.json"], "not found"),
    (["analyze", "tests.fixtures.nets:mlp", "--input", "x=float32(4,16)"], "does not parse"),
    (["analyze", "tests.fixtures.nets:mlp"], "--input"),
    (["analyze", "tests.fixtures.nets:not_a_module", "--input", "x=float32[4]"], "not a torch.nn.Module"),
    (["analyze", "no_such_module:build"], "cannot import module 'no_such_module'"),
    (["analyze", TINY, "-s", "8", "--freeze", "nothing.*"], "matches no parameter"),
    (["analyze", TINY, "-s", "8", "--freeze", "*"], "no parameter trains"),
    (["analyze", "gpt2", "--precision", "fp8"], "invalid choice: 'fp8'"),
    (["analyze", "gpt2", "--loop", "lightning"], "invalid choice: 'lightning'"),
    (["analyze", TINY, "-s", "8", "--stage", "2"], "--stage 2 trains the projector and language model"),
    (["measure", TINY, "-s", "8", "--device", "cpu", "--snapshot", "s.pickle"], "use it with --device cuda"),
]


@pytest.mark.parametrize("args,fragment", BAD_INPUTS)
def test_bad_input_is_one_line_error_in_process(args, fragment, capsys):
    try:
        code = main(args)
    except SystemExit as e:  # argparse's own errors exit with status 2
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and fragment in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.cli
@pytest.mark.parametrize("args,fragment", BAD_INPUTS)
def test_bad_input_is_one_line_nonzero_no_traceback(args, fragment):
    code, out, err = run(*args)
    assert code != 0
    assert fragment in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.cli
def test_malformed_config(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    code, _, err = run("analyze", str(bad))
    assert code == 2 and "is not valid JSON" in err and str(bad) in err
    bad.write_text(json.dumps({"model_type": "llama"}))
    code, _, err = run("analyze", str(tmp_path))  # a model folder
    assert code == 2 and "architectures" in err


@pytest.mark.cli
def test_trace_failure_names_the_op_and_module():
    code, _, err = run("analyze", "tests.fixtures.nets:data_dependent", "--input", "x=float32[2,4]")
    assert code != 0 and "Traceback" not in err
    assert "aten._local_scalar_dense" in err or "aten.is_nonzero" in err
    assert "top level" in err or "module" in err


@pytest.mark.cli
def test_debug_shows_the_traceback():
    code, _, err = run("analyze", "llama2-7b", "--debug")
    assert code != 0 and "Traceback" in err


@pytest.mark.cli
def test_failed_run_writes_nothing(tmp_path):
    out = tmp_path / "report.json"
    code, _, _ = run("analyze", "tests.fixtures.nets:data_dependent", "--input", "x=float32[2,4]", "-o", str(out))
    assert code != 0 and not out.exists() and list(tmp_path.iterdir()) == []
    code, _, err = run("analyze", TINY, "-s", "8", "-o", str(tmp_path / "nope" / "r.json"))
    assert code == 2 and "does not exist" in err


def test_no_timeline_empties_the_json_timeline_and_keeps_the_numbers(tmp_path):
    """--no-timeline: the JSON's timeline is [] and every other figure is the report's without it."""
    full, lean = tmp_path / "full.json", tmp_path / "lean.json"
    assert main(["analyze", TINY, "-s", "32", "-o", str(full)]) == 0
    assert main(["analyze", TINY, "-s", "32", "--no-timeline", "-o", str(lean)]) == 0
    a, b = json.loads(full.read_text()), json.loads(lean.read_text())
    assert a["timeline"] and b["timeline"] == []
    for key in ("required_bytes", "required_bytes_upper", "steady_state_peak", "first_iteration_peak", "static"):
        assert a[key] == b[key], key
    assert lean.stat().st_size < full.stat().st_size


def test_a_model_refusing_its_inputs_is_a_one_line_error(capsys):
    """ViT's own forward raises ValueError for an image size it was not made for: exit 2 and one line naming
    the model and what it said, not an internal error."""
    assert main(["analyze", "vit-base-patch16-224", "--image-size", "32"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "vit-base-patch16-224 refused the inputs" in err[0]
    assert "Input image size (32*32) doesn't match model (224*224)" in err[0] and "internal error" not in err[0]
