"""Dynamo's recompile limit named in the report (memgraph/compiled/recompile_limit.py).

The fast test makes the real Dynamo hit its limit (12 modules whose forward Dynamo specialises on an int attribute,
compiled one by one, eager backend) and checks what the capture read off Dynamo's own warning. The slow one is the
case users meet: a 12-layer tiny Llama under ``--compile --strategy fsdp`` (each decoder layer compiled, FSDP2's
per-block compile) hits the limit on the KV cache's ``layer_idx`` guard; with ``use_cache`` false one graph serves
every layer (measured, torch 2.13.0, transformers 5.23: 8 graphs against 1). The layers past the limit run eagerly
with the trace's autocast and SDPA emulations (memgraph/compiled/eager_fallback.py): on the cuda target their
attention is SDPA's flash kernel, as on the GPU, not the math path the bare meta call takes.
"""

import json
import logging

import pytest
import torch

from memgraph.api import analyze
from memgraph.compiled.recompile_limit import LimitHit, recompile_limit_hits

LIMIT = 8  # torch._dynamo.config.recompile_limit's default (torch 2.13.0, torch/_dynamo/config.py)


class _Scaled(torch.nn.Module):
    def __init__(self, index: int):
        super().__init__()
        self.index = index  # an int attribute: Dynamo guards on its value, so each module compiles a variant
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x) * self.index


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_dynamo_hit_is_captured_with_function_and_last_guard():
    torch._dynamo.reset()
    blocks = [_Scaled(i) for i in range(LIMIT + 4)]
    for block in blocks:
        block.compile(backend="eager")
    printed = _Records()  # what torch's own handler (on the "torch._dynamo" logger) would print to stderr
    logging.getLogger("torch._dynamo").addHandler(printed)
    try:
        with recompile_limit_hits() as hits:
            x = torch.randn(2, 4)
            for block in blocks:
                x = block(x)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(printed)
    torch._dynamo.reset()
    assert len(hits) == 1  # Dynamo logs once, then runs the frame eagerly
    # not printed as well: the report's note says it (Dynamo's warning names the trace's own block forward)
    assert not [m for m in printed.messages if m.startswith("torch._dynamo hit config.")], printed.messages
    hit = hits[0]
    assert (hit.limit_type, hit.limit) == ("recompile_limit", LIMIT)
    assert hit.function.startswith("'forward' (") and __file__ in hit.function
    assert f"index == {LIMIT - 1}" in hit.last_reason  # the last variant compiled was for index 7
    note = hit.note()
    assert note.startswith(f"compile: Dynamo hit its recompile_limit ({LIMIT}) on 'forward' (")
    assert "torch._dynamo.config.recompile_limit above the number of variants" in note
    assert "\n" not in note


def test_capture_ends_with_its_block():
    with recompile_limit_hits() as hits:
        pass
    torch._dynamo.reset()
    blocks = [_Scaled(i) for i in range(LIMIT + 1)]
    for block in blocks:
        block.compile(backend="eager")
    for block in blocks:
        block(torch.randn(2, 4))
    torch._dynamo.reset()
    assert hits == []


def test_note_names_the_kv_cache_for_a_layer_idx_guard_and_shortens_installed_paths():
    hit = LimitHit("recompile_limit", 8,
                   "'forward_with_checkpointing' (/venv/lib/python3.11/site-packages/transformers/modeling_layers.py:88)",
                   "0/7: self._modules['self_attn'].layer_idx == 7                # keys, values = ...")
    note = hit.note()
    assert "on 'forward_with_checkpointing' (transformers/modeling_layers.py:88);" in note
    assert "(last guard that failed: 0/7: self._modules['self_attn'].layer_idx == 7)" in note
    assert "use_cache=True" in note and "--no-kv-cache (use_cache false, as torchtune's models have no cache) compiles one graph for every layer" in note


@pytest.mark.slow
def test_per_block_compile_of_a_12_layer_llama_names_the_limit(tmp_path):
    config = json.loads(open("tests/configs/tiny-llama.json").read())
    config["num_hidden_layers"] = 12
    notes = {}
    for use_cache in (True, False):
        path = tmp_path / f"llama-12-{use_cache}.json"
        path.write_text(json.dumps({**config, "use_cache": use_cache}))
        notes[use_cache] = analyze(str(path), seq_len=16, batch_size=1, nproc=2, strategy="fsdp",
                                   compile=True).notes
    compiled = {k: next(n for n in v if n.startswith("compiled: ")) for k, v in notes.items()}
    assert "8 graphs, 0 graph breaks" in compiled[True]
    assert "1 graph, 0 graph breaks" in compiled[False]
    hits = [n for n in notes[True] if n.startswith("compile: Dynamo hit")]
    assert len(hits) == 1 and "layer_idx == 7" in hits[0] and "use_cache=True" in hits[0]
    assert "on the forward of LlamaDecoderLayer, each compiled on its own;" in hits[0]
    assert not any(n.startswith("compile: Dynamo hit") for n in notes[False])


@pytest.mark.slow
def test_layers_past_the_limit_keep_the_sdpa_emulation_on_the_cuda_target(tmp_path):
    """12-layer tiny Llama, bf16-mixed, cuda target: 24 flash SDPA calls, 16 in the 8 compiled layers' graphs and 8
    from the 4 eager layers over the trace's 2 iterations (measured; without eager_fallback.py the eager layers
    took the math path on meta: 16 calls, and the steady-state peak 86,963,200 B against 82,265,088 B)."""
    config = json.loads(open("tests/configs/tiny-llama.json").read())
    path = tmp_path / "llama-12.json"
    path.write_text(json.dumps({**config, "num_hidden_layers": 12}))
    r = analyze(str(path), seq_len=256, batch_size=1, nproc=2, strategy="fsdp", compile=True,
                precision="bf16-mixed")
    sdpa = next(n for n in r.notes if n.startswith("SDPA: "))
    assert sdpa.startswith("SDPA: flash kernel (bfloat16") and " x 24 calls" in sdpa, sdpa
    assert r.steady_state_peak.bytes == 82_265_088
