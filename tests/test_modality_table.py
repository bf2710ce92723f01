"""Per-modality rows add up to the report's totals."""

from memgraph.api import analyze
from tests.conftest import CONFIGS


def test_clip_modality_rows_add_up_to_the_totals():
    r = analyze(str(CONFIGS / "tiny-clip.json"), seq_len=16, batch_size=2, target="cpu")
    rows = {m.modality: m for m in r.modalities}
    assert {"vision encoder", "text encoder"} <= set(rows)
    assert sum(m.peak_bytes for m in r.modalities) == r.steady_state_peak.bytes
    assert sum(m.parameters for m in r.modalities) == r.parameters
    assert sum(m.parameter_bytes for m in r.modalities) == r.static["parameters"]
    assert sum(m.gradient_bytes for m in r.modalities) == r.static["gradients"]
    assert sum(m.optimizer_state_bytes for m in r.modalities) == r.static["optimizer_state"]
    assert r.peak_modality in rows


def test_text_only_model_is_one_language_model_group():
    r = analyze(str(CONFIGS / "tiny-llama.json"), seq_len=16, target="cpu")
    groups = {m.modality for m in r.modalities if m.parameters}
    assert groups == {"language model"}
