"""--target cpu --compile against the real compiled training step on the CPU, measured live.

The measurement runs ``torch.compile(model)`` as a user writes it (Inductor's C++ backend, g++ builds the kernels)
and reads the CPU allocator from torch.profiler's memory events (memgraph/measure/cpu.py); the prediction runs
Inductor's generated wrapper on meta (memgraph/compiled/inductor_cpu.py). Tolerance: 2% of the measured
steady-state peak, the bound the cpu target promises; measured on torch 2.13.0+cpu the two agree to the byte
for the configs below but T5 (8 B apart). Slow: each compiles twice with Inductor and the real one runs g++ (minutes on 2 cores).
"""

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
    # graph breaks (transformers' logger calls): 1,835,272 B predicted, 1,835,320 B measured, both after the
    # collection of Dynamo's garbage after iteration 1 (160,772 B of the step's tensors, GARBAGE); 1,996,044 and
    # 1,996,092 B before that collection; 8% high while every iteration recompiled (memgraph/private_api.py
    # dynamo_guards_see_dispatch_modes)
    "tiny-gpt2": dict(seq_len=32),
    # 7 graphs, 14 graph breaks: 2,577,076 B predicted, 2,578,636 B measured (-0.06%) after the collection of
    # Dynamo's garbage (GARBAGE); 2,624,756 vs 2,615,500 B (+0.35%) before it; +10.8% while Dynamo also compiled the
    # recorder's __torch_dispatch__, entered from the eager code between breaks
    "tiny-llava": dict(seq_len=64, images=1),
}
# bytes Dynamo's tracing state kept after the compiling iteration, freed by the trace's gc.collect() (its note), on
# torch 2.13.0; the other families: no note, nothing freed. GPT-2: the first compiled call's outputs (its 32x1000
# float32 logits among them). The real step's collection (iteration-1 end less iteration-2 start) frees at most as
# much: as much for GPT-2 (160,772 B); for LLaVA 36,864 B or 47,680 B in two runs of this test alone and 308,740 B
# after the other families in one process (torch 2.13.0; Python's automatic collection, run during iteration 1 or
# not, frees part of it first), so the real figure is not bounded by the trace's.
GARBAGE = {"tiny-gpt2": 160_772, "tiny-llava": 47_680}
# T5: 8 B that Dynamo's bytecode tracing allocates on the CPU in iteration 1 and keeps (profiled on torch 2.13.0+cpu:
# net +8 B of the iteration's CPU events fall inside ``bytecode_tracing``); the trace has no such allocation, hence
# the measured steady state 8 B above the prediction. Whether it is still reachable after iteration 1 depends on the
# process's history: kept in this test alone (0 B collected), cyclic garbage after the suite's earlier files on CI's
# machine (stop 42's run: 8 B collected, no note, since the trace's collection finds nothing of the step's).
TRACING_KEPT = {"tiny-t5": 8}
# LLaVA: 6 graphs with autograd and one without (counted since the compiled optimizer step's graphs are: graphs.py
# GraphStats.inference)
GRAPHS = {"tiny-gpt2": "2 graphs, 2 graph breaks", "tiny-llava": "7 graphs, 14 graph breaks"}  # else 1 graph, 0


@pytest.mark.parametrize("family", list(FAMILIES))
def test_compiled_step_within_2_percent(family):
    model = str(CONFIGS / f"{family}.json")
    kw = dict(FAMILIES[family], batch_size=1, optimizer="sgd", compile=True)
    r = analyze(model, target="cpu", **kw)
    iterations = measure(model, device="cpu", **kw)["iterations"]
    predicted, measured = r.steady_state_peak.bytes, max(it["peak_allocated"] for it in iterations[1:])
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)
    collected = iterations[0]["end_allocated"] - iterations[1]["start_allocated"]
    garbage = [n for n in r.notes if n.startswith("compile: Python's garbage collector freed")]
    if family in GARBAGE:  # the real figure depends on the process's history (see GARBAGE): present, not bounded
        assert 0 <= collected and f"({GARBAGE[family]:,} B) in this trace" in garbage[0], (collected, garbage)
    else:
        assert collected <= TRACING_KEPT.get(family, 0) and not garbage, (collected, garbage)
    breaks = GRAPHS.get(family, "1 graph, 0 graph breaks")
    assert any(n.startswith("compiled: torch.compile (mode default)") and breaks in n for n in r.notes)


# 2,350,472 B predicted, 2,350,520 B measured (-0.002%); the eager cpu target is exact on the same inputs
# (2,634,648 B vs 2,634,664 B). The compiling iteration leaves Dynamo's tracing state as cyclic garbage holding
# 149,444 B of CPU allocations; before the measurement collected it after each compiled iteration
# (measure/real_step.py collect_compile_garbage), the steady state measured 2,499,964 B (-6.0%) wherever Python's
# automatic collection had not run in between: after an earlier trace in the same process, and on CI's machine even
# in a fresh process (stop 39's CI run).
WHISPER = dict(audio_seconds=1.0, target_len=16)


def test_whisper_compiled_step_within_2_percent():
    """The trace first, then the real step in the same process: the order that measured 149,444 B of Dynamo's
    garbage into the steady state (2,499,964 B) before the collection after each compiled iteration."""
    model = str(CONFIGS / "tiny-whisper.json")
    kw = dict(WHISPER, batch_size=1, optimizer="sgd", compile=True)
    predicted = analyze(model, target="cpu", **kw).steady_state_peak.bytes
    iterations = measure(model, device="cpu", **kw)["iterations"]
    starts = [it["start_allocated"] for it in iterations[1:]]  # the garbage gone: 48 B above iteration 1's start
    assert starts == [iterations[0]["start_allocated"] + 48] * len(starts)
    measured = max(it["peak_allocated"] for it in iterations[1:])
    assert abs(predicted - measured) <= TOLERANCE * measured, (predicted, measured)
