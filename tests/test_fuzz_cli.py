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
    yield ["--timeout", "1e308"], "1e308"  # setitimer takes a C time_t: more than a year is refused
    yield ["--gpu-memory", "9" * 29 + "GiB"], "more than any GPU holds"


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
                                          (".", "folder"), ("newdir/", "it is a folder")])
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


# -- round two (issue 27): output targets, model references, config contents, user models, validate, silent
# successes, closed standard streams, a stalled model, and what an internal error says ---------------------

CONFIGS = Path(__file__).parent / "configs"
NETS = "tests.fixtures.hostile_nets"


def _refused(argv, named: str, folder: Path, capsys, before: set | None = None) -> str:
    """Run ``argv`` in-process; it must be refused as _assert_clean_refusal says, with ``folder`` unchanged."""
    before = set(folder.iterdir()) if before is None else before
    code, err = _run(argv, capsys)
    _assert_clean_refusal(code, err, named, folder, before)
    return err


@pytest.mark.parametrize("target, named", [
    pytest.param("/proc/memgraph-report.md", "/proc/memgraph-report.md", id="proc"),
    pytest.param("/proc/version", "/proc/version", id="proc-file"),
    pytest.param("/sys/kernel/memgraph-report.md", "/sys/kernel/memgraph-report.md", id="sys"),
    pytest.param("/dev/full", "No space left on device", id="enospc"),
])
def test_output_target_the_system_refuses(target, named, tmp_path, capsys):
    """A folder where no file can be made (/proc, /sys) is refused before the analysis runs; /dev/full (a real
    ENOSPC on write) after it: either way one line with the path and the system's reason, nothing written."""
    if not Path(target).parent.is_dir():
        pytest.skip(f"{Path(target).parent} does not exist here")
    _refused(["analyze", TINY, "-s", "16", "-o", target], named, tmp_path, capsys)


def test_output_name_longer_than_the_file_system_allows(tmp_path, capsys):
    name = str(tmp_path / ("r" * 300 + ".md"))  # NAME_MAX is 255 bytes on ext4, xfs, btrfs, tmpfs
    err = _refused(["analyze", TINY, "-s", "16", "-o", name], "File name too long", tmp_path, capsys)
    assert "300" not in err or "characters" in err  # the 300-character name is shortened in the line


@pytest.mark.cli
def test_output_over_the_file_size_limit_leaves_nothing(tmp_path):
    """EFBIG for real: ``ulimit -f 1`` (1 KiB) and a report of about 7 KB; the temporary file must be gone."""
    import subprocess
    import sys

    repo = Path(__file__).parent.parent
    cmd = f"ulimit -f 1; exec {sys.executable} -m memgraph analyze {TINY} -s 16 -o {tmp_path / 'report.md'}"
    done = subprocess.run(["bash", "-c", cmd], cwd=repo, capture_output=True, text=True, timeout=900)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "File too large" in lines[0] and "report.md" in lines[0], done.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("ref, named", [
    pytest.param("x" * 300, "300 characters", id="name-too-long"),
    pytest.param(".mod:build", "relative module reference", id="relative"),
    pytest.param("..:build", "relative module reference", id="relative-parent"),
    pytest.param(f"{NETS}:raises", "hostile_nets.py", id="factory-raises"),
])
def test_bad_model_reference(ref, named, tmp_path, capsys):
    _refused(["analyze", ref, "--input", "x=float32[2,8]", "-o", str(tmp_path / "r.md")], named, tmp_path, capsys)


@pytest.mark.parametrize("source, named", [
    pytest.param(b"def build(:\n    pass\n", "broken.py:1", id="syntax-error"),
    pytest.param(b"x = '\xff\xfe'\ndef build():\n    pass\n", "broken.py:1", id="bad-encoding"),
    pytest.param(b"import torch\n\nraise RuntimeError('no GPU here')\n", "broken.py:3", id="raises-at-import"),
])
def test_user_module_that_fails_at_import_names_file_and_line(source, named, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "broken.py").write_bytes(source)
    before = set(tmp_path.iterdir())
    err = _refused(["analyze", "broken:build", "--input", "x=float32[2,8]", "-o", "r.md"], named, tmp_path, capsys,
                   before)
    assert "module 'broken'" in err


def _config_variants():
    llama = json.loads(Path(TINY).read_text())
    t5 = json.loads((CONFIGS / "tiny-t5.json").read_text())
    llava = json.loads((CONFIGS / "tiny-llava.json").read_text())
    for value in (5, [None], [["LlamaForCausalLM"]], {"LlamaForCausalLM": 1}, True):
        yield {**llama, "architectures": value}, "'architectures'"
    yield {**llama, "architectures": ["AutoModelForCausalLM"]}, "auto class"
    yield {**llama, "architectures": ["MistralForCausalLM"]}, "MistralForCausalLM"  # model_type stays llama
    yield {**llama, "to_dict": 1}, "'to_dict'"
    yield {**llama, "num_labels": 0}, "'num_labels'"
    yield {**llama, "pad_token_id": -5}, "'pad_token_id' is -5"
    yield {**t5, "num_heads": 0}, "'num_heads' is 0"
    yield {**llava, "image_token_index": 10**9}, "'image_token_index' is 1000000000"
    yield {**llava, "image_token_index": 1e9}, "'image_token_index' is 1000000000.0"


