"""Image-text models analyse past 2^20 tokens: the shadow-value cap grows with the inputs.

Before, shadows (real values of integer tensors that model code reads back) were capped at 2^20
elements, so LLaVA's image-token count (``(input_ids == image_token_id).sum()`` then ``.item()``)
had no value at 64 x 16,400 = 1,049,600 tokens and the trace failed with "Tensor.item() cannot
be called on meta tensors".
"""

import pytest

from memgraph.api import analyze
from memgraph.trace.shadow_values import DEFAULT_MAX_ELEMENTS, ShadowValues
from tests.conftest import CONFIGS


def test_the_cap_grows_with_the_seeded_inputs():
    import torch

    sv = ShadowValues()
    ids = torch.empty(64, 16400, dtype=torch.int64, device="meta")
    sv.attach(ids, torch.zeros(64, 16400, dtype=torch.int64))
    assert sv.max_elements == 4 * 64 * 16400 > DEFAULT_MAX_ELEMENTS  # derived [3, b, s] position ids fit


@pytest.mark.slow
def test_tiny_llava_past_2_to_the_20_tokens():
    r = analyze(str(CONFIGS / "tiny-llava.json"), batch_size=64, seq_len=16400, optimizer="sgd")
    assert r.batch[0] == "input_ids=int64[64,16400]" and 64 * 16400 > 2**20
    assert any(n.startswith("input values:") for n in r.notes)  # the token count was answered from values
