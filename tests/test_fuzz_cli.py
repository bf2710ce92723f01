"""Hostile and careless input through the CLI's ``main()``, in-process: every case must end in one line on
standard error that names the bad value, exit status 2, no traceback, and nothing written.

The cases are generated from tables: every numeric option with every kind of bad number, every choice
option with a wrong choice, the ``--input`` grammar, allocator settings, GPU names, model references,
output targets, and every config field that sizes a tensor with every kind of bad value. Each case stops
before tracing (the checks run up front), so the whole table runs in seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memgraph.cli import main

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")
BAD_NUMBERS = ["0", "-1", "1.5", "abc", "", "1e400", "9" * 400, "nan", "inf", "0x10", " ", "1_000_000_000_000_000_000",
               "-0", "0.0", "12abc", "2147483648"]


def _numeric_cases():
    for flag in ("--batch-size", "--seq-len", "--iterations", "--target-len", "--images", "--depth"):
        for value in BAD_NUMBERS:
            if flag == "--iterations" and value == "1_000_000_000_000_000_000":
                continue  # a valid (absurd) integer: refused by the size check below, not the parser
            yield [flag, value], value[:20] if value.strip() else flag
    for value in ("0", "-5", "3x", "x3", "1x2x3", "abc", "0x4", "4x0", ""):
        yield ["--image-size", value], value if value else "--image-size"
    for value in ("0", "-1", "nan", "inf", "abc", ""):
        yield ["--audio-seconds", value], value if value else "--audio-seconds"


def _choice_cases():
    for flag in ("--precision", "--optimizer", "--optimizer-impl", "--target", "--attn", "--loop", "--stage",
                 "--format"):
        for value in ("bogus", "", "FP32 ", "fp32;rm -rf /"):
            yield [flag, value], flag


def _other_option_cases():
    for value in ("a1000", "h100\n", "", "x" * 300, "h100-80gb\t", "../../etc/passwd"):
        yield ["--gpu", value], "--gpu" if not value.strip() else value.strip()[:20]
    for value in ("release_lock_on_cudamalloc:banana", "max_split_size_mb:" + "9" * 400, "expandable_segments:maybe",
                  "garbage", "backend:cudaMallocAsync", "roundup_power2_divisions:3", "max_split_size_mb:-5",
                  "garbage_collection_threshold:2.0", "per_process_memory_fraction:1.5"):
        yield ["--allocator-conf", value], "allocator-conf"
    for value in ("x", "x=float32", "x=float33[1]", "x=float32[0]", "x=float32[-1]", "x=float32[1,",
                  "=float32[1]", "x=int64[2]<0", "x=float32[1]<5", "x=float32[2]]", "x=int64[4]<abc"):
        yield ["--input", value], "--input" if not value else value.split("[")[0][:8] or "--input"
    yield ["--input", "x" * 10000 + "=float32[1]"], "--input"
    for value in ("[", "x" * 5000, "no.such.parameter"):
        yield ["--train", value], f"pattern {value[:20]!r}"[:28]
    yield ["--iterations", "1000000"], "1000000"


def _config_cases():
    base = json.loads(Path(TINY).read_text())
    fields = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
              "max_position_embeddings", "num_key_value_heads", "head_dim")
    for name in fields:
        for value in (0, -1, 1.5, "abc", True, [], 1e308, 10**30, -(2**63), "", {}):
            yield {**base, name: value}, name
    for name, value in (("rms_norm_eps", -1e-6), ("rms_norm_eps", "x"), ("attention_dropout", 2.0),
                        ("num_key_value_heads", 3), ("model_type", ["x"]), ("model_type", "no-such-type"),
                        ("architectures", ["NoSuchForCausalLM"]), ("architectures", []),
                        ("rope_parameters", {"rope_type": "default", "rope_theta": -1.0})):
        yield {**base, name: value}, {"rope_parameters": "rope_theta", "architectures": "rchitectures"}.get(name, name)


def _model_cases():
    yield "no-such-model", "no-such-model"
    yield "./missing.json", "missing.json"
    yield "a:b:c", "a:b:c"
    yield "json:not_there", "not_there"
    yield "no_such_module_xyz:build", "no_such_module_xyz"
    yield "", "model"


# "-s 16" first: the tiny config has no default sequence length, and a case's own --seq-len comes later and wins.
CASES = ([pytest.param(["analyze", TINY, "-s", "16", *a], s, id=f"opt{i}") for i, (a, s) in enumerate(_numeric_cases())]
         + [pytest.param(["analyze", TINY, "-s", "16", *a], s, id=f"choice{i}") for i, (a, s) in enumerate(_choice_cases())]
         + [pytest.param(["analyze", TINY, "-s", "16", *a], s, id=f"other{i}") for i, (a, s) in enumerate(_other_option_cases())]
         + [pytest.param(["analyze", m], s, id=f"model{i}") for i, (m, s) in enumerate(_model_cases())])


def _assert_clean_refusal(code, err: str, named: str, folder: Path, before: set):
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("memgraph: error:"), err
    assert "Traceback" not in err
    assert named.lower() in err.lower(), f"{named!r} not named in: {err}"
    assert set(folder.iterdir()) == before, "something was written"


def _run(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own refusals
        code = e.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv, named", CASES)
def test_bad_option_refused_in_one_line(argv, named, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.iterdir())
    code, err = _run([*argv, "-o", "report.md"], capsys)
    _assert_clean_refusal(code, err, named, tmp_path, before)


@pytest.mark.parametrize("config, named", [pytest.param(c, n, id=f"config{i}") for i, (c, n) in enumerate(_config_cases())])
def test_bad_config_field_refused_in_one_line(config, named, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    before = set(tmp_path.iterdir())
    code, err = _run(["analyze", "config.json", "-s", "16", "-o", "report.md"], capsys)
    _assert_clean_refusal(code, err, named, tmp_path, before)


@pytest.mark.parametrize("target, named", [("", "--output is empty"), ("no/such/folder/r.md", "does not exist"),
                                          (".", "folder")])
def test_bad_output_target(target, named, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    before = set(tmp_path.iterdir())
    code, err = _run(["analyze", TINY, "-s", "16", "-o", target], capsys)
    _assert_clean_refusal(code, err, named, tmp_path, before)


def test_deep_json_and_garbage_files(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for name, text, named in (("deep.json", "[" * 100000 + "]" * 100000, "deep.json"),
                              ("bin.json", "\x00\xff garbage", "bin.json"), ("list.json", "[1, 2]", "list.json"),
                              ("empty.json", "", "empty.json")):
        (tmp_path / name).write_text(text, errors="surrogateescape") if "\xff" not in text else \
            (tmp_path / name).write_bytes(b"\x00\xff garbage")
        before = set(tmp_path.iterdir())
        code, err = _run(["analyze", name, "-o", "report.md"], capsys)
        _assert_clean_refusal(code, err, named, tmp_path, before)


def test_case_count():
    """The table is a few hundred inputs; say so if it shrinks by accident."""
    assert len(CASES) + len(list(_config_cases())) >= 250


BAD_FACTORIES = '''
import sys

class MyBase(BaseException):
    pass

def exits():
    sys.exit(0)

def generator_exit():
    raise GeneratorExit("x")

def base_exception():
    raise MyBase("boom")
'''


@pytest.mark.parametrize("factory, named", [("exits", "SystemExit"), ("generator_exit", "GeneratorExit"),
                                            ("base_exception", "MyBase")])
def test_factory_that_exits_is_a_clean_error(factory, named, tmp_path, monkeypatch, capsys):
    """A model whose code calls sys.exit(0) must not end memgraph with status 0 and no report."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD_FACTORIES)
    before = set(tmp_path.iterdir())
    code, err = _run(["analyze", f"bad.py:{factory}", "--input", "x=float32[2]", "-f", "json", "-o", "r.json"], capsys)
    _assert_clean_refusal(code, err, named, tmp_path, before)