@pytest.mark.parametrize("config, named", [pytest.param(c, n, id=f"config2-{i}")
                                           for i, (c, n) in enumerate(_config_variants())])
def test_bad_config_contents_refused_in_one_line(config, named, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(config))
    _refused(["analyze", "config.json", "-s", "32", "-o", "r.md"], named, tmp_path, capsys)


def test_integer_literal_of_5000_digits(tmp_path, monkeypatch, capsys):
    """Python's int() refuses strings of more than 4,300 digits (sys.int_info.str_digits_check_threshold)."""
    monkeypatch.chdir(tmp_path)
    text = Path(TINY).read_text().rstrip().rstrip("}") + ', "rms_norm_eps": ' + "9" * 5000 + "}"
    (tmp_path / "config.json").write_text(text)
    _refused(["analyze", "config.json", "-s", "16", "-o", "r.md"], "'rms_norm_eps' is an integer of 5,000 digits",
             tmp_path, capsys)


def _line_of(text: str) -> int:
    """The line of tests/fixtures/hostile_nets.py that holds ``text``: where the failure must be reported."""
    source = (Path(__file__).parent / "fixtures" / "hostile_nets.py").read_text().splitlines()
    return next(i for i, line in enumerate(source, 1) if text in line)


@pytest.mark.parametrize("factory, inputs, named", [
    pytest.param("detached", ["x=float32[2,8]"], "does not depend on any trainable parameter", id="no-grad"),
    pytest.param("integer_output", ["x=float32[2,8]"], "int64", id="int-output"),
    pytest.param("calls_cuda", ["x=float32[2,8]"], f"hostile_nets.py:{_line_of('y.cuda()')}", id="cuda"),
    pytest.param("calls_numpy", ["x=float32[2,8]"], f"hostile_nets.py:{_line_of('y.numpy()')}", id="numpy"),
    pytest.param("linear", ["x=float32[2,8]", "y=float32[2,8]"], "--input x, y", id="two-inputs"),
    pytest.param("linear", ["x=float32[99999999999999999999,8]"], "99999999999999999999", id="shape-overflow"),
    pytest.param("linear", [f"x=float32[{2**63 - 1},8]"], str(2**63 - 1), id="shape-int64-max"),
    pytest.param("linear", ["x=float32[65536,65536,65536]"], "more than any GPU holds", id="shape-bytes"),
    pytest.param("linear", ["x=float32[]"], "at least 1D", id="zero-d"),
    pytest.param("conv_bn", ["x=float32[1,3,3,3]"], "more than 1 value per channel", id="batchnorm-1-pixel"),
])
def test_user_model_that_cannot_run_says_why(factory, inputs, named, tmp_path, capsys):
    argv = ["analyze", f"{NETS}:{factory}", *(a for i in inputs for a in ("--input", i)), "-o", str(tmp_path / "r.md")]
    _refused(argv, named, tmp_path, capsys)


@pytest.mark.parametrize("argv, named", [
    pytest.param([str(CONFIGS / "tiny-resnet.json"), "--image-size", "1"], "more than 1 value per channel",
                 id="resnet-image-size-1"),
    pytest.param([str(CONFIGS / "tiny-whisper.json"), "--audio-seconds", "1e308"], "1e+308", id="audio-1e308"),
    pytest.param([TINY, "-s", "16", "-b", "2", "--input", "input_ids=int64[2,16]<1000", "--input",
                  "labels=int64[3,16]<1000"], "batch_size", id="labels-batch"),
    pytest.param([TINY, "-s", "16", "--allocator-conf", "roundup_power2_divisions:[]"], "roundup_power2_divisions",
                 id="roundup-empty-list"),
    pytest.param([TINY, "-s", "16", "--allocator-conf", "throw_on_cudamalloc_oom:maybe"], "maybe",
                 id="throw-on-oom-maybe"),
])
def test_inputs_the_model_cannot_take(argv, named, tmp_path, capsys):
    _refused(["analyze", *argv, "-o", str(tmp_path / "r.md")], named, tmp_path, capsys)


def _ground_truth_variants():
    record = json.loads(next((Path(__file__).parent.parent / "reports" / "groundtruth").rglob("*.json")).read_text())
    yield "{not json", "not valid JSON"
    yield b"\x00\xff\xfe binary", "not valid JSON"
    yield "[" * 100000 + "]" * 100000, "nested too deeply"
    yield {k: v for k, v in record.items() if k != "options"}, "has no 'options'"
    yield {k: v for k, v in record.items() if k != "iterations"}, "has no 'iterations'"
    yield {**record, "options": {**record["options"], "bogus_option": 1}}, "'bogus_option'"
    yield {**record, "options": [1, 2]}, "field 'options'"
    yield {**record, "iterations": "lots"}, "field 'iterations'"
    yield {**record, "iterations": [{"peak_allocated": "x"}]}, "iterations[0].peak_allocated"
    yield {**record, "device": "tpu"}, "field 'device'"


