"""memgraph fit offers DeepSpeed ZeRO-2/3 where more GPUs are allowed (memgraph/fit/zero.py): the changes, their
pasteable commands, and a fit that analyses them."""

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("deepspeed")

from memgraph.cli import build_parser, training_options  # noqa: E402
from memgraph.fit.command import command_line  # noqa: E402
from memgraph.fit.candidates import zero_candidates  # noqa: E402
from memgraph.fit.outcome import Outcome  # noqa: E402
from memgraph.fit.zero import CONFIGS  # noqa: E402
from memgraph.model_spec.options import TrainingOptions  # noqa: E402

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")
# your settings as fit found them: not fitting (ZeRO is offered), and fitting (it is not)
TOO_BIG = Outcome("your settings", TrainingOptions(), 2, 2, 2, 1, False, False, 0.0)
FITS = Outcome("your settings", TrainingOptions(), 1, 1, 1, 2, True, True, 0.0)


def _parsed(command: str) -> TrainingOptions:
    words = shlex.split(command)
    return training_options(build_parser().parse_args(words[1:]))


def test_zero_changes_are_over_the_most_gpus_allowed_and_paste_back():
    opts = TrainingOptions(seq_len=512, batch_size=4, precision="bf16-mixed", gpu="a100-40gb")
    offered = zero_candidates(opts, [2, 4], TOO_BIG)
    assert [c.name for c in offered] == ["DeepSpeed ZeRO-2 over 4 GPUs", "DeepSpeed ZeRO-3 over 4 GPUs"]
    for candidate, stage in zip(offered, (2, 3)):
        changed = candidate.apply(opts)
        assert (changed.nproc, changed.deepspeed) == (4, CONFIGS[stage])
        assert json.loads(Path(CONFIGS[stage]).read_text())["zero_optimization"]["stage"] == stage
        assert _parsed(command_line("analyze", "llama-2-7b", changed)) == changed  # pasted, it runs these options


def test_zero_changes_respect_your_setup():
    assert zero_candidates(TrainingOptions(), [], TOO_BIG) == []  # --max-gpus 1
    fsdp = TrainingOptions(nproc=2, strategy="fsdp")
    assert zero_candidates(fsdp, [2, 4, 8], TOO_BIG) == []  # you already shard with FSDP
    yours = TrainingOptions(nproc=2, deepspeed=CONFIGS[3])
    assert zero_candidates(yours, [2, 4, 8], FITS) == []  # nothing to fix
    [c] = zero_candidates(yours, [2, 4, 8], TOO_BIG)  # your own config, over more GPUs
    assert c.name == "your DeepSpeed config over 8 GPUs" and c.apply(yours).deepspeed == CONFIGS[3]
    assert zero_candidates(replace(yours, nproc=8), [2, 4, 8], TOO_BIG) == []  # already over 8: no change


@pytest.mark.slow  # a fit of tiny-llama on a board sized below it, with two DeepSpeed analyses
def test_fit_analyses_zero_and_its_command_runs_as_printed():
    from memgraph.api import analyze
    from memgraph.fit import fit

    opts = TrainingOptions(seq_len=512, batch_size=32, gpu="t4", gpu_memory=1300 << 20)  # as tests/test_fit_plans.py
    r = fit(TINY, opts, max_gpus=2)
    zero = {o.label: o for o in r.changes if o.label.startswith("DeepSpeed")}
    assert set(zero) == {"DeepSpeed ZeRO-2 over 2 GPUs", "DeepSpeed ZeRO-3 over 2 GPUs"}
    three = zero["DeepSpeed ZeRO-3 over 2 GPUs"]
    # the weights, gradients and AdamW state are split over the 2 ranks; the device total, in whole allocator
    # segments, may not move for a model this small
    assert three.how != "failed" and three.allocated < r.yours.allocated
    pasted = _parsed(command_line("analyze", TINY, three.options))
    assert pasted == three.options
    again = analyze(TINY, pasted)
    assert (again.ranks[0]["ranks"], again.steady_state_peak.bytes) == ([0, 1], three.result.steady_state_peak.bytes)
