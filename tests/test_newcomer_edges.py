"""The rough edges a new user hit (issue: fit answers a user can act on): each fixed, each held here."""

import argparse
import re
from pathlib import Path

import pytest

from memgraph.cli import main
from memgraph.model_spec.options import parse_gpu_memory
from memgraph.analysis.device import DevicePeaks
from memgraph.render.sections import oom_lines

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")


def test_gpu_memory_needs_a_unit():
    with pytest.raises(argparse.ArgumentTypeError, match=r"'48' has no unit: write e.g. 48GiB \(or 48B for bytes\)"):
        parse_gpu_memory("48")
    assert parse_gpu_memory("48GiB") == 48 * 2**30 and parse_gpu_memory("48B") == 48


def test_a_card_smaller_than_its_context_is_said_so_not_a_negative_budget():
    d = DevicePeaks(gpu="tiny", gpu_name="a 48 B card", capacity_bytes=48, allocator_options="",
                    first_iteration_reserved=0, steady_state_reserved=0, context_bytes=600 << 20,
                    steady_state_device_total=2 << 30, headroom_bytes=48 - (2 << 30), fits=False, oom_event=0,
                    segments=0, cuda_malloc_calls=0, steady_state_device_total_upper=2 << 30,
                    allocator_budget_bytes=48 - (600 << 20), oom_phase="setup", oom_request_bytes=1 << 20)
    line = oom_lines(d)[0]
    assert "the card's 48 B hold no more than the 600.00 MiB CUDA context alone" in line and "-" not in line


def test_a_misspelt_flag_gets_the_subcommands_did_you_mean(capsys):
    with pytest.raises(SystemExit) as e:
        main(["analyze", "gpt2", "--batchsize", "3"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == ("memgraph: error: unrecognized arguments: --batchsize 3; did you mean --batch-size? "
                   "(see 'memgraph analyze --help')\n")


def test_wrote_line_counts_the_bytes_on_disk(tmp_path, capsys):
    out = tmp_path / "report.html"
    assert main(["analyze", TINY, "-s", "16", "--target", "cpu", "-o", str(out)]) == 0
    said = int(re.search(r"\(([\d,]+) bytes\)", capsys.readouterr().err).group(1).replace(",", ""))
    text = out.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) > len(text)  # the page has non-ASCII characters: characters != bytes
    assert said == out.stat().st_size
