"""`memgraph measure --device cpu` refuses, before building anything real, a step the machine cannot hold."""

import pytest

from memgraph.errors import MemgraphError
from memgraph.measure.memory_guard import check_cpu_measurement_fits, lower_bound_bytes
from memgraph.model_spec.options import TrainingOptions
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS

GiB = 1 << 30


def test_llama_2_7b_is_refused_from_the_meta_build_with_the_figure():
    # 6,738,415,616 parameters in fp32 with AdamW: weights + gradients + exp_avg + exp_avg_sq
    # = 4 B x 6,738,415,616 x 4 = 107,814,649,856 B = 100.41 GiB, far above 80% of 24 GiB.
    opts = TrainingOptions(target="cpu")
    spec = resolve("llama-2-7b")
    assert lower_bound_bytes(spec, opts) == 4 * 6_738_415_616 * 4
    with pytest.raises(MemgraphError, match=r"would not fit: its parameters, gradients and optimizer state alone "
                                            r"need 100\.41 GiB, and this machine has 24\.00 GiB available"):
        check_cpu_measurement_fits(spec, opts, available=24 * GiB)


def test_sgd_keeps_no_state_and_frozen_parameters_no_gradients():
    # tests.fixtures.nets:mlp is Linear(16 -> 32) + ReLU + Linear(32 -> 8), no biases: 512 + 256 = 768 parameters.
    spec = resolve("tests.fixtures.nets:mlp")
    sgd = TrainingOptions(target="cpu", optimizer="sgd", inputs=("x=float32[4,16]",))
    assert lower_bound_bytes(spec, sgd) == 4 * 768 * 2  # weights + gradients
    frozen = TrainingOptions(target="cpu", optimizer="adamw", inputs=("x=float32[4,16]",), train=("0.*",))
    assert lower_bound_bytes(spec, frozen) == 4 * (768 + 512 * 3)  # only the first layer trains


def test_an_inconclusive_bound_asks_for_the_full_prediction():
    # With the machine just big enough for the weights, gradients and AdamW state (the bound fits in 80%),
    # the guard predicts the whole step, whose activations and temporaries no longer fit, and names that figure.
    spec = resolve(str(CONFIGS / "tiny-llama.json"))
    opts = TrainingOptions(target="cpu", seq_len=32, loop="plain")  # the loop holding the logits: a peak well above the bound
    available = int(lower_bound_bytes(spec, opts) / 0.79)
    with pytest.raises(MemgraphError, match=r"memgraph predicts a peak of .* and this machine has"):
        check_cpu_measurement_fits(spec, opts, available=available)
    check_cpu_measurement_fits(spec, opts, available=24 * GiB)  # fits: no error
