"""memgraph fit's advice: the fewest changes that fit, cheapest first, each a command that can be pasted."""

import shlex
from dataclasses import replace
from pathlib import Path

import pytest

from memgraph.cli import build_parser, training_options
from memgraph.fit.candidates import CANDIDATES, COMPUTE, FREE, METHOD, PRECISION
from memgraph.fit.command import command_line
from memgraph.fit.outcome import Outcome
from memgraph.fit.plans import find_plans
from memgraph.fit.progress import QUIET
from memgraph.model_spec.options import TrainingOptions

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")
GiB = 1 << 30


def _parsed(command: str) -> TrainingOptions:
    words = shlex.split(command)
    assert words[:2] == ["memgraph", "analyze"]
    return training_options(build_parser().parse_args(words[1:]))


def test_command_line_by_hand_and_back_through_the_parser():
    opts = TrainingOptions(batch_size=4, seq_len=2048, precision="bf16", gpu="rtx-4090", gradient_checkpointing=True,
                           inputs=("x=float32[4,8]", "target=int64[4]<10"), gpu_memory=48 * GiB, image_size=(336, 672))
    line = command_line("analyze", "my model.json", opts)
    assert line == ("memgraph analyze 'my model.json' --batch-size 4 --seq-len 2048 --image-size 336x672 "
                    "--precision bf16 --gradient-checkpointing --input 'x=float32[4,8]' --input 'target=int64[4]<10' "
                    "--gpu rtx-4090 --gpu-memory 48GiB")
    assert _parsed(line) == opts  # pasted, it runs exactly these options


def test_command_line_of_the_defaults_is_the_model_alone():
    assert command_line("analyze", "gpt2", TrainingOptions()) == "memgraph analyze gpt2"


# -- the search, on outcomes whose device totals are written here ----------------------------------------------

CAPACITY = 24 * GiB
YOURS = 100 * GiB


class _Table:
    """Analyses whose device total is YOURS less what each change saves, plus an interaction: LoRA and
    checkpointing together save 20 GiB more than apart (checkpointing matters once the optimizer state is gone)."""

    SAVES = {"gradient_checkpointing": 10, "lora_rank": 55, "precision": 20, "quantize": 15, "activation_offload": 9,
             "loss": 0}

    def __init__(self):
        self.analysed = []

    def total(self, changes) -> int:
        keys = {k for k, _ in changes}
        saved = sum(self.SAVES.get(k, 0) for k in keys)
        if {"gradient_checkpointing", "lora_rank"} <= keys:
            saved += 20
        return YOURS - saved * GiB

    def outcome(self, opts, label, cost="", changes=()):
        self.analysed.append(label)
        return _outcome(label, self.total(changes), tuple(changes), cost)

    def prefetch(self, jobs):
        pass


def _outcome(label, total, changes, cost="") -> Outcome:
    return Outcome(label, TrainingOptions(), total, total, total, CAPACITY, total <= CAPACITY,
                   total + GiB <= CAPACITY, 0.0, cost, None, changes)


def _single(name: str, table: _Table) -> Outcome:
    c = next(c for c in CANDIDATES if c.name == name)
    return _outcome(c.name, table.total(c.changes), c.changes, c.cost)


