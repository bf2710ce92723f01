"""Each training option is declared once, as a TrainingOptions field; the CLI and README.md follow it.

The field's metadata (options.Flag) gives the flag, help, metavar, choices and parse function;
memgraph/cli.py builds the parser, --help, the namespace -> TrainingOptions step and README.md's
options table from it. These tests hold the CLI to the declarations and README.md to the CLI.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields

import pytest

from memgraph.cli import build_parser, options_table_markdown, training_options
from memgraph.errors import MemgraphError
from memgraph.model_spec.options import TrainingOptions, flag_of
from tests.conftest import REPO

BEGIN, END = "<!-- options:begin -->", "<!-- options:end -->"
ENV = "PYTORCH_CUDA_ALLOC_CONF"

# What `memgraph analyze --help` says each option defaults to, written out by hand.
HELP_DEFAULTS = {
    "--batch-size": "1", "--seq-len": "the model's", "--image-size": "the model's",
    "--max-pixels": "the checkpoint's preprocessor_config.json, else the processor's",
    "--min-pixels": "the checkpoint's preprocessor_config.json, else the processor's", "--video-frames": "no video",
    "--audio-seconds": "the model's", "--target-len": "the model's", "--precision": "fp32",
    "--optimizer": "adamw", "--optimizer-impl": "auto", "--freeze": "none", "--train": "none", "--iterations": "2",
    "--target": "cuda", "--attn": "auto", "--gradient-checkpointing": "off", "--input": "none",
    "--gpu": "h100-80gb", "--allocator-conf": "$PYTORCH_CUDA_ALLOC_CONF", "--images": "the model's",
    "--loop": "auto", "--stage": "none", "--zero-grad": "set-to-none", "--loss": "auto",
    "--lora-rank": "no LoRA", "--lora-alpha": "8, PEFT's", "--lora-targets": "PEFT's default for the model type",
    "--lora-dropout": "0.0, PEFT's", "--dora": "off", "--quantize": "none", "--no-kbit-preparation": "off", "--grad-accum": "1",
    "--lora-dtype": "float32, PEFT's", "--bnb-version": "0.50",
    "--optimizer-in-backward": "off",
    "--gpu-memory": "the --gpu board's", "--context-bytes": "estimated", "--cuda-version": "13 (the PyPI wheel of torch 2.13), 12 on Volta",
    "--module-loading": "lazy",
    "--nproc": "1", "--strategy": "none (one GPU)", "--tp-size": "required with fsdp+tp", "--sequence-parallel": "off",
    "--nnodes": "1", "--no-reshard-after-forward": "off", "--fsdp1-sharding": "FULL_SHARD",
    "--fsdp1-use-orig-params": "off", "--fsdp1-backward-prefetch": "BACKWARD_PRE",
    "--fsdp-mixed-precision": "off", "--gradient-as-bucket-view": "off", "--fsdp-autocast": "off", "--deepspeed": "none",
    "--activation-offload": "off", "--checkpoint-impl": "non-reentrant", "--checkpoint-every": "1",
    "--compile": "off", "--compile-mode": "default", "--compile-blocks": "off", "--compile-loss": "off",
    "--compile-optimizer": "off", "--no-kv-cache": "off",
    "--activation-memory-budget": "1.0, min-cut",
    "--depth-synthesis": "auto",
}


@pytest.fixture
def no_alloc_conf(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def parse(*argv: str) -> TrainingOptions:
    a = build_parser().parse_args(list(argv))
    return training_options(a, target=a.device) if a.command == "measure" else training_options(a)


def test_every_field_declares_a_flag():
    flags = [flag_of(f) for f in fields(TrainingOptions)]
    for f, flag in zip(fields(TrainingOptions), flags):
        assert flag.name.startswith("--") and flag.help, f.name
        assert flag.short is None or re.fullmatch(r"-[a-z]", flag.short), f.name
        assert flag.choices is None or f.default in (*flag.choices, None), f.name
        assert isinstance(f.default, bool) or flag.choices or flag.metavar, f"{f.name}: no value placeholder"
    names = [n for flag in flags for n in (flag.name, flag.short) if n]
    assert len(names) == len(set(names))
    assert [flag.short for flag in flags if flag.short] == ["-b", "-s"]
    assert sorted(HELP_DEFAULTS) == sorted(flag.name for flag in flags)


def help_entries(command: str, capsys) -> dict[str, str]:
    """``memgraph COMMAND --help`` as {flag: its entry on one line}, for the training step options."""
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    entries: list[str] = []
    for line in capsys.readouterr().out.partition("training step:")[2].splitlines():
        if line.startswith("  -"):  # an option's first line; its help may continue on the next ones
            entries.append(line.strip())
        elif entries and line.strip():
            entries[-1] += " " + line.strip()
    return {e.split()[0].rstrip(","): e for e in entries}


def test_help_shows_each_default(monkeypatch, capsys, no_alloc_conf):
    monkeypatch.setenv("COLUMNS", "1000")  # no wrapping: argparse splits words at hyphens
    entries = help_entries("analyze", capsys)
    assert sorted(entries) == sorted(HELP_DEFAULTS)
    for f in fields(TrainingOptions):
        entry = entries[flag_of(f).name]
        assert entry.endswith(f"default: {HELP_DEFAULTS[flag_of(f).name]})"), entry
        assert ("(repeatable; default:" in entry) == flag_of(f).repeatable, entry
        assert "`" not in entry, entry  # README's code spans are plain text in --help


def test_analyze_arguments_give_the_training_options(no_alloc_conf):
    got = parse("analyze", "gpt2", "--batch-size", "4", "--precision", "bf16-mixed", "--attn", "sdpa",
                "-s", "512", "--image-size", "448x672", "--max-pixels", "1003520", "--min-pixels", "3136", "--video-frames", "8", "--audio-seconds", "1.5", "--target-len", "7",
                "--optimizer", "sgd-momentum", "--optimizer-impl", "foreach", "--freeze", "*.bias",
                "--freeze", "lm_head.*", "--train", "h.*", "--iterations", "3", "--gradient-checkpointing",
                "--input", "x=float32[2]", "--gpu", "A100-80GB", "--allocator-conf", "expandable_segments:True",
                "--images", "2", "--loop", "trainer", "--stage", "2", "--zero-grad", "zero", "--loss", "sum",
                "--context-bytes", "1.5GiB", "--cuda-version", "12", "--module-loading", "eager",
                "--nproc", "8", "--strategy", "ddp", "--gradient-as-bucket-view", "--depth-synthesis", "off")
    want = {"batch_size": 4, "seq_len": 512, "image_size": (448, 672), "max_pixels": 1003520, "min_pixels": 3136, "video_frames": 8,
            "audio_seconds": 1.5, "target_len": 7, "precision": "bf16-mixed", "optimizer": "sgd-momentum", "optimizer_impl": "foreach",
            "freeze": ("*.bias", "lm_head.*"), "train": ("h.*",), "iterations": 3, "target": "cuda",
            "attn_implementation": "sdpa", "gradient_checkpointing": True, "inputs": ("x=float32[2]",),
            "gpu": "a100-80gb",  # the catalog key, whatever the case given
            "allocator_conf": "expandable_segments:True", "images": 2, "loop": "trainer", "stage": "2",
            "zero_grad": "zero", "loss": "sum",
            # the fine-tuning knobs exclude --train/--freeze/--stage: defaults here, parsed in tests/test_lora.py
            "lora_rank": None, "lora_alpha": None, "lora_targets": None, "lora_dropout": None, "dora": False,
            "quantize": None, "lora_dtype": None, "bnb_version": None, "no_kbit_preparation": False, "grad_accum": 1, "optimizer_in_backward": False,
            "gpu_memory": None, "context_bytes": 3 * 2**29, "cuda_version": "12", "module_loading": "eager",  # 1.5 GiB = 3 * 512 MiB

            "nproc": 8, "strategy": "ddp", "tp_size": None, "sequence_parallel": False, "nnodes": 1,
            "no_reshard_after_forward": False, "fsdp1_sharding": "FULL_SHARD", "fsdp1_use_orig_params": False,
            "fsdp1_backward_prefetch": "BACKWARD_PRE", "fsdp_mixed_precision": False, "fsdp_autocast": False, "deepspeed": None,
            "gradient_as_bucket_view": True,
            "activation_offload": False, "checkpoint_impl": "non-reentrant", "checkpoint_every": 1,
            "compile": False, "compile_mode": "default", "compile_blocks": False, "compile_loss": False,
            "compile_optimizer": False, "no_kv_cache": False,
            "activation_memory_budget": None,
            "depth_synthesis": "off"}
    assert sorted(want) == sorted(f.name for f in fields(TrainingOptions))
    for name, value in want.items():
        assert getattr(got, name) == value, name


def test_no_arguments_give_the_dataclass_defaults(no_alloc_conf):
    assert parse("analyze", "gpt2") == TrainingOptions()
    assert parse("analyze", "gpt2", "--target", "cpu", "-b", "2") == TrainingOptions(target="cpu", batch_size=2)


def test_measure_takes_the_target_from_device(capsys, no_alloc_conf):
    assert parse("measure", "gpt2", "--device", "cpu", "-s", "8") == TrainingOptions(target="cpu", seq_len=8)
    assert "--target" not in help_entries("measure", capsys)  # --device decides it
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["analyze", "gpt2", "--device", "cpu"])
    assert e.value.code == 2 and "unrecognized arguments: --device cpu" in capsys.readouterr().err


def test_allocator_conf_defaults_to_the_environment_at_parse_time(monkeypatch):
    monkeypatch.setenv(ENV, "max_split_size_mb:128")
    assert parse("analyze", "gpt2").allocator_conf == "max_split_size_mb:128"
    assert parse("analyze", "gpt2", "--allocator-conf", "expandable_segments:True").allocator_conf == \
        "expandable_segments:True"


def test_a_reused_parser_does_not_carry_repeated_values(no_alloc_conf):
    p = build_parser()
    assert training_options(p.parse_args(["analyze", "gpt2", "--freeze", "a"])).freeze == ("a",)
    assert training_options(p.parse_args(["analyze", "gpt2"])).freeze == ()


@pytest.mark.parametrize("argv,message", [
    (["--batch-size", "abc"], "argument --batch-size/-b: 'abc' is not an integer"),
    (["-s", "0"], "argument --seq-len/-s: '0' must be >= 1"),
    (["--image-size", "1x2x3"], "argument --image-size: '1x2x3' is not N or HxW"),
    (["--audio-seconds", "0"], "argument --audio-seconds: '0' must be a finite number > 0"),
    (["--precision", "fp8"], "argument --precision: invalid choice: 'fp8'"),
    (["--stage", "3"], "argument --stage: invalid choice: '3'"),
])
def test_bad_values_name_the_flag_and_the_text(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["analyze", "gpt2", *argv])
    assert e.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("kwargs,message", [
    ({"optimizer": "rmsprop"}, "unknown optimizer 'rmsprop': pass --optimizer one of sgd, sgd-momentum, sgd-nesterov, adam, adamw"),
    ({"seq_len": 0}, "sequence length 0 is not a positive integer: pass --seq-len N with N >= 1"),
    ({"batch_size": None}, "batch size None is not a positive integer: pass --batch-size N with N >= 1"),
    ({"attn_implementation": "xformers"}, "unknown attention implementation 'xformers': pass --attn one of"),
    ({"iterations": 1}, "iterations 1: pass --iterations from 2"),
])
def test_the_python_api_checks_what_the_flags_declare(kwargs, message):
    with pytest.raises(MemgraphError, match=re.escape(message)):
        TrainingOptions(**kwargs)


def test_python_api_values_are_normalised():
    assert TrainingOptions(stage=2).stage == "2"
    assert TrainingOptions(freeze=("a",)).to_dict()["freeze"] == ["a"]


def test_dtype_tables_load_torch_on_first_use():
    import torch

    from memgraph.model_spec import options

    assert options.PRECISION_DTYPE == {"fp32": torch.float32, "fp16-mixed": torch.float32,
                                       "bf16-mixed": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    assert options.AUTOCAST_DTYPE == {"fp16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}
    assert not hasattr(options, "NO_SUCH_TABLE")


def test_cli_and_options_parse_without_torch():
    """memgraph.cli and options import no torch/transformers; memgraph/__init__ (the API re-export) is bypassed."""
    code = ("import sys, types; pkg = types.ModuleType('memgraph'); pkg.__path__ = ['memgraph']; "
            "sys.modules['memgraph'] = pkg; from memgraph.cli import build_parser, training_options; "
            "training_options(build_parser().parse_args(['analyze', 'gpt2', '-b', '2'])); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.strip() == "[]"


def test_readme_options_table_is_the_rendered_one():
    readme = (REPO / "README.md").read_text()
    if BEGIN not in readme or END not in readme:
        pytest.skip(f"README.md has no {BEGIN} ... {END} markers around its options table")
    table = readme.partition(BEGIN)[2].partition(END)[0].strip("\n") + "\n"
    assert table == options_table_markdown(), "README.md's options table is stale: paste options_table_markdown()"


def test_version_answers_without_importing_torch():
    import subprocess
    import sys

    from memgraph.version import __version__

    code = ("import sys; from memgraph.cli import main\n"
            "try:\n    main(['--version'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
            "assert 'torch' not in sys.modules, 'torch was imported'")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"memgraph {__version__}"


def test_readme_gpu_names_resolve():
    """Every ``--gpu NAME`` in README.md's commands names one board of the catalog: the README's examples are
    pasted as written (``--gpu h100`` once stood there, and h100 names two boards: h100-80gb and h100-pcie)."""
    import re

    from memgraph.facts.gpus import get_gpu

    blocks = re.findall(r"```[a-z]*\n(.*?)```", (REPO / "README.md").read_text(), re.S)  # the code blocks only
    names = {name for block in blocks for name in re.findall(r"--gpu ([a-z0-9][a-z0-9._-]*)", block)}
    assert names, "README.md shows no --gpu example"
    for name in sorted(names):
        get_gpu(name)  # KeyError names the ambiguous or unknown board
