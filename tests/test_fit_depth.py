"""Every candidate of ``memgraph fit`` that can be depth-synthesized is, with the 3- and 4-layer traces alone: the
notes of --optimizer-in-backward and --activation-offload are typed (memgraph/notes.py), so no 2-layer notes trace
is made for them, and the synthesized analysis equals the full trace's, notes included."""

import json
from dataclasses import replace
from pathlib import Path

import pytest

from memgraph.api import analyze
from memgraph.model_spec.options import TrainingOptions

TINY = str(Path(__file__).parent / "configs" / "tiny-llama.json")


@pytest.mark.slow  # a 12-layer tiny-llama traced at 3 and 4 layers and in full, twice
@pytest.mark.parametrize("change", [{"optimizer_in_backward": True}, {"activation_offload": True}])
def test_typed_notes_need_no_notes_trace_and_equal_the_full_trace(change, tmp_path, monkeypatch):
    import memgraph.trace.tracer as tracer

    config = json.loads(Path(TINY).read_text())
    config["num_hidden_layers"] = 12  # at least depth synthesis' MIN_DEPTH (10)
    deep = tmp_path / "deep-llama.json"
    deep.write_text(json.dumps(config))
    depths = []
    real = tracer._trace_all_layers
    monkeypatch.setattr(tracer, "_trace_all_layers",
                        lambda s, o, rank=0: depths.append(s.config.num_hidden_layers) or real(s, o, rank))
    opts = TrainingOptions(seq_len=32, gpu="a100-40gb", **change)
    synthesized = analyze(str(deep), opts)
    assert depths == [3, 4]  # no 2-layer trace for the notes
    full = analyze(str(deep), replace(opts, depth_synthesis="off"))
    assert synthesized.notes[:-1] == full.notes  # the last: "depth synthesis: traced 3 and 4 of 12 layers ..."
    assert synthesized.notes[-1].startswith("depth synthesis: traced 3 and 4 of 12 layers")
    assert (synthesized.required_bytes, synthesized.required_bytes_upper, synthesized.steady_state_peak.bytes) == \
        (full.required_bytes, full.required_bytes_upper, full.steady_state_peak.bytes)
