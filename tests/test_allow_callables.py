"""Issue 16: ``memgraph validate`` never runs code the user did not name.

A ground-truth record whose model is ``module:function`` would import that module. The test module
here writes a marker file when imported: the marker must not appear unless ``--allow-callables`` names
exactly that module."""

from __future__ import annotations

import json
from pathlib import Path

from memgraph.cli import main
from memgraph.model_spec.options import TrainingOptions
from memgraph.validation import callable_module, validate

MODULE_TEXT = '''
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("imported")

import torch


def build():
    return torch.nn.Linear(4, 4)
'''


def _folder(tmp_path: Path) -> tuple[Path, Path, str]:
    """(ground-truth folder, marker path, the module as the record names it)."""
    code = tmp_path / "code"
    code.mkdir()
    module = code / "writes_on_import.py"
    module.write_text(MODULE_TEXT)
    root = tmp_path / "groundtruth"
    root.mkdir()
    options = TrainingOptions(target="cpu", optimizer="sgd", inputs=("x=float32[2,4]",)).to_dict()
    record = {"kind": "memgraph.measurement", "schema_version": 1, "model": f"{module}:build", "device": "cpu",
              "options": options, "iterations": [{"iteration": 1, "peak_allocated": 1000},
                                                  {"iteration": 2, "peak_allocated": 1000}]}
    (root / "callable.json").write_text(json.dumps(record))
    return root, code / "IMPORTED", str(module)


def test_callable_module_rule(tmp_path):
    assert callable_module("pkg.nets:build") == "pkg.nets"
    assert callable_module("./nets.py:build") == "./nets.py"
    assert callable_module("llama-2-7b") is None
    assert callable_module("tests/configs/tiny-llama.json") is None
    existing = tmp_path / "a:b"  # an existing path is a config folder, never a callable
    existing.mkdir()
    assert callable_module(str(existing)) is None


def test_callable_record_skipped_without_permission(tmp_path):
    root, marker, module = _folder(tmp_path)
    rows = validate(root)
    assert rows[0].skipped == f"skipped: callable model; rerun with --allow-callables {module}"
    assert rows[0].predicted == {}
    rows = validate(root, allow_callables=("some.other.module",))
    assert rows[0].skipped and not marker.exists()


def test_command_line_skips_and_reports(tmp_path):
    root, marker, module = _folder(tmp_path)
    out = tmp_path / "validation.md"
    assert main(["validate", "--groundtruth", str(root), "--output", str(out)]) == 0
    assert not marker.exists()
    assert f"skipped: callable model; rerun with --allow-callables {module}" in out.read_text()


def test_named_module_runs(tmp_path):
    root, marker, module = _folder(tmp_path)
    rows = validate(root, allow_callables=(module,))
    assert marker.exists()  # imported because the user named it
    assert rows[0].skipped is None and rows[0].error is None and rows[0].predicted["allocated"] > 0
