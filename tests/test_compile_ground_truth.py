"""--target cpu --compile against the real compiled training step on the CPU, measured live.

The measurement runs ``torch.compile(model)`` as a user writes it (Inductor's C++ backend, g++ builds the kernels)
and reads the CPU allocator from torch.profiler's memory events (memgraph/measure/cpu.py); the prediction runs
Inductor's generated wrapper on meta (memgraph/compiled/inductor_cpu.py). Tolerance: 2% of the measured
steady-state peak, the bound the cpu target promises; measured on torch 2.13.0+cpu the two agree to the byte
for the configs below but T5 (8 B apart). Slow: each compiles twice with Inductor and the real one runs g++ (minutes on 2 cores).
"""

import json
import subprocess
import sys

import pytest

from memgraph.api import analyze, measure
from tests.conftest import CONFIGS

pytestmark = pytest.mark.slow

TOLERANCE = 0.02

FAMILIES = {  # measured to the byte on torch 2.13.0+cpu (sgd, batch 1)
    "tiny-llama": dict(seq_len=32),  # 1,658,184 B predicted and measured
    "tiny-qwen2": dict(seq_len=32),  # 1,668,424 B predicted and measured
    "tiny-mistral": dict(seq_len=32),  # 1,658,184 B
    "tiny-bert": dict(seq_len=32),  # 1,619,784 B
    "tiny-vit": dict(),  # 821,856 B
    "tiny-resnet": dict(image_size=32),  # 112,288 B (a conv net)
    "tiny-t5": dict(seq_len=32, target_len=16),  # 2,223,880 B predicted, 2,223,888 B measured
    # graph breaks (transformers' logger calls): 1,996,044 B predicted, 1,996,092 B measured; 8% high while every
    # iteration recompiled (memgraph/private_api.py dynamo_guards_see_dispatch_modes)
    "tiny-gpt2": dict(seq_len=32),
    # 6 graphs, 14 graph breaks: 2,624,756 B predicted, 2,615,500 B measured (+0.35%; +10.8% while Dynamo also
    # compiled the recorder's __torch_dispatch__, entered from the eager code between breaks)
    "tiny-llava": dict(seq_len=64, images=1),
}
GRAPHS = {"tiny-gpt2": "2 graphs, 2 graph breaks", "tiny-llava": "6 graphs, 14 graph breaks"}  # else 1 graph, 0


def _steady_measured(model: str, **kw) -> int:
    return max(it["peak_allocated"] for it in measure(model, device="cpu", **kw)["iterations"][1:])


@pytest.mark.parametrize("family", list(FAMILIES))
def test_compiled_step_within_2_percent(family):
    model = str(CONFIGS / f"{family}.json")
    kw = dict(FAMILIES[family], batch_size=1, optimizer="sgd", compile=True)
    r = analyze(model, target="cpu", **kw)
    predicted, measured = r.steady_state_peak.bytes, _steady_measured(model, **kw)
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)
    breaks = GRAPHS.get(family, "1 graph, 0 graph breaks")
    assert any(n.startswith("compiled: torch.compile (mode default)") and breaks in n for n in r.notes)


# Measured in a fresh process (as a user's run is): in the test's own process, after the meta trace of analyze(),
# the real compiled step held 149,492 B more in its steady state (2,499,964 B measured, -6.0%), and within 2% after
# the rest of the suite (the process's history decides it; no tensor is among the cyclic garbage after the compiling
# iteration, gc.DEBUG_SAVEALL). Alone in a fresh process: 2,350,520 B measured in iterations 1 and 2, 2,350,472 B
# predicted (-0.002%); the eager cpu target is exact on the same inputs (2,634,648 B vs 2,634,664 B).
WHISPER = dict(audio_seconds=1.0, target_len=16)

_MEASURE_ALONE = ("import json, sys; from memgraph.api import measure; "
                  "print(json.dumps(measure(sys.argv[1], device='cpu', **json.loads(sys.argv[2]))['iterations']))")


def _steady_measured_alone(model: str, **kw) -> int:
    """The steady-state peak of the real step measured in a process of its own (nothing traced before it)."""
    out = subprocess.run([sys.executable, "-c", _MEASURE_ALONE, model, json.dumps(kw)], capture_output=True,
                         text=True, check=True)
    return max(it["peak_allocated"] for it in json.loads(out.stdout.strip().splitlines()[-1])[1:])


def test_whisper_compiled_step_within_2_percent():
    model = str(CONFIGS / "tiny-whisper.json")
    kw = dict(WHISPER, batch_size=1, optimizer="sgd", compile=True)
    measured = _steady_measured_alone(model, **kw)
    predicted = analyze(model, target="cpu", **kw).steady_state_peak.bytes
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)
