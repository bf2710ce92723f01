"""Hostile and careless input through the Python API (``memgraph.api``), the counterpart of test_fuzz_cli.py:
every case raises a :class:`~memgraph.errors.MemgraphError` of one line that names the bad value (the CLI's
refusal), before anything is traced; a misspelt keyword is Python's TypeError, with the option it meant. The API
writes no file, so "nothing written" is the working folder left as it was.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memgraph.api import analyze, measure
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions

CONFIGS = Path(__file__).parent / "configs"
TINY = str(CONFIGS / "tiny-llama.json")
NETS = "tests.fixtures.hostile_nets"


def _refused(call, named: str, folder: Path) -> str:
    before = set(folder.iterdir())
    with pytest.raises(MemgraphError) as e:
        call()
    text = str(e.value)
    assert "\n" not in text, text
    assert named.lower() in text.lower(), f"{named!r} not named in: {text}"
    assert set(folder.iterdir()) == before, "something was written"
    return text


# -- the options at the boundary: types, the options argument, options and keywords together ------------------

TYPE_CASES = [
    ({"gradient_checkpointing": "no"}, "gradient_checkpointing (--gradient-checkpointing) is 'no'"),
    ({"gradient_checkpointing": 1}, "gradient_checkpointing"),
    ({"audio_seconds": "1"}, "audio_seconds (--audio-seconds) is '1'"),
    ({"audio_seconds": float("nan")}, "audio length nan"),
    ({"audio_seconds": 1e308}, "audio length 1e+308"),
    ({"allocator_conf": 123}, "allocator_conf (--allocator-conf) is 123"),
    ({"allocator_conf": "throw_on_cudamalloc_oom:maybe"}, "maybe"),
    ({"allocator_conf": "roundup_power2_divisions:[]"}, "roundup_power2_divisions"),
    ({"train": None}, "train (--train) is None"),
    ({"train": "lm_head"}, "train (--train) is 'lm_head'"),
    ({"freeze": [1, 2]}, "freeze (--freeze) is [1, 2]"),
    ({"inputs": ("x=float32[99999999999999999999,8]",)}, "99999999999999999999"),
    ({"batch_size": 0}, "batch size 0"),
    ({"batch_size": True}, "batch size True"),
    ({"batch_size": "4"}, "batch size '4'"),
    ({"seq_len": 2.5}, "sequence length 2.5"),
    ({"precision": None}, "precision None"),
    ({"gpu": 100}, "gpu (--gpu) is 100"),
    ({"lora_dropout": "0.1"}, "lora_dropout (--lora-dropout) is '0.1'"),
    ({"image_size": "224"}, "image_size (--image-size) is '224'"),
    ({"gpu_memory": "48GiB"}, "gpu_memory (--gpu-memory) is '48GiB'"),
]


@pytest.mark.parametrize("kwargs, named", [pytest.param(k, n, id=f"type{i}") for i, (k, n) in enumerate(TYPE_CASES)])
def test_bad_option_value_refused_in_one_line(kwargs, named, tmp_path):
    _refused(lambda: analyze(TINY, **{"seq_len": 16, **kwargs}), named, tmp_path)
    if "inputs" not in kwargs:  # --input text is parsed when the batch is made, not by TrainingOptions
        _refused(lambda: TrainingOptions(**kwargs), named, tmp_path)  # the same check, a TrainingOptions by hand


def test_keywords_apply_over_given_options(tmp_path):
    """``analyze(cfg, TrainingOptions(seq_len=16), batch_size=0)`` used to ignore batch_size: it is applied (and
    checked) now."""
    _refused(lambda: analyze(TINY, TrainingOptions(seq_len=16), batch_size=0), "batch size 0", tmp_path)
    one = analyze(TINY, TrainingOptions(seq_len=16, target="cpu", optimizer="sgd"))
    two = analyze(TINY, TrainingOptions(seq_len=16, target="cpu", optimizer="sgd"), batch_size=2)
    assert two.options["batch_size"] == 2 and one.options["batch_size"] == 1
    assert two.steady_state_peak.bytes > one.steady_state_peak.bytes  # twice the tokens: more activations


@pytest.mark.parametrize("options, named", [("not options", "options is a str ('not options')"),
                                            ({"seq_len": 16}, "options is a dict"),
                                            (16, "options is a int")])
def test_options_of_another_type(options, named, tmp_path):
    _refused(lambda: analyze(TINY, options), named, tmp_path)


@pytest.mark.parametrize("call, meant", [
    (lambda: analyze(TINY, seq_len=16, batchsize=2), "did you mean 'batch_size'?"),
    (lambda: analyze(TINY, seqlen=16), "did you mean 'seq_len'?"),
    (lambda: analyze(TINY, seq_len=16, gradient_checkpoint=True), "did you mean 'gradient_checkpointing'?"),
    (lambda: measure(TINY, "cpu", seq_len=16, optimiser="sgd"), "did you mean 'optimizer'?"),
    (lambda: analyze(TINY, seq_len=16, zzzz=1), "unexpected keyword argument 'zzzz'"),
])
def test_misspelt_keyword_is_a_type_error_with_did_you_mean(call, meant):
    with pytest.raises(TypeError) as e:
        call()
    assert meant in str(e.value) and "\n" not in str(e.value)


# -- the same inputs the CLI refuses, through the API ---------------------------------------------------------

@pytest.mark.parametrize("model, kwargs, named", [
    ("x" * 300, {"inputs": ("x=float32[2,8]",)}, "300 characters"),
    (".mod:build", {"inputs": ("x=float32[2,8]",)}, "relative module reference"),
    (f"{NETS}:raises", {"inputs": ("x=float32[2,8]",)}, "the factory's own error"),
    (f"{NETS}:detached", {"inputs": ("x=float32[2,8]",)}, "does not depend on any trainable parameter"),
    (f"{NETS}:integer_output", {"inputs": ("x=float32[2,8]",)}, "int64"),
    (f"{NETS}:calls_cuda", {"inputs": ("x=float32[2,8]",)}, "hostile_nets.py"),
    (f"{NETS}:calls_numpy", {"inputs": ("x=float32[2,8]",)}, "numpy"),
    (f"{NETS}:linear", {"inputs": ("x=float32[2,8]", "y=float32[2,8]")}, "--input x, y"),
    (f"{NETS}:linear", {"inputs": ("x=float32[]",)}, "at least 1D"),
    (f"{NETS}:conv_bn", {"inputs": ("x=float32[1,3,3,3]",)}, "more than 1 value per channel"),
    (str(CONFIGS / "tiny-whisper.json"), {"audio_seconds": 1e308}, "1e+308"),
    (123, {}, "cannot analyze a int"),
    (None, {}, "cannot analyze a NoneType"),
])
def test_model_the_api_refuses(model, kwargs, named, tmp_path):
    _refused(lambda: analyze(model, **kwargs), named, tmp_path)


def _configs():
    llama = json.loads(Path(TINY).read_text())
    llava = json.loads((CONFIGS / "tiny-llava.json").read_text())
    t5 = json.loads((CONFIGS / "tiny-t5.json").read_text())
    yield {**llama, "architectures": 5}, "'architectures' is 5"
    yield {**llama, "architectures": ["AutoModelForCausalLM"]}, "auto class"
    yield {**llama, "architectures": ["MistralForCausalLM"]}, "MistralForCausalLM"
    yield {**llama, "to_dict": 1}, "'to_dict'"
    yield {**llama, "num_labels": 0}, "'num_labels' is 0"
    yield {**llama, "pad_token_id": -5}, "'pad_token_id' is -5"
    yield {**t5, "num_heads": 0}, "'num_heads' is 0"
    yield {**llava, "image_token_index": 10**9}, "'image_token_index' is 1000000000"


@pytest.mark.parametrize("config, named", [pytest.param(c, n, id=f"config{i}") for i, (c, n) in enumerate(_configs())])
def test_config_the_api_refuses(config, named, tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    _refused(lambda: analyze(str(path), seq_len=32), named, tmp_path)


def test_pad_token_minus_one_is_the_hubs_no_padding(tmp_path):
    """pad_token_id -1 (stored by several Hub configs for "no padding token"; transformers 5.23 warns only) is
    accepted: the same peak as without it (nn.Embedding's padding_idx changes no tensor's size)."""
    llama = json.loads(Path(TINY).read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**llama, "pad_token_id": -1}))
    with_pad = analyze(str(path), seq_len=16, target="cpu")
    assert with_pad.steady_state_peak.bytes == analyze(TINY, seq_len=16, target="cpu").steady_state_peak.bytes