@pytest.mark.parametrize("content, named", [pytest.param(c, n, id=f"groundtruth{i}")
                                            for i, (c, n) in enumerate(_ground_truth_variants())])
def test_bad_ground_truth_file(content, named, tmp_path, capsys):
    folder = tmp_path / "gt"
    folder.mkdir()
    path = folder / "record.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    err = _refused(["validate", "--groundtruth", str(folder), "-o", str(tmp_path / "v.md")], named, tmp_path, capsys)
    assert "record.json" in err


def test_internal_error_says_how_to_report_it(monkeypatch, capsys):
    """memgraph's own bug (here: a renderer that raises) stays an internal error, exit 1, and says what to send."""
    import memgraph.cli as cli

    def broken(a):
        raise KeyError("a bug")

    monkeypatch.setattr(cli, "_models", broken)  # build_parser reads it when main() builds the parser
    code, err = _run(["models"], capsys)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1, err
    assert lines[0].startswith("memgraph: internal error: KeyError") and "bug in memgraph" in lines[0]
    assert "--debug" in lines[0] and "report" in lines[0]


@pytest.mark.cli
def test_factory_that_closes_stdout_still_gets_its_report():
    """The report goes to standard output's file descriptor even when the model's code closed sys.stdout."""
    import subprocess
    import sys

    repo = Path(__file__).parent.parent
    done = subprocess.run([sys.executable, "-m", "memgraph", "analyze", f"{NETS}:closes_stdout", "--input",
                           "x=float32[2,8]", "-f", "json"], cwd=repo, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["model"] == f"{NETS}:closes_stdout"


def test_factory_that_closes_stdout_in_process(tmp_path, monkeypatch, capsys):
    """In-process: a closed sys.stdout is replaced by a stream on the same descriptor; no traceback, exit 0."""
    import io
    import sys

    closed_by_the_model = io.StringIO()
    monkeypatch.setattr(sys, "stdout", closed_by_the_model)
    code, err = _run(["analyze", f"{NETS}:closes_stdout", "--input", "x=float32[2,8]", "-f", "json"], capsys)
    assert code == 0 and "Traceback" not in err and err == "", err
    assert closed_by_the_model.closed and sys.stdout is not closed_by_the_model and sys.stdout.fileno() == 1


def _wait_in_user_code(seconds: float) -> None:
    import time

    time.sleep(seconds)  # the stall line must name this line


def test_stalled_model_code_is_named_on_the_terminal(monkeypatch):
    """After STALL_SECONDS with no new op, the progress thread names the function and line the main thread is in
    (here: this file's _wait_in_user_code), once, on the progress stream."""
    import io
    import inspect

    from memgraph import stall
    from memgraph.trace.record import progress
    from memgraph.watch import progress_line

    monkeypatch.setattr(stall, "STALL_SECONDS", 0.6)
    stream = io.StringIO()
    progress.stage("building the model")
    with progress_line(stream, enabled=True, timeout=1800):
        _wait_in_user_code(2.5)
    line = inspect.getsourcelines(_wait_in_user_code)[1] + 3  # the time.sleep line
    told = [t for t in stream.getvalue().replace("\r", "\n").splitlines() if "no new op" in t]
    assert len(told) == 1, stream.getvalue()
    assert "while building the model" in told[0] and f"test_fuzz_cli.py:{line}" in told[0], told[0]
    assert "_wait_in_user_code" in told[0] and "--timeout stops it after 1800 s" in told[0]


def test_stalled_import_is_named(tmp_path, monkeypatch):
    """A module that never finishes importing: the line names the import and its line."""
    import io
    import threading

    from memgraph import stall
    from memgraph.model_spec.sources import import_from_folder
    from memgraph.trace.record import progress
    from memgraph.watch import progress_line

    (tmp_path / "slow_import_mod.py").write_text("import time\n\ntime.sleep(2.5)\n")
    monkeypatch.setattr(stall, "STALL_SECONDS", 0.6)
    monkeypatch.delitem(__import__("sys").modules, "slow_import_mod", raising=False)
    stream = io.StringIO()
    progress.stage("resolving the model")
    assert threading.current_thread() is threading.main_thread()
    with progress_line(stream, enabled=True):
        import_from_folder("slow_import_mod", tmp_path)
    told = [t for t in stream.getvalue().replace("\r", "\n").splitlines() if "no new op" in t]
    assert len(told) == 1 and "the import of" in told[0] and "slow_import_mod.py, line 3" in told[0], told
