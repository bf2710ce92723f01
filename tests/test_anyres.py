"""Any-resolution tiling (LLaVA-NeXT and its OneVision / NeXT-Video copies): --image-size is the image's own size;
the processor's tiles and the model's image tokens come from the model's own functions (model_spec/anyres.py)."""

import pytest
import torch

from memgraph.api import analyze
from memgraph.model_spec.options import TrainingOptions, parse_image_size
from memgraph.model_spec.sources import resolve
from tests.conftest import CONFIGS

# 32-px tiles of 8-px patches (4 x 4 per tile); pinpoints [32, 64], [64, 32], [64, 64], [96, 32], [32, 96]
NEXT = str(CONFIGS / "tiny-llava-next.json")


def _batch(size):
    spec = resolve(NEXT)
    b = {s.name: s for s in spec.batch(TrainingOptions(seq_len=128, image_size=parse_image_size(size), target="cpu"), torch.float32).inputs}
    image_tokens = int((b["input_ids"].value() == spec.config.image_token_id).sum())
    return b, image_tokens


@pytest.mark.parametrize("size, tiles, tokens", [
    # 32x32: every pinpoint holds all 1,024 pixels; [32, 64] wastes the least (1,024 px, first of the ties):
    # 1 x 2 tiles + the whole image = 3. Tokens: the whole image's 4 x 4 = 16 patches (CLS dropped), then the
    # 4 x 8 grid of the two tiles unpadded to the image's aspect (8 * 32 / 32 = 4 columns kept: 4 x 4) plus one
    # newline per row: 16 + 4 = 20; 16 + 20 = 36
    ("32", 3, 36),
    # 64x32 (H x W): pinpoint [64, 32] fits exactly: 2 x 1 tiles + 1 = 3; tokens 16 + an 8 x 4 grid (aspect already
    # the image's, nothing unpadded) + 8 newlines = 16 + 32 + 8 = 56
    ("64x32", 3, 56),
    # 96x96: [64, 64] keeps the most pixels (4,096 of 9,216): 2 x 2 tiles + 1 = 5; tokens 16 + 8 x 8 + 8 = 88
    ("96", 5, 88),
])
def test_an_image_becomes_the_processors_tiles(size, tiles, tokens):
    b, image_tokens = _batch(size)
    h, w = (int(v) for v in (size.split("x") if "x" in size else (size, size)))
    assert b["pixel_values"].shape == (1, tiles, 3, 32, 32)
    assert b["image_sizes"].value().tolist() == [[h, w]]
    assert image_tokens == tokens


def test_the_report_states_the_tiles():
    result = analyze(NEXT, TrainingOptions(seq_len=128, image_size=96, target="cpu"))
    assert ("image 96x96 is resized to the grid pinpoint 64x64 and cut into 4 tiles of 32 px, plus the whole image "
            "as one more tile: 5 tiles per image") in result.notes
