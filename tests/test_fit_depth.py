"""Every candidate of ``memgraph fit`` that can be depth-synthesized is, with the 3- and 4-layer traces alone: the
notes of --optimizer-in-backward and --activation-offload are typed (memgraph/notes.py), so no 2-layer notes trace
is made for them, and the synthesized analysis equals the full trace's, notes included."""

from dataclasses import replace

import pytest

from memgraph.api import analyze
from memgraph.model_spec.options import TrainingOptions
from tests.conftest import deep_tiny_llama, traced_depths



@pytest.mark.slow  # a 12-layer tiny-llama traced at 3 and 4 layers and in full, twice
@pytest.mark.parametrize("change", [{"optimizer_in_backward": True}, {"activation_offload": True}])
def test_typed_notes_need_no_notes_trace_and_equal_the_full_trace(change, tmp_path, monkeypatch):
    deep, depths = deep_tiny_llama(tmp_path), traced_depths(monkeypatch)
    opts = TrainingOptions(seq_len=32, gpu="a100-40gb", **change)
    synthesized = analyze(deep, opts)
    assert depths == [3, 4]  # no 2-layer trace for the notes
    full = analyze(deep, replace(opts, depth_synthesis="off"))
    assert synthesized.notes[:-1] == full.notes  # the last: "depth synthesis: traced 3 and 4 of 12 layers ..."
    assert synthesized.notes[-1].startswith("depth synthesis: traced 3 and 4 of 12 layers")
    assert (synthesized.required_bytes, synthesized.required_bytes_upper, synthesized.steady_state_peak.bytes) == \
        (full.required_bytes, full.required_bytes_upper, full.steady_state_peak.bytes)