def test_fewest_changes_first_then_the_cheapest_kind():
    table = _Table()
    names = ["chunked cross-entropy", "gradient checkpointing", "activation offloading", "pure bf16 training",
             "LoRA rank 16 on all linear layers", "QLoRA (4-bit base, LoRA rank 16, bf16)"]
    singles = [_single(n, table) for n in names]
    yours = _outcome("your settings", YOURS, ())
    plans = find_plans(table, yours, singles, QUIET)
    # by hand: alone only QLoRA fits (100 - 55 (LoRA) - 15 (4-bit) - 20 (its bf16) = 10 GiB); in pairs, checkpointing + LoRA
    # (100 - 10 - 55 - 20 = 15 GiB) fits and is cheaper than anything with QLoRA, which pairs exclude (a set
    # holding a plan is not a plan); offloading + LoRA = 36 GiB and bf16 + LoRA = 25 GiB do not fit (the
    # margin asks for 23); of three changes, checkpointing + bf16 + LoRA holds the plan checkpointing + LoRA,
    # so the third plan is offloading + bf16 + LoRA = 100 - 9 - 20 - 55 = 16 GiB
    assert [p.labels for p in plans] == [["QLoRA (4-bit base, LoRA rank 16, bf16)"],
                                         ["gradient checkpointing", "LoRA rank 16 on all linear layers"],
                                         ["activation offloading", "pure bf16 training",
                                          "LoRA rank 16 on all linear layers"]]
    assert [p.outcome.device_total // GiB for p in plans] == [10, 15, 16]
    # a change that saves nothing alone (chunked cross-entropy here) is never part of a plan
    assert not any("chunked cross-entropy" in label for label in table.analysed)


def test_changes_that_do_not_go_together_are_not_a_plan():
    table = _Table()
    table.SAVES = {"fsdp_mixed_precision": 40, "precision": 40, "gradient_checkpointing": 30}
    fsdp = TrainingOptions(seq_len=128, nproc=2, strategy="fsdp", precision="bf16-mixed")
    yours = replace(_outcome("your settings", YOURS, ()), options=fsdp)
    singles = [_single(n, table) for n in ("FSDP mixed precision", "gradient checkpointing", "pure bf16 training")]
    plans = find_plans(table, yours, singles, QUIET)
    # FSDP mixed precision + pure bf16 would be 20 GiB, but FSDP2's MixedPrecisionPolicy replaces autocast and
    # pure bf16 has none (options.py refuses the pair); 100 - 40 - 30 = 30 GiB pairs do not fit; the three
    # together hold the refused pair: no plan
    assert plans == [] and "FSDP mixed precision + pure bf16 training" not in table.analysed


def _upper_outcome(label, total, upper, changes) -> Outcome:
    """An outcome whose upper end (what fits_with_margin compares: allocator/replay.py) is ``upper``."""
    return Outcome(label, TrainingOptions(), total, total, upper, CAPACITY, total <= CAPACITY, upper <= CAPACITY, 0.0,
                   "", None, changes)


class _UpperTable(_Table):
    """Device totals as _Table's; the upper end 6 GiB above the total (segments cached near the capacity), unless
    expandable segments is on (then the upper end is the total). Checkpointing and offloading save the same
    activations: together 12 GiB, not 10 + 9."""

    SAVES = {"gradient_checkpointing": 10, "activation_offload": 9, "lora_rank": 55, "quantize": 15, "precision": 0,
             "allocator_conf": 1}

    def total(self, changes) -> int:
        keys = {k for k, _ in changes}
        saved = sum(self.SAVES.get(k, 0) for k in keys)
        if {"gradient_checkpointing", "activation_offload"} <= keys:
            saved -= 7
        return YOURS - saved * GiB

    def outcome(self, opts, label, cost="", changes=()):
        self.analysed.append(label)
        total = self.total(changes)
        es = any(k == "allocator_conf" for k, _ in changes)
        return _upper_outcome(label, total, total if es else total + 6 * GiB, tuple(changes))


def test_a_set_that_fits_but_for_its_upper_end_is_tried_with_expandable_segments():
    """QLoRA + offloading: 100 - 55 - 15 - 9 = 21 GiB expected, up to 27 GiB > 24: not a plan; with expandable
    segments (a replay of its trace) 20 GiB, up to 20 GiB: a plan of three changes, found while the pairs are
    analysed. Checkpointing + QLoRA: 20 GiB, up to 26: the same, 19 GiB with expandable segments. (QLoRA alone is
    100 - 55 - 15 = 30 GiB: its bf16 saves nothing here.)"""
    table = _UpperTable()
    names = ["expandable segments", "gradient checkpointing", "activation offloading",
             "QLoRA (4-bit base, LoRA rank 16, bf16)"]
    singles = [table.outcome(None, n, "", next(c for c in CANDIDATES if c.name == n).changes) for n in names]
    table.analysed.clear()
    plans = find_plans(table, _upper_outcome("your settings", YOURS, YOURS, ()), singles, QUIET)
    assert [(p.labels, p.outcome.device_total // GiB, p.outcome.device_total_upper // GiB) for p in plans] == [
        (["expandable segments", "gradient checkpointing", "QLoRA (4-bit base, LoRA rank 16, bf16)"], 19, 19),
        (["expandable segments", "activation offloading", "QLoRA (4-bit base, LoRA rank 16, bf16)"], 20, 20),
        # 100 - 70 - (10 + 9 - 7) = 18 GiB, up to 24: fits without expandable segments, a compute price instead
        (["gradient checkpointing", "activation offloading", "QLoRA (4-bit base, LoRA rank 16, bf16)"], 18, 24)]
    assert table.analysed[:2] == ["gradient checkpointing + QLoRA (4-bit base, LoRA rank 16, bf16)",
                                  "expandable segments + gradient checkpointing + QLoRA (4-bit base, LoRA rank 16, bf16)"]


def test_tiers_order_the_candidates():
    tiers = [c.tier for c in CANDIDATES]
    assert tiers == sorted(tiers)  # the list is cheapest first, so its order ranks changes within a tier
    by_name = {c.name: c.tier for c in CANDIDATES}
    assert by_name["gradient checkpointing"] == by_name["activation offloading"] == COMPUTE
    names = [c.name for c in CANDIDATES]
    assert names.index("gradient checkpointing") < names.index("activation offloading")
    assert (by_name["expandable segments"], by_name["pure bf16 training"],
            by_name["QLoRA (4-bit base, LoRA rank 16, bf16)"]) == (FREE, PRECISION, METHOD)


def test_a_method_you_run_is_not_offered_again():
    qlora = next(c for c in CANDIDATES if c.name.startswith("QLoRA"))
    lora = next(c for c in CANDIDATES if c.name.startswith("LoRA"))
    yours = TrainingOptions(seq_len=128, quantize="4bit", lora_rank=8, precision="bf16")
    assert not qlora.applies_to(yours) and not lora.applies_to(yours)
    full = TrainingOptions(seq_len=128, precision="bf16-mixed")
    assert qlora.applies_to(full) and qlora.apply(full).precision == "bf16"  # QLoRA's recipe: bf16 compute


@pytest.mark.slow  # a fit of a tiny model on a board sized below it: about 20 analyses
def test_first_suggestion_fits_when_run_as_printed():
    from memgraph.api import analyze
    from memgraph.fit import fit

    opts = TrainingOptions(seq_len=512, batch_size=32, gpu="t4", gpu_memory=1300 << 20)  # needs 1172 MiB, up to 1422
    r = fit(TINY, opts, max_gpus=2)
    assert not r.yours.fits_with_margin and r.plans
    assert {o.label for o in r.changes if "FSDP" in o.label} == {"FSDP over 2 GPUs"}  # --max-gpus 2: no 4 or 8
    for plan, command in zip(r.plans, r.commands):
        assert plan.outcome.device_total < r.yours.device_total
        assert plan.outcome.options != r.yours.options
    pasted = _parsed(r.commands[0])
    assert pasted == replace(opts, **dict(r.plans[0].outcome.changes))
    assert analyze(TINY, pasted).fits_with_margin
    for plan, command in zip(r.plans, r.commands):  # each plan's bytes are a fresh analysis' of its command
        fresh = analyze(TINY, _parsed(command))
        assert (plan.outcome.device_total, plan.outcome.device_total_upper, plan.outcome.allocated) == \
            (fresh.required_bytes, fresh.required_bytes_upper, fresh.steady_state_peak.bytes), command


# The five scenarios, as users ask them. Each: the first suggestion, run as printed, fits; no suggestion is
# a no-op, larger than your step, or what you already run.
SCENARIOS = {
    "full fine-tune 7B on a 24 GB card": "llama-2-7b --gpu rtx-4090 --precision bf16-mixed -s 2048",
    # without PEFT's k-bit preparation (as torchtune and LitGPT run QLoRA): with it, checkpointing is on and it fits
    "QLoRA 8B at 4k on 24 GB": "llama-3-8b --quantize 4bit --lora-rank 16 --precision bf16 -s 4096 --gpu rtx-4090 "
                               "--no-kbit-preparation",
    "LLaVA stage 2 on 80 GB": "llava-1.5-7b --stage 2 -b 16 --gpu a100-80gb --precision bf16-mixed",
    "Qwen2-VL, large images, on 40 GB": "qwen2-vl-2b --image-size 1344 -s 4096 -b 4 --gpu a100-40gb --precision bf16-mixed",
    "70B on 8x80 GB": "llama-2-70b --nproc 8 --strategy fsdp --precision bf16-mixed -s 4096 --gpu h100-80gb",
}


@pytest.mark.slow  # a whole fit of a 2B-70B model each (tens of analyses)
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_scenario_advice_is_safe_to_paste(scenario):
    from memgraph.api import analyze
    from memgraph.fit import fit

    words = shlex.split(SCENARIOS[scenario])
    a = build_parser().parse_args(["fit", *words])
    opts = training_options(a)
    r = fit(a.model, opts)
    assert not r.yours.fits_with_margin, "each scenario is one a user brings because it does not fit"
    assert r.plans, "fit finds a plan"
    for plan, command in zip(r.plans, r.commands):
        assert plan.outcome.fits_with_margin
        assert plan.outcome.device_total < r.yours.device_total
        assert any(getattr(r.yours.options, k) != v for k, v in plan.outcome.changes)  # not what you run
        assert command.startswith(f"memgraph analyze {a.model} ")
    assert analyze(a.model, _parsed(r.commands[0])).fits_with_margin
